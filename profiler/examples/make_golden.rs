//! Writes the golden profile of the current format version to `profiler/tests/data/`.
//! Run once per format version: `cargo run --release -p xlaprof-profiler --example make_golden`.
//! Old golden files stay: each version's file must keep loading.

use xlaprof_core::nn::{Linear, Module, Optimizer, Sgd};
use xlaprof_core::{events, Tensor};
use xlaprof_profiler::{file, Recording};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("profile-v{}.xlaprof", file::VERSION));
    let recording = Recording::to_file(&path)?;
    let layer = Linear::new(8, 4, true, 1)?;
    let mut opt = Sgd::new(layer.parameters(), 0.1);
    for (step, batch) in [4i64, 4, 4, 6, 6].into_iter().enumerate() {
        let _scope = events::scope("train_step");
        let x = Tensor::from_slice(&vec![0.5f32; (batch * 8) as usize], &[batch, 8])?;
        let loss = layer.forward(&x)?.relu()?.mean(&[], false)?;
        loss.backward()?;
        opt.step()?;
        if step == 2 {
            println!("loss {}", loss.item()?); // a hidden sync inside the step
        }
        opt.zero_grad();
        xlaprof_core::step()?;
    }
    let profile = recording.stop();
    println!("{} records, {} syncs -> {}", profile.records, profile.syncs.len(), path.display());
    Ok(())
}
