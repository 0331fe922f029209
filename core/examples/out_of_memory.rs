//! What running out of device memory looks like: a graph whose output is larger than the device
//! (`GIB` GiB of f32, default 1024) fails at its sync with an error that names the graph, XLA's
//! memory plan for it, the device's memory and the line of the sync, at the sync or, where the
//! host runs ahead of the device, at the wait for it. Exits 0 when that error
//! came, 1 otherwise. `cargo run --release -p xlaprof-core --example out_of_memory [GIB]`

use xlaprof_core::{DType, Error, Tensor};

fn main() {
    let gib: i64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1024);
    // Four rows of `gib / 4` GiB each, so no single dimension overflows XLA's limits.
    let row = gib * (1 << 30) / 4 / 4;
    let big = Tensor::full(&[4, row], 1.0, DType::F32).add_scalar(1.0).expect("an add");
    // On a GPU the sync returns once the program is queued: the failure comes with the wait.
    match xlaprof_core::sync().and_then(|()| xlaprof_core::wait()) {
        Err(e @ Error::OutOfMemory { .. }) => {
            println!("{e}");
            drop(big);
        }
        Err(e) => {
            println!("another error than out of memory: {e}");
            std::process::exit(1);
        }
        Ok(()) => {
            println!("{gib} GiB fit on the device: nothing ran out");
            std::process::exit(1);
        }
    }
}
