//! The analysis of a profile, computed once: a summary, the metrics and the diagnostics. Every
//! view (report, terminal UI, GUI, notebook) shows this object, so they all agree.

use serde::Serialize;

pub mod breaks;
pub mod devices;
pub mod diagnostics;
pub mod job;
pub mod metrics;
pub mod timeline;
pub mod views;

use crate::devices::{devices, Devices};
use crate::diagnostics::{diagnose, find_recompiles, Diagnostic, Kind, Recompile, Thresholds};
use crate::metrics::{metrics, nearest_rank, Metrics};
use crate::profile::Profile;
use crate::timeline::{spans, Span};
use crate::views::{graph_rows, line_rows, step_phases, GraphRow, LineRow, StepPhases};

/// The answer to "is this program healthy?" at a glance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub program: String,
    pub duration_ns: u64,
    pub steps: u64,
    pub syncs: u64,
    pub graphs: u64,
    pub compiles: u64,
    pub compile_ns: u64,
    pub cache_hits: u64,
    pub persistent_hits: u64,
    /// Syncs served without compiling, over all syncs.
    pub hit_rate: f64,
    pub hidden_syncs: u64,
    /// Median and 90th percentile of the steps after warm-up.
    pub step_median_ns: u64,
    pub step_p90_ns: u64,
    pub compiles_after_warmup: u64,
    pub bytes_to_device: u64,
    pub bytes_to_host: u64,
    /// Where the time of the syncs went.
    pub build_ns: u64,
    pub lower_ns: u64,
    pub transfer_ns: u64,
    /// Time a program was executing ([`busy_ns`]).
    pub execute_ns: u64,
    /// Time outside syncs (tracing ops, the program's own work).
    pub outside_syncs_ns: u64,
    /// The device's memory over the steps, where the plugin counts it (GPUs).
    pub device_memory: Option<MemorySummary>,
    /// What torch.compile did, when the program used it.
    pub torch_compile: Option<CompiledSummary>,
}

/// torch.compile's work in a profile: its compiles (and where their time went), the runs of
/// the graphs it captured, its graph breaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledSummary {
    pub compiles: u64,
    /// Distinct compiled functions (Dynamo's frames).
    pub functions: u64,
    pub compile_ns: u64,
    /// Compile time by phase, in order of first appearance (`Dynamo`, `AOTAutograd`, `backend`).
    pub phases: Vec<(String, u64)>,
    pub runs: u64,
    pub run_ns: u64,
    pub graph_breaks: u64,
}

impl CompiledSummary {
    /// `8 compiles of 6 functions (12.3s), 10 graph runs, 4 graph breaks`, as the viewers'
    /// summaries show it.
    pub fn text(&self) -> String {
        format!(
            "{} compiles of {} functions ({}), {} graph runs, {} graph breaks",
            self.compiles,
            self.functions,
            crate::metrics::format_ns(self.compile_ns as f64),
            self.runs,
            self.graph_breaks
        )
    }
}

fn compiled_summary(p: &Profile) -> Option<CompiledSummary> {
    if p.function_compiles.is_empty() && p.captured_runs.is_empty() {
        return None;
    }
    let mut phases: Vec<(String, u64)> = Vec::new();
    for (name, ns) in p.function_compiles.iter().flat_map(|c| &c.phases) {
        match phases.iter_mut().find(|(n, _)| n == name) {
            Some((_, total)) => *total = total.saturating_add(*ns),
            None => phases.push((name.clone(), *ns)),
        }
    }
    let frames: std::collections::BTreeSet<&str> =
        p.function_compiles.iter().map(|c| c.frame()).collect();
    Some(CompiledSummary {
        compiles: p.function_compiles.len() as u64,
        functions: frames.len() as u64,
        compile_ns: saturating_sum(p.function_compiles.iter().map(|c| c.duration_ns)),
        phases,
        runs: p.captured_runs.len() as u64,
        run_ns: saturating_sum(p.captured_runs.iter().map(|r| r.duration_ns)),
        graph_breaks: p.graph_breaks.len() as u64,
    })
}

/// The device's memory over the steps (the first device that reported it), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemorySummary {
    pub device: u32,
    /// In use at the end of the last step.
    pub last_in_use_bytes: i64,
    /// The largest in use at a step's end, and the allocator's own peak where it has one.
    pub max_in_use_bytes: i64,
    pub peak_bytes: Option<i64>,
    pub limit_bytes: Option<i64>,
    /// In use at the last step's end minus at the end of the first step after warm-up: memory
    /// that steady steps keep taking (tensors held on to, a growing cache) shows here.
    pub steady_growth_bytes: i64,
}

impl MemorySummary {
    /// `1.2 GiB (peak 1.5 GiB)`: in use after the last step, and the allocator's peak (else the
    /// most in use after a step), as the viewers' summaries show it.
    pub fn in_use_and_peak(&self) -> String {
        format!(
            "{} (peak {})",
            crate::util::format_bytes(self.last_in_use_bytes.max(0) as f64),
            crate::util::format_bytes(
                self.peak_bytes.unwrap_or(self.max_in_use_bytes).max(0) as f64
            )
        )
    }
}

/// Time some program was executing: the union of the executions' spans. Programs left in flight
/// (compiled graphs replayed ahead, a host running ahead of the device) overlap, and the sum of
/// their times would exceed the time recorded.
fn busy_ns(executions: &[crate::profile::Execution]) -> u64 {
    let mut spans: Vec<(u64, u64)> =
        executions.iter().map(|e| (e.start_ns, e.start_ns.saturating_add(e.duration_ns))).collect();
    spans.sort_unstable();
    let (mut busy, mut reach) = (0u64, 0u64);
    for (start, end) in spans {
        let from = start.max(reach);
        busy = busy.saturating_add(end.saturating_sub(from));
        reach = reach.max(end);
    }
    busy
}

