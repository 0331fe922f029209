//! `xlaprof demo`: trains the MLP sample (784-512-512-10, Adam) under the profiler, writes the
//! profile, and prints the report with its findings.
//!
//! The training loop has two mistakes that are common in real lazy-tensor programs, so the report
//! has something to find: the data set does not divide into whole batches (the last, smaller batch
//! of each epoch compiles a second graph), and a guard against a diverging loss reads the loss
//! before the step ends (a hidden sync: every step runs as two graphs).

use std::path::Path;

use xlaprof_core::nn::{Adam, Module, Optimizer};
use xlaprof_core::Tensor;
use xlaprof_profiler::{analyze, report, Recording, Thresholds};
use xlaprof_samples::{Mlp, Prototypes};

const SAMPLES: usize = 1000;
const BATCH: usize = 64;
const EPOCHS: usize = 2;

pub fn run(out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("xlaprof demo: training a 784-512-512-10 MLP with Adam under the profiler");
    println!(
        "  {SAMPLES} samples in batches of {BATCH}, {EPOCHS} epochs; profile: {}\n",
        out.display()
    );
    let mut data = Prototypes::new(10, 784, 42);
    let (xs, ys) = data.batch_host(SAMPLES, 6.0);
    let model = Mlp::new(&[784, 512, 512, 10], 7)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;

    let recording = Recording::to_file(out)?;
    let mut step = 0;
    'training: for epoch in 1..=EPOCHS {
        for start in (0..SAMPLES).step_by(BATCH) {
            let end = (start + BATCH).min(SAMPLES);
            let n = (end - start) as i64;
            let x = Tensor::from_slice(&xs[start * 784..end * 784], &[n, 784])?;
            let y = Tensor::from_slice(&ys[start..end], &[n])?;
            opt.zero_grad();
            let loss = model.forward(&x)?.cross_entropy(&y)?;
            loss.backward()?;
            opt.step()?;
            // Mistake 2: reading the loss here, before step(), runs the loss's graph on its own.
            let value = loss.item()?;
            if !value.is_finite() {
                println!("  the loss diverged at step {step}; stopping");
                break 'training;
            }
            xlaprof_core::step()?;
            step += 1;
            if step % 8 == 0 {
                println!("  epoch {epoch} step {step:>3}  loss {value:.4}");
            }
        }
    }
    let profile = recording.stop();
    let analysis = analyze(&profile, &Thresholds::default());
    println!();
    print!("{}", report::short(&analysis));
    println!("\nThe whole report: xlaprof report {}", out.display());
    println!("Explore it: xlaprof view {0} (terminal) or xlaprof gui {0} (window)", out.display());
    Ok(())
}
