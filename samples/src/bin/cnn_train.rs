//! Trains a small CNN (conv 3x3 -> relu -> max pool -> conv 3x3 -> relu -> max pool -> linear)
//! with Adam to tell four kinds of noisy 16x16 shapes apart (horizontal bars, vertical bars,
//! diagonals, blobs), printing the loss per step and how many graphs XLA compiled: forward,
//! backward (convolution and pooling gradients included) and the update are one graph, compiled
//! once, then a cache hit every step.
//!
//!     cargo run --release -p xlaprof-samples --bin cnn_train [STEPS]

use xlaprof_core::nn::{Adam, Conv2d, Linear, Module, Optimizer};
use xlaprof_core::{events, no_grad, Result, Tensor};
use xlaprof_samples::{accuracy, Shapes};

const SIZE: usize = 16;
const BATCH: usize = 32;
const NOISE: f32 = 0.4;

struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    head: Linear,
}

impl Cnn {
    fn new(classes: usize, seed: u64) -> Result<Cnn> {
        let flat = 16 * (SIZE / 4) * (SIZE / 4);
        Ok(Cnn {
            conv1: Conv2d::new(1, 16, 3, 1, 1, seed)?, // [N, 16, 16, 16], pooled to 8x8
            conv2: Conv2d::new(16, 16, 3, 1, 1, seed + 1)?, // [N, 16, 8, 8], pooled to 4x4
            head: Linear::new(flat, classes, true, seed + 2)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.conv1.forward(x)?.relu()?.max_pool2d([2, 2], [2, 2], [0, 0])?;
        let h = self.conv2.forward(&h)?.relu()?.max_pool2d([2, 2], [2, 2], [0, 0])?;
        self.head.forward(&h.reshape(&[x.dims()[0], -1])?)
    }
}

impl Module for Cnn {
    fn parameters(&self) -> Vec<Tensor> {
        [&self.conv1.parameters()[..], &self.conv2.parameters(), &self.head.parameters()].concat()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // XLAPROF_PROFILE=FILE records the whole run.
    xlaprof_profiler::init_from_env()?;
    let steps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(40);
    let classes = Shapes::CLASSES.len();
    let mut data = Shapes::new(SIZE, 42);
    let model = Cnn::new(classes, 7)?;
    let mut opt = Adam::new(model.parameters(), 1e-2)?;
    println!(
        "images 1x{SIZE}x{SIZE} of {classes} classes ({}), batch {BATCH}",
        Shapes::CLASSES.join(", ")
    );
    let start = events::counters();
    println!("step   loss      compiles  cache hits");
    for step in 1..=steps {
        let (x, y) = data.batch(BATCH, NOISE)?;
        opt.zero_grad();
        // The activations die with this block, so they are not outputs of the step's graph.
        let loss = {
            let loss = model.forward(&x)?.cross_entropy(&y)?;
            loss.backward()?;
            loss
        };
        opt.step()?;
        xlaprof_core::step()?;
        let c = events::counters();
        println!(
            "{step:>4}   {:<8.4}  {:>8}  {:>10}",
            loss.item()?,
            c.cache_misses - start.cache_misses,
            c.cache_hits - start.cache_hits
        );
    }
    // Graphs built by the training steps: compiled by XLA, or loaded from XLAPROF_CACHE_DIR.
    let training_graphs = events::counters().cache_misses - start.cache_misses;

    let (x, y) = data.batch(512, NOISE)?;
    let logits = no_grad(|| model.forward(&x))?;
    let acc = accuracy(&logits, &y)?;
    println!("held-out accuracy {:.1}% (chance is {:.0}%)", acc * 100.0, 100.0 / classes as f64);
    println!("training graphs compiled: {training_graphs}");
    Ok(())
}