fn memory_summary(p: &Profile, warmup_steps: u64) -> Option<MemorySummary> {
    let device = p.device_memory.first()?.device;
    let samples: Vec<_> = p.device_memory.iter().filter(|m| m.device == device).collect();
    let last = samples.last()?;
    let steady_start = samples.iter().find(|m| m.step > warmup_steps).unwrap_or(last);
    Some(MemorySummary {
        device,
        last_in_use_bytes: last.in_use_bytes,
        max_in_use_bytes: samples.iter().map(|m| m.in_use_bytes).max().unwrap_or(0),
        peak_bytes: samples.iter().filter_map(|m| m.peak_bytes).max(),
        limit_bytes: last.limit_bytes,
        steady_growth_bytes: last.in_use_bytes.saturating_sub(steady_start.in_use_bytes),
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub summary: Summary,
    pub metrics: Metrics,
    pub diagnostics: Vec<Diagnostic>,
    pub thresholds: Thresholds,
    /// What could not be read from the profile file.
    pub warnings: Vec<String>,
    /// Partitioned programs: per device, per partitioned graph (empty on one device).
    pub devices: Devices,
    /// Every recompile, explained: the findings were made from them, and the graph table
    /// ([`crate::views::graph_rows`]) reads them here rather than diffing the graphs again.
    /// Not exported: the diagnostics say it all.
    #[serde(skip)]
    pub recompiles: Vec<Recompile>,
    /// Each step's phases, the graph table and the timeline's spans: every view draws these
    /// and rebuilds none of them (not exported: the tables and the trace carry them).
    #[serde(skip)]
    pub steps: Vec<StepPhases>,
    #[serde(skip)]
    pub graphs: Vec<GraphRow>,
    #[serde(skip)]
    pub spans: Vec<Span>,
    /// Each source line with what the engine did for it (the line profiler).
    #[serde(skip)]
    pub lines: Vec<LineRow>,
}

pub use crate::util::saturating_sum;

pub fn analyze(p: &Profile, thresholds: &Thresholds) -> Analysis {
    let mut steady: Vec<u64> = p
        .steps
        .iter()
        .filter(|s| s.index > thresholds.warmup_steps)
        .map(|s| s.duration_ns())
        .collect();
    steady.sort_unstable();
    // Totals saturate: a damaged or crafted profile can hold durations near `u64::MAX`.
    let sum = |f: &dyn Fn(&crate::profile::Sync) -> u64| saturating_sum(p.syncs.iter().map(f));
    let syncs_ns = sum(&|s| s.duration_ns());
    let served = p.syncs.iter().filter(|s| s.cache_hit || s.persistent_hit).count() as u64;
    let summary = Summary {
        program: p.meta.program.clone(),
        duration_ns: p.end_ns(),
        steps: p.steps.len() as u64,
        syncs: p.syncs.len() as u64,
        graphs: p.graphs.len() as u64,
        compiles: p.compiles.len() as u64,
        compile_ns: saturating_sum(p.compiles.iter().map(|c| c.duration_ns)),
        cache_hits: p.syncs.iter().filter(|s| s.cache_hit).count() as u64,
        persistent_hits: p.syncs.iter().filter(|s| s.persistent_hit).count() as u64,
        hit_rate: if p.syncs.is_empty() { 0.0 } else { served as f64 / p.syncs.len() as f64 },
        hidden_syncs: 0, // the hidden-sync findings', below
        step_median_ns: nearest_rank(&steady, 50.0).unwrap_or(0),
        step_p90_ns: nearest_rank(&steady, 90.0).unwrap_or(0),
        compiles_after_warmup: p
            .syncs
            .iter()
            .filter(|s| s.compiled() && s.step > thresholds.warmup_steps)
            .count() as u64,
        bytes_to_device: saturating_sum(
            p.transfers.iter().filter(|t| t.to_device).map(|t| t.bytes),
        ),
        bytes_to_host: saturating_sum(p.value_reads.iter().map(|r| r.bytes)),
        build_ns: sum(&|s| s.build_ns),
        lower_ns: sum(&|s| s.lower_ns),
        transfer_ns: sum(&|s| s.transfer_ns),
        execute_ns: busy_ns(&p.executions),
        outside_syncs_ns: p.end_ns().saturating_sub(syncs_ns),
        device_memory: memory_summary(p, thresholds.warmup_steps),
        torch_compile: compiled_summary(p),
    };
    let recompiles = find_recompiles(p);
    let steps = step_phases(p);
    let graphs = graph_rows(p, &recompiles);
    let diagnostics = diagnose(p, thresholds, &recompiles, &steps);
    let hidden = diagnostics.iter().filter(|d| d.kind == Kind::HiddenSync).map(|d| d.count);
    let summary = Summary { hidden_syncs: hidden.sum(), ..summary };
    Analysis {
        summary,
        metrics: metrics(p),
        diagnostics,
        thresholds: thresholds.clone(),
        warnings: p.warnings.clone(),
        devices: devices(p),
        recompiles,
        steps,
        graphs,
        spans: spans(p),
        lines: line_rows(p),
    }
}

impl Analysis {
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(move |d| d.kind == kind)
    }
}
