//! Findings about steps: syncs and host reads inside them, slow compiles and steps, and a device
//! left idle while the host works.

use std::collections::{BTreeMap, HashSet};

use super::{plural, span_of_each_sync, times, Diagnostic, Instance, Kind, Thresholds};
use crate::metrics::{format_bytes, format_ns, median};
use crate::profile::{Graph, Profile, Step, Sync};
use crate::record::{Cause, ShapeRec};
use crate::util::saturating_sum;
use crate::views::StepPhases;

/// Whether the value read `p.syncs[i]` split its step's work: when the step's later graphs take
/// what its graph computed (the step runs as two graphs, the host waiting between them), or
/// compute work recorded before it (what it left pending, the rest of the step). Not a read
/// after the last step (a result read after the loop), nor one whose step's later graphs are
/// work recorded after it (an evaluation between steps, `estimate_loss()`).
fn splits_its_step(p: &Profile, i: usize, closed_steps: u64) -> bool {
    let s = &p.syncs[i];
    if closed_steps > 0 && s.step > closed_steps {
        return false;
    }
    let Some(graph) = s.hash.and_then(|h| p.graphs.get(&h)) else { return true };
    let later_syncs: Vec<&Sync> = p.syncs[i + 1..].iter().take_while(|l| l.step == s.step).take(64).collect();
    let later: Vec<&Graph> = later_syncs.iter().filter_map(|l| l.hash.and_then(|h| p.graphs.get(&h))).collect();
    if later.is_empty() {
        return true;
    }
    let computed: HashSet<(u32, &ShapeRec)> = graph
        .def
        .node_defs
        .iter()
        .filter(|n| n.op != "parameter")
        .map(|n| (n.location, &n.shape))
        .collect();
    if later.iter().flat_map(|g| &g.def.inputs).any(|i| i.data && computed.contains(&(i.location, &i.shape))) {
        return true;
    }
    match s.left_pending {
        Some(0) => false,
        // A line of a later graph that recorded nothing after the read: work recorded before
        // it, left pending, computed apart. (Unknown in older profiles: a split, as before.)
        Some(_) => {
            let traced_after: HashSet<u32> = later_syncs.iter().flat_map(|l| &l.traced_before).copied().collect();
            later
                .iter()
                .flat_map(|g| &g.def.node_defs)
                .any(|n| n.op != "parameter" && !traced_after.contains(&n.location))
        }
        None => true,
    }
}

/// The spans of the collectives this process made through the host (the lazy device's, between
/// processes), sorted by start, with their op.
fn host_collective_spans(p: &Profile) -> Vec<(u64, u64, &str)> {
    let mut spans: Vec<(u64, u64, &str)> = p
        .collectives
        .iter()
        .filter(|c| c.op.ends_with("through the host"))
        .map(|c| (c.start_ns, c.end_ns.unwrap_or(u64::MAX), c.op.as_str()))
        .collect();
    spans.sort_unstable();
    spans
}

/// The op of the collective through the host that was running at `t`, if any.
fn collective_around<'a>(spans: &[(u64, u64, &'a str)], t: u64) -> Option<&'a str> {
    let i = spans.partition_point(|s| s.0 <= t);
    (i > 0 && t <= spans[i - 1].1).then(|| spans[i - 1].2)
}

