//! A training loop that recompiles on purpose, to show what does and does not cost a compile.
//!
//! XLA compiles a program for fixed shapes and dtypes, so the compiled-graph cache is keyed by
//! the graph's structure, shapes included. This loop trains a small MLP with SGD + momentum while
//! changing the batch size every few steps (32, 48, 64) and, from step 9 on, sometimes feeding
//! the inputs as f64 instead of f32 (the parameters stay f32; the f64 inputs promote the forward
//! pass to f64). Every new (batch, dtype) signature compiles a new graph; a signature seen before
//! is a cache hit, however long ago it was seen. Prints per step the batch size, the input dtype,
//! whether the step compiled or hit the cache, and its time; at the end, the signatures seen.
//!
//!     cargo run --release -p xlaprof-samples --bin recompile_demo [STEPS]

use std::time::Instant;

use xlaprof_core::nn::{Module, Optimizer, Sgd};
use xlaprof_core::{events, DType, Result, Tensor};
use xlaprof_samples::{Mlp, Prototypes};

const FEATURES: usize = 64;
const CLASSES: usize = 8;

/// The (batch size, input dtype) of each step; repeats after the last entry.
const SCHEDULE: [(usize, DType); 14] = [
    (32, DType::F32),
    (32, DType::F32),
    (48, DType::F32),
    (48, DType::F32),
    (32, DType::F32),
    (64, DType::F32),
    (64, DType::F32),
    (32, DType::F32),
    (32, DType::F64),
    (32, DType::F64),
    (48, DType::F64),
    (32, DType::F32),
    (48, DType::F64),
    (64, DType::F32),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // XLAPROF_PROFILE=FILE records the whole run.
    xlaprof_profiler::init_from_env()?;
    let steps: usize =
        std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(SCHEDULE.len());
    let mut data = Prototypes::new(CLASSES, FEATURES, 42);
    let model = Mlp::new(&[FEATURES, 128, CLASSES], 7)?;
    let mut opt = Sgd::new(model.parameters(), 0.05).with_momentum(0.9)?;

    let start = events::counters();
    // Each signature with the steps that used it, in order of first use.
    let mut seen: Vec<((usize, DType), Vec<usize>)> = Vec::new();
    let (mut compile_ms, mut hit_ms) = (0.0, 0.0);
    println!("step  batch  dtype  graph    time ms  loss     why");
    for step in 1..=steps {
        let (batch, dtype) = SCHEDULE[(step - 1) % SCHEDULE.len()];
        let before = events::counters();
        let t = Instant::now();

        let (x, y) = data.batch_host(batch, 1.0);
        let dims = [batch as i64, FEATURES as i64];
        let x = match dtype {
            DType::F64 => {
                Tensor::from_slice(&x.iter().map(|&v| v as f64).collect::<Vec<_>>(), &dims)?
            }
            _ => Tensor::from_slice(&x, &dims)?,
        };
        let y = Tensor::from_slice(&y, &[batch as i64])?;
        opt.zero_grad();
        let loss = {
            let loss = model.forward(&x)?.cross_entropy(&y)?;
            loss.backward()?;
            loss
        };
        opt.step()?;
        xlaprof_core::step()?;
        let value = loss.item()?;

        let ms = t.elapsed().as_secs_f64() * 1e3;
        let after = events::counters();
        let (misses, hits) =
            (after.cache_misses - before.cache_misses, after.cache_hits - before.cache_hits);
        let earlier = seen.iter().position(|(sig, _)| *sig == (batch, dtype));
        let (graph, why) = match (misses, hits, earlier) {
            (1, 0, None) => ("compile".to_string(), format!("new signature ({batch}, {dtype})")),
            (0, 1, Some(i)) => {
                ("hit".to_string(), format!("same signature as step {}", seen[i].1[0]))
            }
            // Not what this loop expects: say exactly what happened.
            _ => (
                format!("misses={misses},hits={hits}"),
                format!("unexpected for signature ({batch}, {dtype})"),
            ),
        };
        match earlier {
            Some(i) => seen[i].1.push(step),
            None => seen.push(((batch, dtype), vec![step])),
        }
        if misses > 0 {
            compile_ms += ms;
        } else {
            hit_ms += ms;
        }
        let dtype = dtype.to_string();
        println!("{step:>4}  {batch:>5}  {dtype:<5}  {graph:<7}  {ms:>7.1}  {value:<7.4}  {why}");
    }

    let end = events::counters();
    println!(
        "graphs compiled: {} ({} by XLA, {} loaded from the persistent cache)",
        end.cache_misses - start.cache_misses,
        end.compiles - start.compiles,
        end.persistent_cache_hits - start.persistent_cache_hits
    );
    println!("cache hits: {}", end.cache_hits - start.cache_hits);
    println!("time in steps that compiled: {compile_ms:.1} ms; in steps that hit: {hit_ms:.1} ms");
    println!("distinct signatures: {}", seen.len());
    println!("signatures (batch, dtype) in order of first use, with their steps:");
    for ((batch, dtype), used) in &seen {
        let used: Vec<String> = used.iter().map(|s| s.to_string()).collect();
        println!("  ({batch}, {dtype}): steps {}", used.join(" "));
    }
    Ok(())
}
