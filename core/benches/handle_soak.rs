//! Shows that every PJRT handle is released: 10,000 compile / transfer / execute / read-back
//! cycles, printing resident memory as they go. A flat RSS after warm-up means nothing leaks.
//!
//!     cargo bench -p xlaprof-core --bench handle_soak [-- CYCLES]

use xlaprof_core::runtime::{Client, CompileOptions};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() -> xlaprof_core::Result<()> {
    let cycles: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let client = Client::from_env()?;
    let opts = CompileOptions::default();
    let mut baseline = 0;
    println!("{:>7} {:>10}", "cycle", "RSS MiB");
    for i in 0..=cycles {
        // A distinct constant per cycle so every compile is a real one.
        let program = format!(
            "func.func @main(%x: tensor<256xf32>) -> (tensor<256xf32>, tensor<f32>) {{\n\
               %c = stablehlo.constant dense<{i}.0> : tensor<256xf32>\n\
               %0 = stablehlo.multiply %x, %c : tensor<256xf32>\n\
               %z = stablehlo.constant dense<0.0> : tensor<f32>\n\
               %s = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<256xf32>, tensor<f32>) -> tensor<f32>\n\
               return %0, %s : tensor<256xf32>, tensor<f32>\n}}"
        );
        let exe = client.compile(&program, &opts)?;
        let x = client.buffer_from_host(&[1f32; 256], &[256], 0)?;
        let out = exe.execute(&[&x])?;
        let sum = out[1].to_vec::<f32>()?[0];
        assert_eq!(sum, 256.0 * i as f32);
        if i == 500 {
            baseline = rss_kib();
        }
        if i % 1000 == 0 {
            println!("{i:>7} {:>10.1}", rss_kib() as f64 / 1024.0);
        }
    }
    let end = rss_kib();
    println!(
        "RSS after warm-up (cycle 500): {:.1} MiB, at the end: {:.1} MiB, growth {:.1} KiB per 1000 cycles",
        baseline as f64 / 1024.0,
        end as f64 / 1024.0,
        (end as f64 - baseline as f64) / ((cycles.max(501) - 500) as f64 / 1000.0)
    );
    Ok(())
}
