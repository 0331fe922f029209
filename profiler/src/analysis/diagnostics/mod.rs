//! Findings about a profile, each a typed record with a one-sentence message, the user's source
//! line and what it cost, aggregated per call site and ranked by time lost. Every view shows
//! these; none recomputes them.

mod caught;
mod compiled;
mod devices;
mod fixes;
mod input;
pub(crate) mod recompile;
mod rules;
mod shapes;
mod steps;

use serde::Serialize;

pub use compiled::captured_recompiles;
pub use fixes::CodeFix;
pub use recompile::{diff_graphs, find_recompiles, GraphChange, Recompile};
pub use rules::{check, Rule, RuleOutcome};

use crate::profile::Profile;
use crate::util::saturating_sum;

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Kind {
    /// A call site compiled a graph different from one it compiled before.
    Recompile,
    /// Compiles keep happening after warm-up at one call site, over a varying dimension.
    RecompileStorm,
    /// Expected once: the first step's graph also initialized tensors made before the loop,
    /// so the second step compiled the step's own graph.
    Warmup,
    /// Expected once: the first update created state (optimizer moments) that later steps
    /// take as inputs, so the second step compiled again.
    LazyState,
    /// A value read forced a graph to run in the middle of a step.
    HiddenSync,
    /// An explicit `sync()` in the middle of a step split it into several graphs.
    MidStepSync,
    /// A value was copied to the host inside the step (a stall, without a sync).
    HostRead,
    /// An op the engine does not lower ran on the host (the torch bridge's CPU fallback).
    HostFallback,
    SlowCompile,
    SlowStep,
    IdleDevice,
    /// XLA made a split tensor whole on every device (an all-gather) in a partitioned graph.
    Gather,
    /// A partitioned graph's collectives move more bytes than its inputs hold.
    HeavyCollectives,
    /// Devices of a partitioned execution finished far apart: the others waited.
    DeviceSkew,
    /// The program waited for its input pipeline's next batch.
    DataWait,
    /// An op's result has a size the data decides, read from the device at each call: a sync,
    /// and a graph for each new size.
    DataDependentShape,
    /// torch.compile could not capture a function whole: it split it, and ran the rest
    /// uncompiled.
    GraphBreak,
    /// torch.compile gave up on a function at its recompile limit: it runs uncompiled.
    RecompileLimit,
    /// `detect_anomaly()` found the op that made the first NaN or Inf.
    Anomaly,
    /// A graph ran or a value was read inside `forbid_sync()`.
    ForbiddenSync,
    /// The program stopped where `break_on()` asked.
    Break,
    /// `compare_with_eager()` found the first op beyond tolerance of torch's eager.
    Divergence,
    /// `XLAPROF_CHECK` found an index out of range.
    IndexOutOfRange,
    /// `XLAPROF_CHECK` found an argument's values outside what its op takes.
    ValueOutOfRange,
}

impl Kind {
    pub fn title(self) -> &'static str {
        match self {
            Kind::Recompile => "recompile",
            Kind::RecompileStorm => "recompile storm",
            Kind::Warmup => "warm-up",
            Kind::LazyState => "lazily created state",
            Kind::HiddenSync => "hidden sync",
            Kind::MidStepSync => "sync inside a step",
            Kind::HostRead => "host read",
            Kind::HostFallback => "CPU fallback",
            Kind::SlowCompile => "slow compile",
            Kind::SlowStep => "slow step",
            Kind::IdleDevice => "idle device",
            Kind::Gather => "gathered shard",
            Kind::HeavyCollectives => "heavy collectives",
            Kind::DeviceSkew => "devices waiting",
            Kind::DataWait => "waiting for data",
            Kind::DataDependentShape => "data-dependent shape",
            Kind::GraphBreak => "graph break",
            Kind::RecompileLimit => "recompile limit",
            Kind::Anomaly => "NaN or Inf",
            Kind::ForbiddenSync => "forbidden sync",
            Kind::Break => "break",
            Kind::Divergence => "divergence from eager",
            Kind::IndexOutOfRange => "index out of range",
            Kind::ValueOutOfRange => "value out of range",
        }
    }

    /// Whether a debugging tool caught it: such findings come first, whatever their cost.
    pub fn is_caught(self) -> bool {
        matches!(
            self,
            Kind::Anomaly
                | Kind::ForbiddenSync
                | Kind::Break
                | Kind::Divergence
                | Kind::IndexOutOfRange
                | Kind::ValueOutOfRange
        )
    }
}

