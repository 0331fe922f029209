//! Metrics and counters with the meaning PyTorch/XLA users know from its metrics report
//! (CompileTime, ExecuteTime, TransferToDeviceTime, CachedCompile, UncachedCompile, ...).

use serde::Serialize;

use crate::profile::{Counters, Profile};
use crate::record::Cause;

/// The engine's counters the profiler reads, by the engine's names (`Counters::named`, which a
/// test holds these to).
pub mod engine_counter {
    pub const TENSORS_CREATED: &str = "tensors_created";
    pub const TENSORS_DESTROYED: &str = "tensors_destroyed";
    pub const OPS_TRACED: &str = "ops_traced";
    pub const CACHE_HITS: &str = "cache_hits";
    pub const PERSISTENT_CACHE_MISSES: &str = "persistent_cache_misses";
    pub const COMPILES: &str = "compiles";
    pub const ALL: [&str; 6] = [
        TENSORS_CREATED,
        TENSORS_DESTROYED,
        OPS_TRACED,
        CACHE_HITS,
        PERSISTENT_CACHE_MISSES,
        COMPILES,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Unit {
    Nanoseconds,
    Bytes,
    Count,
}

/// A distribution of samples: one per compile, per execution, per transfer, ...
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
    pub count: u64,
    pub total: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Samples per second of profile time.
    pub rate_per_s: f64,
    /// (percent, value) for 1, 5, 10, 20, 50, 80, 90, 95, 99.
    pub percentiles: Vec<(u8, f64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counter {
    pub name: &'static str,
    pub value: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    pub duration_ns: u64,
    pub metrics: Vec<Metric>,
    pub counters: Vec<Counter>,
}

impl Metrics {
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.iter().find(|c| c.name == name).map(|c| c.value).unwrap_or(0)
    }
}

const PERCENTS: [u8; 9] = [1, 5, 10, 20, 50, 80, 90, 95, 99];

/// The `p`th percentile of sorted samples by nearest rank (`None` when there are none).
/// The middle value (the upper one of an even count); 0 for none.
pub(crate) fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

fn metric(name: &'static str, unit: Unit, mut samples: Vec<f64>, duration_ns: u64) -> Metric {
    samples.sort_by(|a, b| a.total_cmp(b));
    let count = samples.len() as u64;
    let total: f64 = samples.iter().sum();
    let pick = |p: u8| nearest_rank(&samples, p as f64).unwrap_or(0.0);
    Metric {
        name,
        unit,
        count,
        total,
        min: samples.first().copied().unwrap_or(0.0),
        max: samples.last().copied().unwrap_or(0.0),
        mean: if count > 0 { total / count as f64 } else { 0.0 },
        rate_per_s: if duration_ns > 0 { count as f64 / (duration_ns as f64 / 1e9) } else { 0.0 },
        percentiles: PERCENTS.iter().map(|&p| (p, pick(p))).collect(),
    }
}

/// The engine counter `name` in `c`; 0 when the profile does not have it.
pub fn counter(c: &Counters, name: &str) -> u64 {
    c.get(name).unwrap_or(0)
}

/// Every metric and counter of a profile.
pub fn metrics(p: &Profile) -> Metrics {
    metrics_since(p, 0)
}

/// Every metric and counter of what happened from `since_ns` on (PyTorch/XLA's `clear_all()`
/// starts its metrics again there).
pub fn metrics_since(p: &Profile, since_ns: u64) -> Metrics {
    let d = p.end_ns().saturating_sub(since_ns);
    let ns = |v: u64| v as f64;
    let syncs: Vec<&crate::profile::Sync> =
        p.syncs.iter().filter(|s| s.start_ns >= since_ns).collect();
    let syncs_where = |f: &dyn Fn(&crate::profile::Sync) -> Option<u64>| -> Vec<f64> {
        syncs.iter().copied().filter_map(f).map(ns).collect()
    };
    let compiles = p.compiles.iter().filter(|c| c.start_ns >= since_ns);
    let executions = p.executions.iter().filter(|e| e.start_ns >= since_ns);
    let transfers = || p.transfers.iter().filter(|t| t.start_ns >= since_ns && t.to_device);
    let reads = || p.value_reads.iter().filter(|r| r.start_ns >= since_ns);
    // A step that ends after `since_ns` (it began at the step before's end).
    let steps = p.steps.iter().filter(|s| s.end_ns > since_ns);
    let metrics = vec![
        metric(
            "CompileTime",
            Unit::Nanoseconds,
            compiles.clone().map(|c| ns(c.duration_ns)).collect(),
            d,
        ),
        metric(
            "ExecuteTime",
            Unit::Nanoseconds,
            executions.clone().map(|e| ns(e.duration_ns)).collect(),
            d,
        ),
        metric(
            "TransferToDeviceTime",
            Unit::Nanoseconds,
            transfers().map(|t| ns(t.duration_ns)).collect(),
            d,
        ),
        metric(
            "TransferFromDeviceTime",
            Unit::Nanoseconds,
            reads().map(|r| ns(r.duration_ns)).collect(),
            d,
        ),
        metric(
            "TransferToDeviceBytes",
            Unit::Bytes,
            transfers().map(|t| t.bytes as f64).collect(),
            d,
        ),
        metric(
            "TransferFromDeviceBytes",
            Unit::Bytes,
            reads().map(|r| r.bytes as f64).collect(),
            d,
        ),
        metric("SyncTime", Unit::Nanoseconds, syncs_where(&|s| Some(s.duration_ns())), d),
        metric("GraphBuildTime", Unit::Nanoseconds, syncs_where(&|s| Some(s.build_ns)), d),
        metric(
            "LowerTime",
            Unit::Nanoseconds,
            syncs_where(&|s| (s.lower_ns > 0).then_some(s.lower_ns)),
            d,
        ),
        metric(
            "GraphSize",
            Unit::Count,
            syncs
                .iter()
                .filter_map(|s| s.hash.and_then(|h| p.graphs.get(&h)))
                .map(|g| g.def.nodes as f64)
                .collect(),
            d,
        ),
        metric(
            "StepTime",
            Unit::Nanoseconds,
            steps.clone().map(|s| ns(s.duration_ns())).collect(),
            d,
        ),
    ];
    let start = p.start_counters();
    let first = p.counters.iter().rev().find(|c| c.0 < since_ns).map_or(&start, |c| &c.1);
    let last = p.counters.last().map_or(first, |c| &c.1);
    let delta = |name| counter(last, name).saturating_sub(counter(first, name));
    let count =
        |f: &dyn Fn(&crate::profile::Sync) -> bool| syncs.iter().filter(|s| f(s)).count() as u64;
    // Every graph of the profile; from a later start, the graphs its syncs ran.
    let distinct_graphs = match since_ns {
        0 => p.graphs.len(),
        _ => syncs.iter().filter_map(|s| s.hash).collect::<std::collections::BTreeSet<_>>().len(),
    } as u64;
    let counters = vec![
        Counter { name: "CachedCompile", value: count(&|s| s.cache_hit) },
        Counter { name: "UncachedCompile", value: compiles.count() as u64 },
        Counter { name: "PersistentCacheHit", value: count(&|s| s.persistent_hit) },
        Counter {
            name: "PersistentCacheMiss",
            value: delta(engine_counter::PERSISTENT_CACHE_MISSES),
        },
        Counter { name: "MarkStep", value: steps.count() as u64 },
        Counter { name: "Sync", value: syncs.len() as u64 },
        Counter { name: "ExplicitSync", value: count(&|s| s.cause == Cause::Explicit) },
        Counter { name: "ValueReadSync", value: count(&|s| s.cause == Cause::ValueRead) },
        Counter { name: "DeviceToHostRead", value: reads().count() as u64 },
        Counter { name: "ExecuteGraph", value: executions.count() as u64 },
        Counter { name: "CreateTensor", value: delta(engine_counter::TENSORS_CREATED) },
        Counter { name: "DestroyTensor", value: delta(engine_counter::TENSORS_DESTROYED) },
        Counter { name: "OpsTraced", value: delta(engine_counter::OPS_TRACED) },
        Counter { name: "DistinctGraphs", value: distinct_graphs },
    ];
    Metrics { duration_ns: d, metrics, counters }
}

pub use crate::util::{format_bytes, format_ns};

pub fn format_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Nanoseconds => format_ns(v),
        Unit::Bytes => format_bytes(v),
        Unit::Count => format!("{v:.0}"),
    }
}
