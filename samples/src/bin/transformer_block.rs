//! Trains one causal self-attention block, forward and backward, on next-token prediction: each
//! sequence repeats a random block of 4 tokens, so after the first block every token is the one
//! 4 places back, which attention finds from the learned positions.
//!
//! Token embedding + learned positions, LayerNorm, Q/K/V projections, 4-head attention (matmul,
//! a causal mask from iota comparisons and `where`, softmax), output projection, residual,
//! LayerNorm, a 2-layer GELU MLP, residual, LayerNorm, a linear head to the vocabulary, and
//! cross-entropy; AdamW updates every parameter. The whole training step is one graph: it
//! compiles once, then every step is a cache hit. Prints the loss per step, whether it fell, and
//! how well the block predicts the predictable tokens of unseen sequences.
//!
//!     cargo run --release -p xlaprof-samples --bin transformer_block [STEPS] [--data-parallel N [--fsdp]]
//!
//! `--data-parallel N` splits each batch of sequences over N devices; `--fsdp` splits the
//! parameters and AdamW's state too.

use xlaprof_core::nn::{Adam, Embedding, LayerNorm, Linear, Module, Optimizer};
use xlaprof_core::{events, no_grad, DType, Result, Tensor};
use xlaprof_samples::parallel::Parallel;
use xlaprof_samples::Repeats;

const VOCAB: usize = 16;
const LEN: usize = 16;
const PERIOD: usize = 4;
const DIM: usize = 32;
const HEADS: usize = 4;
const HEAD_DIM: usize = DIM / HEADS;
const HIDDEN: usize = 4 * DIM;
const BATCH: usize = 16;

struct Block {
    tokens: Embedding,
    /// One learned vector per position, `[LEN, DIM]`, added to the token embeddings.
    positions: Embedding,
    ln1: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    ln_final: LayerNorm,
    head: Linear,
}

impl Block {
    fn new(seed: u64) -> Result<Block> {
        let d = [DIM as i64];
        Ok(Block {
            tokens: Embedding::new(VOCAB, DIM, seed)?,
            positions: Embedding::new(LEN, DIM, seed + 1)?,
            ln1: LayerNorm::new(&d)?,
            q: Linear::new(DIM, DIM, true, seed + 2)?,
            k: Linear::new(DIM, DIM, true, seed + 3)?,
            v: Linear::new(DIM, DIM, true, seed + 4)?,
            out: Linear::new(DIM, DIM, true, seed + 5)?,
            ln2: LayerNorm::new(&d)?,
            fc1: Linear::new(DIM, HIDDEN, true, seed + 6)?,
            fc2: Linear::new(HIDDEN, DIM, true, seed + 7)?,
            ln_final: LayerNorm::new(&d)?,
            head: Linear::new(DIM, VOCAB, true, seed + 8)?,
        })
    }

    /// `[B, T]` token ids to `[B, T, VOCAB]` next-token logits.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let x = self.tokens.forward(ids)?.add(&self.positions.weight)?; // [B, T, D]
        let x = x.add(&self.attention(&self.ln1.forward(&x)?)?)?;
        let mlp = self.fc2.forward(&self.fc1.forward(&self.ln2.forward(&x)?)?.gelu()?)?;
        let x = x.add(&mlp)?;
        self.head.forward(&self.ln_final.forward(&x)?)
    }

    /// Multi-head causal self-attention of `[B, T, D]`.
    fn attention(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let heads = |y: Tensor| -> Result<Tensor> {
            y.reshape(&[b, t, HEADS as i64, HEAD_DIM as i64])?.permute(&[0, 2, 1, 3])
            // [B, H, T, Dh]
        };
        let (q, k, v) =
            (heads(self.q.forward(x)?)?, heads(self.k.forward(x)?)?, heads(self.v.forward(x)?)?);
        let scores = q.matmul(&k.transpose(-1, -2)?)?.mul_scalar(1.0 / (HEAD_DIM as f64).sqrt())?;
        let hidden = Tensor::scalar(-1e9, scores.dtype());
        let scores = Tensor::where_(&causal_mask(t)?, &scores, &hidden)?; // [B, H, T, T]
        let mixed = scores.softmax(-1)?.matmul(&v)?; // [B, H, T, Dh]
        self.out.forward(&mixed.permute(&[0, 2, 1, 3])?.reshape(&[b, t, DIM as i64])?)
    }
}