/// One occurrence behind a finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    pub message: String,
    pub sync: Option<u64>,
    pub step: Option<u64>,
    pub cost_ns: u64,
}

/// A finding, aggregated over its call site.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub kind: Kind,
    /// One sentence: what happened, where, and why.
    pub message: String,
    pub location: String,
    pub location_id: u32,
    /// Time lost, in nanoseconds, over all instances.
    pub cost_ns: u64,
    /// An expected one-time cost (warm-up, a graph for evaluation), not a loss at every step:
    /// listed after the losses, and said as such.
    pub once: bool,
    pub count: u64,
    pub advice: Option<String>,
    /// The advice as a rewrite of the user's line, where it has one.
    pub fix: Option<CodeFix>,
    /// Typed causes (recompiles): what changed between graph versions.
    pub changes: Vec<GraphChange>,
    pub instances: Vec<Instance>,
    /// Graphs involved (hashes), for views to select.
    pub graphs: Vec<u64>,
}

/// Where the thresholds of the rules lie. Users can set every one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thresholds {
    /// Steps before which compiles are expected (warm-up).
    pub warmup_steps: u64,
    /// Compiles after warm-up at one call site that make a storm.
    pub storm_compiles: u64,
    pub slow_compile_ns: u64,
    /// A step slower than this many times the median step is slow.
    pub slow_step_factor: f64,
    /// A step where the device runs less than this fraction of the time is host-bound.
    pub idle_fraction: f64,
    /// Host reads after the step (no sync forced) are a finding only when they copy at least
    /// this many bytes per read: logging a scalar costs a few microseconds.
    pub host_read_bytes: u64,
    /// A wait for the next batch counts when it is at least this fraction of the median step,
    /// and at least `data_wait_min_ns`; a loop's waits are a finding when together they are at
    /// least this fraction of the steps' time after warm-up, compiles aside.
    pub data_wait_fraction: f64,
    pub data_wait_min_ns: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            warmup_steps: 2,
            storm_compiles: 3,
            slow_compile_ns: 1_000_000_000,
            slow_step_factor: 2.0,
            idle_fraction: 0.5,
            host_read_bytes: 64 * 1024,
            data_wait_fraction: 0.05,
            data_wait_min_ns: 100_000,
        }
    }
}

impl Diagnostic {
    /// Its cost in words: "1.2s lost", or "9.0s once, expected".
    pub fn cost_words(&self) -> String {
        let cost = crate::util::format_ns(self.cost_ns as f64);
        if self.once {
            format!("{cost} once, expected")
        } else {
            format!("{cost} lost")
        }
    }

    /// A finding at call site `location`: its cost and count are its instances'.
    fn new(
        p: &Profile,
        kind: Kind,
        location: u32,
        message: String,
        advice: Option<String>,
        instances: Vec<Instance>,
        graphs: Vec<u64>,
    ) -> Diagnostic {
        Diagnostic {
            kind,
            message,
            location: p.location(location),
            location_id: location,
            cost_ns: saturating_sum(instances.iter().map(|i| i.cost_ns)),
            once: matches!(kind, Kind::Warmup | Kind::LazyState),
            count: instances.len() as u64,
            advice,
            fix: None,
            changes: Vec::new(),
            instances,
            graphs,
        }
    }
}

/// How long before a span a front end reports, a sync at its line still belongs to it: the
/// front end times the span on its own clock and reports it when it ends, so its start is
/// known to within the delay of that report (a thread switch, on a busy host).
const SPAN_START_SLACK_NS: u64 = 2_000_000;

/// For each sync, the span a front end reported (start, duration, line: a CPU fallback, a size
/// read) that forced it: a value read at the span's line (`same` says which locations are the
/// span's) inside its time. One pass over both lists, which are in time order.
fn span_of_each_sync(
    p: &Profile,
    spans: &[(u64, u64, u32)],
    same: impl Fn(u32, u32) -> bool,
) -> Vec<Option<usize>> {
    let mut next = 0;
    p.syncs
        .iter()
        .map(|s| {
            while next < spans.len() && spans[next].0.saturating_add(spans[next].1) < s.start_ns {
                next += 1;
            }
            let &(start, _, location) = spans.get(next)?;
            let starts = s.start_ns.saturating_add(SPAN_START_SLACK_NS) >= start;
            (s.cause == crate::record::Cause::ValueRead && starts && same(location, s.location))
                .then_some(next)
        })
        .collect()
}

