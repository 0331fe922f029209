//! The profiler's figures: recording overhead on the MLP training step, cost per recorded event,
//! bytes per event on disk, loading and analysing a profile of at least 1,000,000 events, and
//! the time of each export.
//!
//!     cargo bench -p xlaprof-profiler --bench profiler [-- EVENTS]

use std::path::Path;
use std::time::Instant;

use xlaprof_core::nn::{Linear, Module, Optimizer, Sgd};
use xlaprof_core::Tensor;
use xlaprof_profiler::export::{self, Format};
use xlaprof_profiler::{analyze, load, Recording, Thresholds};

/// The MLP of the JAX peer's workload: 784-512-512-10 with ReLU.
struct Mlp(Vec<Linear>);

impl Mlp {
    fn new() -> xlaprof_core::Result<Mlp> {
        Ok(Mlp(vec![
            Linear::new(784, 512, true, 1)?,
            Linear::new(512, 512, true, 2)?,
            Linear::new(512, 10, true, 3)?,
        ]))
    }
    fn forward(&self, x: &Tensor) -> xlaprof_core::Result<Tensor> {
        let h = self.0[0].forward(x)?.relu()?;
        let h = self.0[1].forward(&h)?.relu()?;
        self.0[2].forward(&h)
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.0.iter().flat_map(|l| l.parameters()).collect()
    }
}

/// A fixed random batch of 64 inputs and labels.
fn batch() -> xlaprof_core::Result<(Tensor, Tensor)> {
    let x: Vec<f32> = (0..64 * 784).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    let y: Vec<i64> = (0..64).map(|i| i % 10).collect();
    Ok((Tensor::from_slice(&x, &[64, 784])?, Tensor::from_slice(&y, &[64])?))
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Where a measured run records its profile.
#[derive(Clone, Copy)]
enum Record<'a> {
    Off,
    Memory,
    File(&'a Path),
}

impl Record<'_> {
    fn start(self) -> Result<Option<Recording>> {
        Ok(match self {
            Record::Off => None,
            Record::Memory => Some(Recording::start()?),
            Record::File(path) => Some(Recording::to_file(path)?),
        })
    }
}

/// Median MLP step time (ms) over `steps` steps.
fn mlp_steps(model: &Mlp, opt: &mut Sgd, steps: usize, record: Record) -> Result<f64> {
    let recording = record.start()?;
    let mut times = Vec::new();
    for _ in 0..steps {
        let (x, y) = batch()?;
        let t = Instant::now();
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        xlaprof_core::step()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    if let Some(r) = recording {
        r.stop();
    }
    Ok(median(times))
}

/// Tiny syncs (an add and a sync each); returns seconds and records.
fn tiny_syncs(n: usize, record: Record) -> Result<(f64, u64)> {
    let x = Tensor::from_slice(&[1f32; 4], &[4])?;
    let recording = record.start()?;
    let t = Instant::now();
    for _ in 0..n {
        let _y = x.add_scalar(1.0)?;
        xlaprof_core::step()?;
    }
    let secs = t.elapsed().as_secs_f64();
    let records = recording.map(|r| r.stop().records).unwrap_or(0);
    Ok((secs, records))
}

fn main() -> Result<()> {
    let target_events: u64 =
        std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("xlaprof-profiler-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    // Recording overhead on the MLP step: interleaved blocks, with and without recording.
    let model = Mlp::new()?;
    let mut opt = Sgd::new(model.parameters(), 0.01);
    mlp_steps(&model, &mut opt, 5, Record::Off)?; // compile and warm up
    let (mut off, mut on, mut mem) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..8 {
        off.push(mlp_steps(&model, &mut opt, 25, Record::Off)?);
        let file = dir.join(format!("mlp{i}.xlaprof"));
        on.push(mlp_steps(&model, &mut opt, 25, Record::File(&file))?);
        mem.push(mlp_steps(&model, &mut opt, 25, Record::Memory)?);
    }
    let (off, on, mem) = (median(off), median(on), median(mem));
    println!("MLP step, not recording          {off:>10.3} ms (median)");
    println!(
        "MLP step, recording to a file    {on:>10.3} ms  overhead {:+.2}%",
        (on - off) / off * 100.0
    );
    println!(
        "MLP step, recording in memory    {mem:>10.3} ms  overhead {:+.2}%",
        (mem - off) / off * 100.0
    );

    // Cost per recorded event, from tiny syncs (about 8 events each).
    tiny_syncs(200, Record::Off)?;
    let n = 20_000;
    let (plain, _) = tiny_syncs(n, Record::Off)?;
    let file = dir.join("tiny.xlaprof");
    let (recorded, records) = tiny_syncs(n, Record::File(&file))?;
    let bytes = std::fs::metadata(&file)?.len();
    println!(
        "recording cost per event          {:>10.0} ns ({records} events over {n} syncs)",
        (recorded - plain) / records as f64 * 1e9
    );
    println!("bytes per event on disk           {:>10.1} B", bytes as f64 / records as f64);
    let (in_memory, _) = tiny_syncs(n, Record::Memory)?;
    println!(
        "  of which in memory (no file)    {:>10.0} ns",
        (in_memory - plain) / records as f64 * 1e9
    );

    // A profile of at least `target_events` events.
    let big = dir.join("big.xlaprof");
    let syncs = (target_events as f64 / (records as f64 / n as f64)).ceil() as usize;
    let (secs, events) = tiny_syncs(syncs, Record::File(&big))?;
    let size = std::fs::metadata(&big)?.len();
    println!(
        "recorded {events} events ({syncs} syncs) in {secs:.1} s, {:.1} MB",
        size as f64 / 1e6
    );
    let t = Instant::now();
    let profile = load(&big)?;
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let analysis = analyze(&profile, &Thresholds::default());
    let analyze_s = t.elapsed().as_secs_f64();
    println!(
        "load {:.3} s + full analysis {:.3} s = {:.3} s for {} events",
        load_s,
        analyze_s,
        load_s + analyze_s,
        profile.records
    );

    for (name, format) in [
        ("text", Format::Text),
        ("json", Format::Json),
        ("chrome", Format::Chrome),
        ("folded", Format::Folded),
        ("flamegraph", Format::Flamegraph),
        ("csv", Format::Csv),
        ("parquet", Format::Parquet),
    ] {
        let out = dir.join(format!("export.{name}"));
        let t = Instant::now();
        export::write(&profile, &analysis, format, &out)?;
        println!("export {name:<11}                {:>10.3} s", t.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