/// `[T, T]`, true where query `i` may see key `j` (`j <= i`).
fn causal_mask(t: i64) -> Result<Tensor> {
    let i = Tensor::arange(0.0, t as f64, 1.0, DType::S64)?;
    i.reshape(&[1, t])?.le(&i.reshape(&[t, 1])?)
}

impl Module for Block {
    fn parameters(&self) -> Vec<Tensor> {
        let linears = [&self.q, &self.k, &self.v, &self.out, &self.fc1, &self.fc2, &self.head];
        let norms = [&self.ln1, &self.ln2, &self.ln_final];
        let mut params = self.tokens.parameters();
        params.extend(self.positions.parameters());
        params.extend(linears.iter().flat_map(|l| l.parameters()));
        params.extend(norms.iter().flat_map(|n| n.parameters()));
        params
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // XLAPROF_PROFILE=FILE records the whole run.
    xlaprof_profiler::init_from_env()?;
    let args: Vec<String> = std::env::args().collect();
    let steps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let parallel = Parallel::from_args(&args)?;
    let mut data = Repeats::new(VOCAB, PERIOD, LEN, 42);
    let model = Block::new(7)?;
    let params = model.parameters();
    if let Some(p) = &parallel {
        println!("{}", p.describe());
        p.shard_parameters(&params)?;
    }
    let count: usize = params.iter().map(Tensor::element_count).sum();
    let mut opt = Adam::adamw(params, 1e-2, 0.01)?;
    println!(
        "vocabulary {VOCAB}, sequences of {LEN} repeating {PERIOD} tokens, batch {BATCH}, \
         width {DIM}, {HEADS} heads, {count} parameters"
    );
    let start = events::counters();
    let mut losses = Vec::with_capacity(steps);
    println!("step   loss      compiles  cache hits");
    for step in 1..=steps {
        let (ids, targets) = data.batch(BATCH)?;
        if let Some(p) = &parallel {
            p.shard_batch(&[&ids, &targets])?;
        }
        opt.zero_grad();
        // The activations die with this block, so they are not outputs of the step's graph.
        let loss = {
            let logits = model.forward(&ids)?.reshape(&[(BATCH * LEN) as i64, VOCAB as i64])?;
            let loss = logits.cross_entropy(&targets)?;
            loss.backward()?;
            loss
        };
        opt.step()?;
        xlaprof_core::step()?;
        let c = events::counters();
        let value = loss.item()?;
        losses.push(value);
        println!(
            "{step:>4}   {value:<8.4}  {:>8}  {:>10}",
            c.cache_misses - start.cache_misses,
            c.cache_hits - start.cache_hits
        );
    }
    // Graphs built by the training steps: compiled by XLA, or loaded from XLAPROF_CACHE_DIR.
    let training_graphs = events::counters().cache_misses - start.cache_misses;
    if let (Some(first), Some(last)) = (losses.first(), losses.last()) {
        let verdict = if last < first { "decreased" } else { "did not decrease" };
        println!("loss {verdict}: {first:.4} at step 1, {last:.4} at step {steps}");
    }

    // Unseen sequences: how often the most likely next token is right where it can be known.
    let held_out = 64;
    let (ids, targets) = data.batch_host(held_out);
    let ids = Tensor::from_slice(&ids, &[held_out as i64, LEN as i64])?;
    let predicted = no_grad(|| model.forward(&ids))?.argmax(-1, false)?.to_vec::<i64>()?;
    let (mut right, mut total) = (0, 0);
    for (i, (p, t)) in predicted.iter().zip(&targets).enumerate() {
        if data.predictable(i % LEN) {
            total += 1;
            right += (p == t) as usize;
        }
    }
    println!(
        "held-out next-token accuracy where predictable: {:.1}% (chance is {:.1}%)",
        100.0 * right as f64 / total as f64,
        100.0 / VOCAB as f64
    );
    println!("training graphs compiled: {training_graphs}");
    Ok(())
}
