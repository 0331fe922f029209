//! `xlaprof bench`: the engine's figures, on the workloads of the JAX peer benchmarks
//! (`shared/peers/jax`), so the two can be compared in one session.
//!
//! - trace cost per op: a chain `x = x * 1.0001 + 0.5` of 1,000 steps on f32[64,64] (2,000 ops);
//! - sync overhead on a cache hit of that graph: the sync's wall time minus PJRT's execute time;
//! - MLP 784-512-512-10, ReLU, batch 64, softmax cross entropy, SGD lr 0.01: first step (trace,
//!   lower, compile, run) and the median steady step.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use xlaprof_core::events::{self, Event, Listener};
use xlaprof_core::nn::{Module, Optimizer, Sgd};
use xlaprof_core::{Result, Tensor};
use xlaprof_samples::{Mlp, Prototypes};

const CHAIN: usize = 1000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn chain(x: &Tensor) -> Result<Tensor> {
    let mut y = x.clone();
    for _ in 0..CHAIN {
        y = y.mul_scalar(1.0001)?.add_scalar(0.5)?;
    }
    Ok(y)
}

/// Per sync id: the whole sync on the host, the program's run from launch to the device's end
/// (ns, as the engine reports them), and whether the program ended before the sync returned. By
/// id: when the host runs ahead, a program's end may be reported after its sync has returned.
#[derive(Default)]
struct SyncTimes(Mutex<std::collections::BTreeMap<u64, (u64, u64, bool)>>);

impl Listener for SyncTimes {
    fn on_event(&self, _at_ns: u64, event: &Event) {
        let mut times = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::Executed { sync_id, duration_ns, .. } => {
                let t = times.entry(*sync_id).or_default();
                t.1 = *duration_ns;
                t.2 = t.0 == 0;
            }
            Event::SyncEnd { sync_id, duration_ns } => {
                times.entry(*sync_id).or_default().0 = *duration_ns
            }
            _ => {}
        }
    }
}