/// Hidden syncs (value reads that ran a graph), explicit syncs that split a step, and host
/// reads. Each costs what fixing it gives back: the compile of the split-off graph and the time
/// the host stood waiting for the device to run it; never the rest of the sync.
/// `explained`: syncs another finding names as its cost (the size reads').
pub(super) fn syncs_in_steps(
    p: &Profile,
    t: &Thresholds,
    explained: &HashSet<u64>,
) -> Vec<Diagnostic> {
    let closed_steps = p.steps.len() as u64;
    let mut hidden: BTreeMap<u32, Vec<Instance>> = BTreeMap::new();
    // Reads that ran a graph of their own without splitting their step's work, by line.
    let mut apart: BTreeMap<u32, Vec<Instance>> = BTreeMap::new();
    let mut mid: BTreeMap<u32, Vec<Instance>> = BTreeMap::new();
    // Reads made by a collective that goes through the host, by line, with the collective.
    let mut collectives: BTreeMap<u32, (Vec<Instance>, &str)> = BTreeMap::new();
    let through_host = host_collective_spans(p);
    let mut graphs: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    // For each sync, whether a later sync of its step ran a graph: one pass from the end.
    let mut ran_after = vec![false; p.syncs.len()];
    for i in (0..p.syncs.len().saturating_sub(1)).rev() {
        let (s, next) = (&p.syncs[i], &p.syncs[i + 1]);
        ran_after[i] = next.step == s.step && (next.hash.is_some() || ran_after[i + 1]);
    }
    // A fallback reads its operands (syncs at its line): its own finding says so, once.
    let in_fallback = fallback_of_each_sync(p);
    for (i, ((s, &ran_after), fallback)) in p.syncs.iter().zip(&ran_after).zip(&in_fallback).enumerate() {
        if fallback.is_some() || explained.contains(&s.id) {
            continue;
        }
        let split = s.cause != Cause::ValueRead || splits_its_step(p, i, closed_steps);
        if !split && (s.hash.is_none() || s.step > closed_steps) {
            continue;
        }
        let cost_ns = s.compile_ns.saturating_add(s.execute_ns);
        let instance = Instance {
            message: format!(
                "step {}: a graph of {} tensors ran early ({} compiling, {} waiting for the device)",
                s.step,
                s.tensors,
                format_ns(s.compile_ns as f64),
                format_ns(s.execute_ns as f64)
            ),
            sync: Some(s.id),
            step: Some(s.step),
            cost_ns,
        };
        // A read inside a collective through the host that splits its step is the
        // collective's: its own finding.
        if let (Cause::ValueRead, true, Some(op)) = (s.cause, split, collective_around(&through_host, s.start_ns)) {
            collectives.entry(s.location).or_insert_with(|| (Vec::new(), op)).0.push(instance);
            graphs.entry(s.location).or_default().extend(s.hash);
            continue;
        }
        match s.cause {
            Cause::ValueRead if !split => apart.entry(s.location).or_default().push(instance),
            Cause::ValueRead => hidden.entry(s.location).or_default().push(instance),
            // An explicit sync splits its step only when the step ran another graph after it
            // (`sync()` then `step()` with nothing left pending splits nothing).
            Cause::Explicit if s.step <= closed_steps && ran_after => {
                mid.entry(s.location).or_default().push(instance)
            }
            _ => continue,
        }
        graphs.entry(s.location).or_default().extend(s.hash);
    }
    let steps_with = |v: &[Instance]| {
        let mut s: Vec<u64> = v.iter().filter_map(|i| i.step).collect();
        s.dedup();
        s.len()
    };
    let mut out = Vec::new();
    for (location, instances) in hidden {
        let site = p.location(location);
        let cost = saturating_sum(instances.iter().map(|i| i.cost_ns));
        let message = format!(
            "a value read at {site} forced a graph to run before the step ended, {} in {} ({}): the step runs as two graphs and the host waits for the device",
            times(instances.len()),
            plural(steps_with(&instances), "step"),
            format_ns(cost as f64)
        );
        let advice = match p.callers.get(&location) {
            // Read by the library the line calls, not by the line itself.
            Some(_) => format!(
                "the value is read inside the library code this line calls ({}), not by the line itself: make the call after step(), or give the library what spares it the read (a value already on the host for a message it formats; a mask, position ids or cache that let it skip a check of the data)",
                p.line(location)
            ),
            None => "read the value after step() (it is then already on the device), or keep it as a tensor; avoid branching on tensor values inside the step".to_string(),
        };
        let g = graphs.remove(&location).unwrap_or_default();
        out.push(Diagnostic::new(
            p,
            Kind::HiddenSync,
            location,
            message,
            Some(advice),
            instances,
            g,
        ));
    }
    // A read that computes work of its own (an action for an environment on the host, a
    // decision the host makes) without splitting the step's: once in a while it is an
    // evaluation between steps; at every step, the step is many small programs, each waited for.
    for (location, instances) in apart {
        let steps = steps_with(&instances) as u64;
        if closed_steps < 3 || steps < 3 || steps * 4 < closed_steps * 3 {
            continue;
        }
        let site = p.location(location);
        let cost = saturating_sum(instances.iter().map(|i| i.cost_ns));
        let message = format!(
            "a value read at {site} ran a graph of its own {} in {} ({}), {} a step: the step's work runs as many small programs, the host waiting for the device at each",
            times(instances.len()),
            plural(steps as usize, "step"),
            format_ns(cost as f64),
            (instances.len() as u64).div_ceil(steps)
        );
        let advice = "when the value decides what the host does next (an action for an environment stepped on the CPU), compute it on the CPU (a copy of the model there, refreshed after each update) or for many at once (more environments per read); otherwise keep it on the device and read it after step()".to_string();
        let g = graphs.remove(&location).unwrap_or_default();
        out.push(Diagnostic::new(p, Kind::HiddenSync, location, message, Some(advice), instances, g));
    }
    for (location, (instances, op)) in collectives {
        // Once is setup (a model's parameters sent from the first rank as it is wrapped).
        if steps_with(&instances) < 2 {
            continue;
        }
        let cost = saturating_sum(instances.iter().map(|i| i.cost_ns));
        let what = op.trim_end_matches(", through the host");
        let message = format!(
            "the {what} at {} goes through the host: the device's work so far ran as a graph of its own and its tensors were copied to the host and back, {} in {} ({}): the step runs as two graphs and the host waits for the device",
            p.location(location),
            times(instances.len()),
            plural(steps_with(&instances), "step"),
            format_ns(cost as f64)
        );
        let advice = "this device's collectives between processes run on the host, never inside a graph: reduce less often (accumulate gradients over several batches under `model.no_sync()`, reducing at the last), or drive the devices from one process (SPMD: `xs.mark_sharding`), where the reduction is part of the step's graph".to_string();
        let g = graphs.remove(&location).unwrap_or_default();
        out.push(Diagnostic::new(p, Kind::HiddenSync, location, message, Some(advice), instances, g));
    }
    for (location, instances) in mid {
        // Once is setup (the `sync()` that separates initialization from the first step, as the
        // warm-up finding advises); a split in every step is the cost.
        if steps_with(&instances) < 2 {
            continue;
        }
        let site = p.location(location);
        let message = format!(
            "sync() at {site} split a step into separate graphs {} (more ran after it in the same step)",
            times(instances.len())
        );
        let advice = "sync once per step (step() at its end)".to_string();
        let g = graphs.remove(&location).unwrap_or_default();
        out.push(Diagnostic::new(
            p,
            Kind::MidStepSync,
            location,
            message,
            Some(advice),
            instances,
            g,
        ));
    }
    // Reads inside a run of a torch.compile graph are its results going back to a program whose
    // model and batches are on the CPU (`backend="xlaprof"` on a CPU model): a cost of each call.
    let mut runs: Vec<(u64, u64)> =
        p.captured_runs.iter().map(|r| (r.start_ns, r.start_ns.saturating_add(r.duration_ns))).collect();
    runs.sort_unstable();
    let in_a_run = |t: u64| {
        let i = runs.partition_point(|r| r.0 <= t);
        i > 0 && t <= runs[i - 1].1
    };
    let mut reads: BTreeMap<(u32, bool), Vec<(u64, u64, u64)>> = BTreeMap::new();
    for r in p.value_reads.iter().filter(|r| r.forced_sync.is_none()) {
        reads.entry((r.location, in_a_run(r.start_ns))).or_default().push((r.step, r.bytes, r.duration_ns));
    }
    for ((location, results), rs) in reads {
        // Reading a logged scalar after the step stalls for microseconds: not a problem.
        let per_read = saturating_sum(rs.iter().map(|r| r.1)) / rs.len().max(1) as u64;
        if per_read < t.host_read_bytes {
            continue;
        }
        let bytes = saturating_sum(rs.iter().map(|r| r.1));
        let stall = saturating_sum(rs.iter().map(|r| r.2));
        let mut steps: Vec<u64> = rs.iter().map(|r| r.0).collect();
        steps.dedup();
        let message = match results {
            false => format!(
                "{} copied values to the host {} in {} ({} in all, {} of stalls)",
                p.location(location),
                times(rs.len()),
                plural(steps.len(), "step"),
                format_bytes(bytes as f64),
                format_ns(stall as f64)
            ),
            true => format!(
                "the compiled function called at {} copied its results back to the CPU {} in {} ({} in all, {} of stalls): its model and inputs are CPU tensors, so each call also copies them to the device",
                p.location(location),
                times(rs.len()),
                plural(steps.len(), "step"),
                format_bytes(bytes as f64),
                format_ns(stall as f64)
            ),
        };
        let instances = rs
            .iter()
            .map(|&(step, bytes, dur)| Instance {
                message: format!(
                    "step {step}: {} read in {}",
                    format_bytes(bytes as f64),
                    format_ns(dur as f64)
                ),
                sync: None,
                step: Some(step),
                cost_ns: dur,
            })
            .collect();
        let advice = Some(match results {
            false => "read values only every few steps (e.g. for logging) if the stall matters".to_string(),
            true => "move the model and its batches to the device before compiling (`model.to(xt.device())`, `x.to(xt.device())`): they then stay there between calls, and only what the program reads comes back".to_string(),
        });
        out.push(Diagnostic::new(
            p,
            Kind::HostRead,
            location,
            message,
            advice,
            instances,
            Vec::new(),
        ));
    }
    out
}

