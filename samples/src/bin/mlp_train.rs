//! Trains a 784-512-512-10 MLP with Adam on a synthetic but learnable classification set, printing
//! the loss per step and how many graphs XLA compiled: one, after which every step is a cache hit.
//!
//!     cargo run --release -p xlaprof-samples --bin mlp_train [STEPS] [--data-parallel N [--fsdp]]
//!
//! `--data-parallel N` splits each batch over N devices (XLA's SPMD partitioner adds the
//! gradients' all-reduce); `--fsdp` splits the parameters and Adam's state too. The losses are
//! the one-device run's, to float rounding.

use xlaprof_core::nn::{Adam, Module, Optimizer};
use xlaprof_core::{events, no_grad, Result};
use xlaprof_samples::parallel::Parallel;
use xlaprof_samples::{accuracy, Mlp, Prototypes};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // XLAPROF_PROFILE=FILE records the whole run.
    xlaprof_profiler::init_from_env()?;
    let args: Vec<String> = std::env::args().collect();
    let steps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(40);
    let parallel = Parallel::from_args(&args)?;
    let mut data = Prototypes::new(10, 784, 42);
    let model = Mlp::new(&[784, 512, 512, 10], 7)?;
    if let Some(p) = &parallel {
        println!("{}", p.describe());
        p.shard_parameters(&model.parameters())?;
    }
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let start = events::counters();
    println!("step   loss      compiles  cache hits");
    for step in 1..=steps {
        let (x, y) = data.batch(64, 1.5)?;
        if let Some(p) = &parallel {
            p.shard_batch(&[&x, &y])?;
        }
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        xlaprof_core::step()?;
        let c = events::counters();
        println!(
            "{step:>4}   {:<8.4}  {:>8}  {:>10}",
            loss.item()?,
            c.compiles - start.compiles,
            c.cache_hits - start.cache_hits
        );
    }
    let (x, y) = data.batch(512, 1.5)?;
    let logits = no_grad(|| model.forward(&x))?;
    let acc = accuracy(&logits, &y)?;
    let c = events::counters();
    println!("held-out accuracy {:.1}% (chance is 10%)", acc * 100.0);
    // The evaluation forward pass is the one graph besides the training step.
    let graphs =
        c.compiles + c.persistent_cache_hits - start.compiles - start.persistent_cache_hits;
    println!("training graphs compiled: {}", graphs - 1);
    println!(
        "persistent compile cache: {} loaded, {} compiled",
        c.persistent_cache_hits - start.persistent_cache_hits,
        c.compiles - start.compiles
    );
    Ok(())
}