/// "1 step", "3 steps".
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// "once", "twice", "5 times".
fn times(n: usize) -> String {
    match n {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

/// Every finding of a profile, most costly first. `recompiles` is [`find_recompiles`] of `p`
/// and `phases` its step phases: both are computed once, by the analysis, for every reader.
pub fn diagnose(
    p: &Profile,
    t: &Thresholds,
    recompiles: &[Recompile],
    phases: &[crate::views::StepPhases],
) -> Vec<Diagnostic> {
    let mut all = Vec::new();
    // Sizes read from the device explain the syncs they forced and the recompiles at their
    // lines: those are their finding's, not a hidden sync's or a recompile's.
    let (sizes, explained) = shapes::findings(p, recompiles);
    all.extend(sizes);
    if explained.recompiles.is_empty() {
        all.extend(recompile::findings(p, t, recompiles));
    } else {
        let rest: Vec<Recompile> = recompiles
            .iter()
            .filter(|r| !explained.recompiles.contains(&r.sync))
            .cloned()
            .collect();
        all.extend(recompile::findings(p, t, &rest));
    }
    all.extend(steps::syncs_in_steps(p, t, &explained.syncs));
    all.extend(steps::host_fallbacks(p));
    all.extend(input::data_waits(p, t));
    all.extend(compiled::findings(p));
    all.extend(steps::slow_compiles(p, t));
    all.extend(steps::slow_steps(p, t, phases));
    all.extend(steps::idle_device(p, t, phases));
    all.extend(devices::gathers(p));
    all.extend(devices::heavy_collectives(p));
    all.extend(devices::device_skew(p));
    all.extend(caught::findings(p));
    fold_consequences(&mut all);
    fixes::attach(p, &mut all);
    all.sort_by(|a, b| {
        (b.kind.is_caught().cmp(&a.kind.is_caught()))
            .then(a.once.cmp(&b.once))
            .then(b.cost_ns.cmp(&a.cost_ns))
            .then(a.kind.cmp(&b.kind))
            .then(a.location.cmp(&b.location))
    });
    all
}

/// A one-time recompile that only follows from another finding's cause is said in that finding,
/// not beside it: the graphs a value read splits the step into are the hidden sync's; a graph
/// whose other work is where the first update made its state is the warm-up's.
fn fold_consequences(all: &mut Vec<Diagnostic>) {
    let mut i = 0;
    while i < all.len() {
        let Some(host) = consequence_of(&all[i], all) else {
            i += 1;
            continue;
        };
        let folded = all.remove(i);
        let host = &mut all[if host > i { host - 1 } else { host }];
        host.message += &format!(
            "; for the same reason {} compiled another graph ({}, once)",
            folded.location,
            crate::util::format_ns(folded.cost_ns as f64)
        );
        host.graphs.extend(folded.graphs);
    }
}

/// The finding whose cause a one-time recompile follows from, if any.
fn consequence_of(d: &Diagnostic, all: &[Diagnostic]) -> Option<usize> {
    if d.kind != Kind::Recompile || !d.once || d.changes.is_empty() {
        return None;
    }
    let reads: Vec<&String> = d
        .changes
        .iter()
        .filter_map(|c| match c {
            GraphChange::SplitBy { read_at, .. } => Some(read_at),
            _ => None,
        })
        .collect();
    if reads.len() == d.changes.len() {
        return all
            .iter()
            .position(|h| h.kind == Kind::HiddenSync && reads.iter().all(|&at| *at == h.location));
    }
    let worked: Option<Vec<&String>> = d
        .changes
        .iter()
        .map(|c| match c {
            GraphChange::Work { lines, .. } if !lines.is_empty() => {
                Some(lines.iter().map(|(at, _)| at))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .map(|lines| lines.into_iter().flatten().collect());
    let lines = worked?;
    // The warm-up's message names each line where the first update made state.
    all.iter().position(|h| {
        h.kind == Kind::LazyState
            && lines.iter().all(|at| {
                h.message.contains(&format!("{at},")) || h.message.contains(&format!("{at} ("))
            })
    })
}