pub(super) fn slow_compiles(p: &Profile, t: &Thresholds) -> Vec<Diagnostic> {
    let mut by_site: BTreeMap<u32, Vec<Instance>> = BTreeMap::new();
    let mut graphs: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for c in p.compiles.iter().filter(|c| c.duration_ns > t.slow_compile_ns) {
        let Some(s) = p.sync(c.sync) else { continue };
        let nodes = p.graphs.get(&c.hash).map(|g| g.def.nodes).unwrap_or(0);
        by_site.entry(s.location).or_default().push(Instance {
            message: format!(
                "graph {:016x} ({nodes} nodes) took {} to compile",
                c.hash,
                format_ns(c.duration_ns as f64)
            ),
            sync: Some(c.sync),
            step: Some(s.step),
            cost_ns: c.duration_ns,
        });
        graphs.entry(s.location).or_default().push(c.hash);
    }
    by_site
        .into_iter()
        .map(|(location, instances)| {
            let longest = instances.iter().map(|i| i.cost_ns).max().unwrap_or(0);
            let message = format!(
                "compiling the graph synced at {} took up to {} (over the {} threshold)",
                p.location(location),
                format_ns(longest as f64),
                format_ns(t.slow_compile_ns as f64)
            );
            let advice = Some("use the persistent compile cache (XLAPROF_CACHE_DIR) so later runs load it; split very large graphs with an extra step()".to_string());
            let g = graphs.remove(&location).unwrap_or_default();
            Diagnostic::new(p, Kind::SlowCompile, location, message, advice, instances, g)
        })
        .collect()
}

