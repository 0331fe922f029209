//! Tracing alone, for profilers (perf, a counting allocator): records the bench's chain
//! `x = x * 1.0001 + 0.5` (2,000 ops) again and again and drops it unsynced.
//! `cargo run --release -p xlaprof-core --example trace_chain [reps]`

use std::time::Instant;

use xlaprof_core::Tensor;

fn main() -> xlaprof_core::Result<()> {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    let x = Tensor::from_slice(&vec![1f32; 64 * 64], &[64, 64])?;
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        let mut y = x.clone();
        for _ in 0..1000 {
            y = y.mul_scalar(1.0001)?.add_scalar(0.5)?;
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / 2000.0);
        drop(y);
    }
    println!("tracing: {best:.0} ns per op (best of {reps})");
    Ok(())
}