/// Where a first step's time went, from the engine's events (ms, from the step's start).
#[derive(Default)]
struct Phases(Mutex<Vec<(u64, &'static str, u64)>>);

impl Listener for Phases {
    fn on_event(&self, at_ns: u64, event: &Event) {
        let mark = match event {
            Event::SyncBegin { .. } => ("sync_begin", 0),
            Event::Lowered { .. } => ("lowered", 0),
            Event::CacheLookup { .. } => ("cache_lookup", 0),
            Event::Compiled { duration_ns, .. } => ("compiled", *duration_ns),
            Event::Executed { duration_ns, .. } => ("executed", *duration_ns),
            Event::SyncEnd { .. } => ("sync_end", 0),
            _ => return,
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push((at_ns, mark.0, mark.1));
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figures {
    pub trace_ns_per_op: f64,
    pub sync_overhead_us: f64,
    pub sync_total_us: f64,
    pub execute_us: f64,
    pub mlp_first_step_ms: f64,
    pub mlp_step_ms: f64,
    /// Steps back to back, the device waited for once at the end: the mean.
    pub mlp_step_back_to_back_ms: f64,
}

pub fn measure(reps: usize, mlp_steps: usize) -> Result<Figures> {
    let x = Tensor::from_slice(&vec![1f32; 64 * 64], &[64, 64])?;
    // Warm up: compile the chain once.
    let y = chain(&x)?;
    xlaprof_core::sync()?;
    drop(y);

    let mut trace = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let y = chain(&x)?;
        trace.push(t.elapsed().as_secs_f64() * 1e9 / (2 * CHAIN) as f64);
        xlaprof_core::sync()?;
        drop(y);
    }
    // The sync's parts, from the engine's own events on the same syncs.
    let times = Arc::new(SyncTimes::default());
    let id = events::add_listener(times.clone());
    for _ in 0..reps {
        let _y = chain(&x)?;
        xlaprof_core::sync()?;
    }
    xlaprof_core::wait()?;
    events::remove_listener(id);
    let times: Vec<(u64, u64, bool)> =
        times.0.lock().unwrap_or_else(|p| p.into_inner()).values().copied().collect();
    let us = |ns: u64| ns as f64 / 1e3;
    let sync_total_us = median(times.iter().map(|t| us(t.0)).collect());
    let execute_us = median(times.iter().map(|t| us(t.1)).collect());
    // The engine's own time: a sync's time beside its program's run where the sync lasted until
    // the program ended (waiting for it, or freeing the last graph meanwhile); all of it where
    // the sync returned first (the launch included).
    let overhead = |t: &(u64, u64, bool)| if t.2 { t.0.saturating_sub(t.1) } else { t.0 };
    let sync_overhead_us = median(times.iter().map(|t| us(overhead(t))).collect());

    let mut data = Prototypes::new(10, 784, 1);
    let model = Mlp::new(&[784, 512, 512, 10], 3)?;
    let mut opt = Sgd::new(model.parameters(), 0.01);
    let batches: Vec<(Tensor, Tensor)> =
        (0..=mlp_steps).map(|_| data.batch(64, 1.0)).collect::<Result<_>>()?;
    let mut train_step = |x: &Tensor, y: &Tensor| -> Result<()> {
        opt.zero_grad();
        let loss = model.forward(x)?.cross_entropy(y)?;
        loss.backward()?;
        opt.step()?;
        xlaprof_core::step()
    };
    // Each step waited for (as JAX's peer times its steps, with `block_until_ready`).
    let mut steps = Vec::new();
    for (x, y) in &batches {
        let t = Instant::now();
        train_step(x, y)?;
        xlaprof_core::wait()?;
        steps.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // Back to back, waited for once at the end: the host traces a step while the device runs
    // the one before (when the engine runs ahead, as on GPUs).
    let t = Instant::now();
    for (x, y) in &batches {
        train_step(x, y)?;
    }
    xlaprof_core::wait()?;
    let pipelined = t.elapsed().as_secs_f64() * 1e3 / batches.len() as f64;
    let first = steps[0];
    let steady: Vec<f64> = steps.iter().skip(5).copied().collect();
    Ok(Figures {
        trace_ns_per_op: median(trace),
        sync_overhead_us,
        sync_total_us,
        execute_us,
        mlp_first_step_ms: first,
        mlp_step_ms: median(if steady.is_empty() { steps.clone() } else { steady }),
        mlp_step_back_to_back_ms: pipelined,
    })
}

/// The first MLP step of a fresh process (what `bench` runs in a child to time a warm start),
/// and where its time went (ms from the step's start: `sync_begin`, `lowered`, `cache_lookup`
/// (after reading the persistent cache), `sync_end`; `compiled` and `executed` with their
/// durations). The plugin is loaded first: its load time is a separate figure
/// (`cargo bench --bench runtime`).
pub fn first_step_ms() -> Result<(f64, serde_json::Value)> {
    xlaprof_core::engine()?;
    let phases = Arc::new(Phases::default());
    let id = events::add_listener(phases.clone());
    let start = events::now_ns();
    let t = Instant::now();
    let mut data = Prototypes::new(10, 784, 1);
    let model = Mlp::new(&[784, 512, 512, 10], 3)?;
    let mut opt = Sgd::new(model.parameters(), 0.01);
    let (x, y) = data.batch(64, 1.0)?;
    let loss = model.forward(&x)?.cross_entropy(&y)?;
    loss.backward()?;
    opt.step()?;
    xlaprof_core::step()?;
    xlaprof_core::wait()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    events::remove_listener(id);
    let ms_after = |at: u64| (at.saturating_sub(start) as f64 / 1e6 * 1000.0).round() / 1000.0;
    let marks: Vec<serde_json::Value> = phases
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|&(at, what, dur)| {
            serde_json::json!({ "phase": what, "at_ms": ms_after(at), "ms": dur as f64 / 1e6 })
        })
        .collect();
    Ok((ms, serde_json::Value::Array(marks)))
}

/// Cold and warm first step in new processes sharing a new persistent cache directory, and
/// where the warm one's time went.
fn cold_and_warm_start() -> Option<(f64, f64, serde_json::Value)> {
    let exe = std::env::current_exe().ok()?;
    let dir = std::env::temp_dir().join(format!("xlaprof-bench-cache-{}", std::process::id()));
    let run = || -> Option<(f64, serde_json::Value)> {
        let out = std::process::Command::new(&exe)
            .arg("bench-first-step")
            .env("XLAPROF_CACHE_DIR", &dir)
            .output()
            .ok()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut lines = stdout.lines();
        let ms: Option<f64> = lines.next().and_then(|l| l.trim().parse().ok());
        let phases = lines.next().and_then(|l| serde_json::from_str(l).ok());
        if ms.is_none() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            eprintln!(
                "warning: the first step in a new process was not timed ({}): {} {}",
                out.status,
                stdout.trim(),
                stderr.lines().last().unwrap_or("")
            );
        }
        Some((ms?, phases.unwrap_or_default()))
    };
    let cold = run();
    let warm = run();
    let _ = std::fs::remove_dir_all(&dir);
    let (warm, phases) = warm?;
    Some((cold?.0, warm, phases))
}

/// JAX's figures for the same workloads, from the peer scripts (`bench_b_chain.py`,
/// `bench_c_mlp.py`) run by `python` in this session: absolute times on a machine move between
/// runs, ratios measured side by side do not.
#[derive(Debug, Clone, Copy)]
pub struct JaxFigures {
    /// Back to back, as JAX's peer script times it.
    pub jax_chain_execute_us: f64,
    /// After as much host work between calls as our tracing of the chain takes: how our figure
    /// is taken, so the like-for-like comparison (see `scripts/bench_jax_chain.py`).
    pub jax_chain_execute_after_host_us: f64,
    pub jax_mlp_step_ms: f64,
    /// JAX's first MLP step in a new process, its persistent cache cold and then warm, timed as
    /// ours is (see `scripts/bench_jax_warm_start.py`).
    pub jax_cold_start_ms: f64,
    pub jax_warm_start_ms: f64,
}

fn run_peer(python: &Path, script: &Path, args: &[&str]) -> Result<serde_json::Value, String> {
    let out = std::process::Command::new(python)
        .arg(script)
        .args(args)
        // On a GPU, JAX takes 75 % of its memory at start unless told not to; the peer's own
        // child process (its cold compile) and ours would then find none.
        .env("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        .current_dir(script.parent().unwrap_or(Path::new(".")))
        .output()
        .map_err(|e| format!("could not run {} {}: {e}", python.display(), script.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").to_string();
        return Err(format!("{} failed ({}): {last}", script.display(), out.status));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{} printed no JSON object: {e}", script.display()))
}

/// Runs JAX's peer scripts from the folder `peers` with `python` (one that has jax installed),
/// and our own `scripts/bench_jax_chain.py` with `host_us` of host work between executions and
/// `scripts/bench_jax_warm_start.py`.
pub fn measure_jax(python: &Path, peers: &Path, host_us: f64) -> Result<JaxFigures, String> {
    let chain = run_peer(python, &peers.join("bench_b_chain.py"), &["1000", "3"])?;
    let mlp = run_peer(python, &peers.join("bench_c_mlp.py"), &["30"])?;
    // Ours are in the checkout being benchmarked: the one we run in, else the one we were built in.
    let ours = |name: &str| {
        let script = Path::new("scripts").join(name);
        if script.exists() {
            script.canonicalize().unwrap_or(script)
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts").join(name)
        }
    };
    let pattern = run_peer(python, &ours("bench_jax_chain.py"), &[&format!("{host_us:.0}")])?;
    let starts = run_peer(python, &ours("bench_jax_warm_start.py"), &[])?;
    let number = |v: &serde_json::Value, key: &str| {
        v.pointer(key).and_then(|x| x.as_f64()).ok_or_else(|| format!("no `{key}` in {v}"))
    };
    Ok(JaxFigures {
        jax_chain_execute_us: number(&chain, "/results/exec_us_median")?,
        jax_chain_execute_after_host_us: number(&pattern, "/after_host_work_us")?,
        jax_mlp_step_ms: number(&mlp, "/results/median_step_ms_steps5_30")?,
        jax_cold_start_ms: number(&starts, "/cold_start_ms")?,
        jax_warm_start_ms: number(&starts, "/warm_start_ms")?,
    })
}

/// What `bench --json` prints. The first keys are kept from earlier versions: `execute_us` is
/// the chain's execution, also under its explicit name `chain_execute_us`. Ratios are ours over
/// JAX's (below 1.0: we are faster); the chain's is taken against JAX timed the way ours is
/// (after host work), `chain_execute_ratio_back_to_back` against the peer script's figure.
#[derive(Serialize)]
struct Report {
    #[serde(flatten)]
    figures: Figures,
    cold_start_ms: Option<f64>,
    warm_start_ms: Option<f64>,
    /// Where the warm start's time went (see [`first_step_ms`]).
    warm_start_phases: Option<serde_json::Value>,
    /// Whether syncs returned before their programs finished (`XLAPROF_RUN_AHEAD`).
    runs_ahead: bool,
    platform: String,
    chain_execute_us: f64,
    jax_chain_execute_us: Option<f64>,
    jax_chain_execute_after_host_us: Option<f64>,
    jax_mlp_step_ms: Option<f64>,
    jax_cold_start_ms: Option<f64>,
    jax_warm_start_ms: Option<f64>,
    chain_execute_ratio: Option<f64>,
    chain_execute_ratio_back_to_back: Option<f64>,
    mlp_step_ratio: Option<f64>,
    warm_start_ratio: Option<f64>,
}

pub fn run(
    json: bool,
    reps: usize,
    mlp_steps: usize,
    jax: Option<(&Path, &Path)>,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let f = measure(reps, mlp_steps)?;
    let host_us = f.trace_ns_per_op * (2 * CHAIN) as f64 / 1e3;
    let jax = match jax {
        Some((python, peers)) => match measure_jax(python, peers, host_us) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("warning: JAX's figures are left out: {e}");
                None
            }
        },
        None => None,
    };
    let starts = cold_and_warm_start();
    let (cold, warm) = (starts.as_ref().map(|s| s.0), starts.as_ref().map(|s| s.1));
    let engine = xlaprof_core::engine()?;
    let report = Report {
        figures: f,
        cold_start_ms: cold,
        warm_start_ms: warm,
        warm_start_phases: starts.map(|s| s.2),
        runs_ahead: engine.runs_ahead(),
        platform: engine.client.platform_name().to_string(),
        chain_execute_us: f.execute_us,
        jax_chain_execute_us: jax.map(|j| j.jax_chain_execute_us),
        jax_chain_execute_after_host_us: jax.map(|j| j.jax_chain_execute_after_host_us),
        jax_mlp_step_ms: jax.map(|j| j.jax_mlp_step_ms),
        jax_cold_start_ms: jax.map(|j| j.jax_cold_start_ms),
        jax_warm_start_ms: jax.map(|j| j.jax_warm_start_ms),
        chain_execute_ratio: jax.map(|j| f.execute_us / j.jax_chain_execute_after_host_us),
        chain_execute_ratio_back_to_back: jax.map(|j| f.execute_us / j.jax_chain_execute_us),
        mlp_step_ratio: jax.map(|j| f.mlp_step_ms / j.jax_mlp_step_ms),
        warm_start_ratio: warm.zip(jax).map(|(w, j)| w / j.jax_warm_start_ms),
    };
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1}"));
    println!("xlaprof bench (medians; ratios are ours over JAX's, measured in this run)");
    println!("  tracing, 1,000-step chain on f32[64,64]   {:>9.1} ns per op", f.trace_ns_per_op);
    println!("  cache-hit sync of that graph, total        {:>9.1} µs", f.sync_total_us);
    println!("    of which PJRT execute                    {:>9.1} µs", f.execute_us);
    println!("    engine overhead                          {:>9.1} µs", f.sync_overhead_us);
    println!("  MLP 784-512-512-10 SGD, first step         {:>9.1} ms", f.mlp_first_step_ms);
    println!("  MLP steady step (median after step 5)      {:>9.3} ms", f.mlp_step_ms);
    println!("  MLP steps back to back (mean)              {:>9.3} ms", f.mlp_step_back_to_back_ms);
    println!("  first step in a new process, cold cache    {:>9} ms", ms(cold));
    println!("  first step in a new process, warm cache    {:>9} ms", ms(warm));
    if let Some(j) = jax {
        println!(
            "  JAX executing the chain, after host work   {:>9.1} µs  (ratio {:.2})",
            j.jax_chain_execute_after_host_us,
            f.execute_us / j.jax_chain_execute_after_host_us
        );
        println!(
            "  JAX executing the chain, back to back      {:>9.1} µs  (ratio {:.2})",
            j.jax_chain_execute_us,
            f.execute_us / j.jax_chain_execute_us
        );
        println!(
            "  JAX MLP steady step                        {:>9.3} ms  (ratio {:.2})",
            j.jax_mlp_step_ms,
            f.mlp_step_ms / j.jax_mlp_step_ms
        );
        println!("  JAX first step, new process, cold cache    {:>9.1} ms", j.jax_cold_start_ms);
        println!(
            "  JAX first step, new process, warm cache    {:>9.1} ms  (ratio {})",
            j.jax_warm_start_ms,
            warm.map_or("n/a".to_string(), |w| format!("{:.2}", w / j.jax_warm_start_ms))
        );
    }
    Ok(())
}