pub(super) fn slow_steps(p: &Profile, t: &Thresholds, phases: &[StepPhases]) -> Vec<Diagnostic> {
    // Compile time is a finding of its own (recompiles): a step is slow for what is left.
    // `phases` has a row per step, in the same order (a step's syncs are counted by position).
    let steady: Vec<(&Step, u64)> = p
        .steps
        .iter()
        .zip(phases)
        .filter(|(s, _)| s.index > t.warmup_steps)
        .map(|(s, ph)| (s, ph.duration_ns.saturating_sub(ph.compile_ns)))
        .collect();
    let med = median(steady.iter().map(|&(_, own)| own).collect());
    if med == 0 {
        return Vec::new();
    }
    let limit = (med as f64 * t.slow_step_factor) as u64;
    let slow: Vec<(&Step, u64)> = steady.into_iter().filter(|&(_, own)| own > limit).collect();
    let Some(&(first, _)) = slow.first() else { return Vec::new() };
    let instances: Vec<Instance> = slow
        .iter()
        .map(|&(s, own)| Instance {
            message: format!(
                "step {} took {} without compiles ({:.1}x the median)",
                s.index,
                format_ns(own as f64),
                own as f64 / med as f64
            ),
            sync: None,
            step: Some(s.index),
            cost_ns: own.saturating_sub(med),
        })
        .collect();
    let slowest = slow.iter().max_by_key(|&&(_, own)| own).map_or(first.index, |(s, _)| s.index);
    let message = format!(
        "{} steps after warm-up took more than {:.1}x the median step ({}), compile time aside; the slowest is step {slowest}",
        instances.len(),
        t.slow_step_factor,
        format_ns(med as f64),
    );
    vec![Diagnostic::new(p, Kind::SlowStep, first.location, message, None, instances, Vec::new())]
}

