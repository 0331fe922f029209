//! `xlaprof demo`: a two-layer network's forward pass (matmul, bias, ReLU, softmax) written in
//! StableHLO, compiled by XLA through the PJRT plugin, run, timed, and checked against the same
//! computation done in plain Rust.

use std::time::{Duration, Instant};

use xlaprof_core::runtime::{Client, ClientOptions, CompileOptions, Plugin};

const BATCH: usize = 4;
const IN: usize = 8;
const HIDDEN: usize = 16;
const OUT: usize = 3;

const PROGRAM: &str = r#"
func.func @main(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>,
                %w2: tensor<16x3xf32>) -> tensor<4x3xf32> {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
       : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %bb = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
  %hb = stablehlo.add %h, %bb : tensor<4x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4x16xf32>
  %r = stablehlo.maximum %hb, %zero : tensor<4x16xf32>
  %logits = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0]
       : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%logits init: %ninf) applies stablehlo.maximum across dimensions = [1]
       : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
  %maxb = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<4xf32>) -> tensor<4x3xf32>
  %shift = stablehlo.subtract %logits, %maxb : tensor<4x3xf32>
  %e = stablehlo.exponential %shift : tensor<4x3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1]
       : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
  %sumb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<4xf32>) -> tensor<4x3xf32>
  %p = stablehlo.divide %e, %sumb : tensor<4x3xf32>
  return %p : tensor<4x3xf32>
}
"#;

/// Deterministic pseudo-random values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The same forward pass in plain Rust: the reference the XLA result is checked against.
fn reference(x: &[f32], w1: &[f32], b1: &[f32], w2: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; BATCH * OUT];
    for b in 0..BATCH {
        let hidden: Vec<f32> = (0..HIDDEN)
            .map(|j| {
                let dot: f32 = (0..IN).map(|k| x[b * IN + k] * w1[k * HIDDEN + j]).sum();
                (dot + b1[j]).max(0.0)
            })
            .collect();
        let logits: Vec<f32> =
            (0..OUT).map(|o| (0..HIDDEN).map(|j| hidden[j] * w2[j * OUT + o]).sum()).collect();
        let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
        let sum: f32 = exps.iter().sum();
        for o in 0..OUT {
            out[b * OUT + o] = exps[o] / sum;
        }
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{:>9.3} ms", d.as_secs_f64() * 1e3)
}

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let plugin = Plugin::from_env()?;
    let load = t.elapsed();
    let t = Instant::now();
    let client = Client::new(plugin, &ClientOptions::default())?;
    let create = t.elapsed();
    println!(
        "xlaprof demo: a 2-layer network's forward pass, compiled by XLA and run through PJRT\n"
    );
    println!("plugin    {}", plugin.path().display());
    let (major, minor) = plugin.api_version();
    println!("PJRT API  {major}.{minor}");
    println!(
        "platform  {} {} ({} devices: {})",
        client.platform_name(),
        client.platform_version(),
        client.devices().len(),
        client.devices().iter().map(|d| d.kind.as_str()).collect::<Vec<_>>().join(", ")
    );

    let t = Instant::now();
    let exe = client.compile(PROGRAM, &CompileOptions::default())?;
    let compile = t.elapsed();

    let (x, w1, b1, w2) =
        (values(BATCH * IN, 1), values(IN * HIDDEN, 2), values(HIDDEN, 3), values(HIDDEN * OUT, 4));
    let t = Instant::now();
    let inputs = [
        client.buffer_from_host(&x, &[BATCH as i64, IN as i64], 0)?,
        client.buffer_from_host(&w1, &[IN as i64, HIDDEN as i64], 0)?,
        client.buffer_from_host(&b1, &[HIDDEN as i64], 0)?,
        client.buffer_from_host(&w2, &[HIDDEN as i64, OUT as i64], 0)?,
    ];
    let upload = t.elapsed();
    let refs: Vec<_> = inputs.iter().collect();

    let t = Instant::now();
    let out = exe.execute(&refs)?;
    let first = t.elapsed();
    let mut runs: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let r = exe.execute(&refs);
            (t.elapsed(), r.is_ok())
        })
        .filter(|(_, ok)| *ok)
        .map(|(d, _)| d)
        .collect();
    runs.sort();
    let t = Instant::now();
    let probs = out[0].to_vec::<f32>()?;
    let download = t.elapsed();

    println!("\nsoftmax probabilities (XLA):");
    for row in probs.chunks(OUT) {
        let cells: Vec<String> = row.iter().map(|p| format!("{p:.4}")).collect();
        println!("  [{}]", cells.join(", "));
    }
    let want = reference(&x, &w1, &b1, &w2);
    let max_err = probs.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    println!("max |XLA - plain Rust reference| = {max_err:.2e}");

    let cost = exe.cost_analysis().ok().and_then(|c| c.flops());
    let stats = exe.memory_stats().ok();
    println!("\ntimings");
    println!("  plugin load          {}", ms(load));
    println!("  client create        {}", ms(create));
    println!("  compile (XLA)        {}", ms(compile));
    println!("  host -> device       {}  (4 inputs)", ms(upload));
    println!("  first execute        {}", ms(first));
    if let Some(median) = runs.get(runs.len() / 2) {
        println!("  cached execute       {}  (median of {})", ms(*median), runs.len());
    }
    println!("  device -> host       {}", ms(download));
    if let Some(flops) = cost {
        println!("  XLA cost analysis    {flops:>9.0} flops");
    }
    if let Some(s) = stats {
        println!(
            "  XLA memory plan      {:>9} bytes args, {} out, {} temp",
            s.argument_bytes, s.output_bytes, s.temp_bytes
        );
    }
    if max_err > 1e-5 {
        return Err(format!("XLA's result differs from the reference by {max_err}").into());
    }
    Ok(())
}