pub(super) fn idle_device(p: &Profile, t: &Thresholds, phases: &[StepPhases]) -> Vec<Diagnostic> {
    // A program whose graphs the engine did not run (torch.compile on another backend) shows
    // its compiled graphs' runs but not what autograd runs of them in `backward()`: its device
    // time is not known, so neither is its idle time.
    if p.syncs.is_empty() {
        return Vec::new();
    }
    let mut instances = Vec::new();
    let mut busy_fractions = Vec::new();
    for (s, ph) in p.steps.iter().zip(phases).filter(|(s, _)| s.index > t.warmup_steps) {
        let (compile, busy) = (ph.compile_ns, ph.execute_ns);
        // Compile time is the recompile finding's; the device is idle if the rest is host work.
        let host_and_device = s.duration_ns().saturating_sub(compile);
        if host_and_device == 0 {
            continue;
        }
        let fraction = busy as f64 / host_and_device as f64;
        busy_fractions.push(fraction);
        if fraction < t.idle_fraction {
            instances.push(Instance {
                message: format!(
                    "step {}: the device ran {:.0}% of {} (compiles aside)",
                    s.index,
                    fraction * 100.0,
                    format_ns(host_and_device as f64)
                ),
                sync: None,
                step: Some(s.index),
                cost_ns: host_and_device.saturating_sub(busy),
            });
        }
    }
    // Only a pattern (most steady steps) is a finding, not one odd step.
    if instances.is_empty() || instances.len() * 2 < busy_fractions.len() {
        return Vec::new();
    }
    busy_fractions.sort_by(|a, b| a.total_cmp(b));
    let med = busy_fractions[busy_fractions.len() / 2];
    let location = p.steps.last().map(|s| s.location).unwrap_or(0);
    let message = format!(
        "the device was busy only {:.0}% of the time in {} of {} steps after warm-up: the host (tracing, transfers, reads) is the bottleneck",
        med * 100.0,
        instances.len(),
        busy_fractions.len()
    );
    let advice = Some("record fewer ops per step (fuse work into larger tensors), avoid host reads in the loop, and overlap data loading with the step".to_string());
    vec![Diagnostic::new(p, Kind::IdleDevice, location, message, advice, instances, Vec::new())]
}

/// For each sync, the host fallback that forced it (a value read of its operands).
fn fallback_of_each_sync(p: &Profile) -> Vec<Option<usize>> {
    let spans: Vec<(u64, u64, u32)> =
        p.host_fallbacks.iter().map(|f| (f.start_ns, f.duration_ns, f.location)).collect();
    span_of_each_sync(p, &spans, |a, b| a == b)
}

/// Ops run on the host for want of a lowering, per (op, line): each splits its step's graph,
/// reads its operands to the host and uploads its results.
pub(super) fn host_fallbacks(p: &Profile) -> Vec<Diagnostic> {
    // The syncs its operand reads forced are part of its cost.
    let mut forced: Vec<Vec<u64>> = vec![Vec::new(); p.host_fallbacks.len()];
    for (s, f) in p.syncs.iter().zip(fallback_of_each_sync(p)) {
        if let Some(f) = f {
            forced[f].push(s.id);
        }
    }
    let mut sites: BTreeMap<(u32, &str), Vec<Instance>> = BTreeMap::new();
    for (f, syncs) in p.host_fallbacks.iter().zip(&forced) {
        sites.entry((f.location, f.op.as_str())).or_default().push(Instance {
            message: format!(
                "step {}: {} on the CPU ({}, {} forced)",
                f.step,
                f.op,
                format_ns(f.duration_ns as f64),
                plural(syncs.len(), "sync")
            ),
            sync: syncs.first().copied(),
            step: Some(f.step),
            cost_ns: f.duration_ns,
        });
    }
    let mut out = Vec::new();
    for ((location, op), instances) in sites {
        let site = p.location(location);
        let cost = saturating_sum(instances.iter().map(|i| i.cost_ns));
        let mut steps: Vec<u64> = instances.iter().filter_map(|i| i.step).collect();
        steps.dedup();
        let message = format!(
            "{op} at {site} has no lowering and ran on the CPU, {} in {} ({}): each time its operands are read to the host (running the graph so far) and its results copied back",
            times(instances.len()),
            plural(steps.len(), "step"),
            format_ns(cost as f64)
        );
        let advice = "avoid the op inside the step or write it with lowered ops; XLAPROF_STRICT=1 makes every fallback an error at its line".to_string();
        out.push(Diagnostic::new(
            p,
            Kind::HostFallback,
            location,
            message,
            Some(advice),
            instances,
            Vec::new(),
        ));
    }
    out
}
