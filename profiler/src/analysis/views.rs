//! The tables every viewer shows (terminal UI, GUI, notebook): the phases of each step, and each
//! distinct graph with its cost and the version of its call site it replaced. Computed here once,
//! so the views draw and never recompute.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::diagnostics::{GraphChange, Recompile};
use crate::profile::Profile;

/// Where one step's time went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPhases {
    pub index: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub build_ns: u64,
    pub lower_ns: u64,
    pub compile_ns: u64,
    pub transfer_ns: u64,
    pub execute_ns: u64,
    /// The rest of the step: tracing ops and the program's own work, outside syncs.
    pub other_ns: u64,
    pub syncs: u32,
    pub compiles: u32,
    /// Syncs forced by reading a value inside the step.
    pub value_read_syncs: u32,
}

/// Where a step's time goes: the one list of phases every view draws and names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Phase {
    /// Outside syncs: tracing ops, the program's own work.
    Trace,
    Build,
    Lower,
    Compile,
    Transfer,
    Execute,
}

impl Phase {
    /// Every phase, in drawing order.
    pub const ALL: [Phase; 6] =
        [Phase::Trace, Phase::Build, Phase::Lower, Phase::Compile, Phase::Transfer, Phase::Execute];

    /// The phases inside a sync (every phase but tracing).
    pub const OF_SYNCS: [Phase; 5] =
        [Phase::Build, Phase::Lower, Phase::Compile, Phase::Transfer, Phase::Execute];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Trace => "trace",
            Phase::Build => "build",
            Phase::Lower => "lower",
            Phase::Compile => "compile",
            Phase::Transfer => "transfer",
            Phase::Execute => "execute",
        }
    }
}

impl StepPhases {
    /// The phases in drawing order, with their time.
    pub fn phases(&self) -> [(Phase, u64); 6] {
        [
            (Phase::Trace, self.other_ns),
            (Phase::Build, self.build_ns),
            (Phase::Lower, self.lower_ns),
            (Phase::Compile, self.compile_ns),
            (Phase::Transfer, self.transfer_ns),
            (Phase::Execute, self.execute_ns),
        ]
    }
}

/// Per step of the profile, in order.
pub fn step_phases(p: &Profile) -> Vec<StepPhases> {
    let mut out: Vec<StepPhases> = p
        .steps
        .iter()
        .map(|s| StepPhases {
            index: s.index,
            start_ns: s.start_ns,
            duration_ns: s.duration_ns(),
            build_ns: 0,
            lower_ns: 0,
            compile_ns: 0,
            transfer_ns: 0,
            execute_ns: 0,
            other_ns: 0,
            syncs: 0,
            compiles: 0,
            value_read_syncs: 0,
        })
        .collect();
    // What a front end's compiler did (torch.compile) counts as the engine's compiles and
    // executions do: compiling and running graphs, inside the step.
    let captured = p
        .function_compiles
        .iter()
        .map(|c| (c.step, c.duration_ns, 0, 1))
        .chain(p.captured_runs.iter().map(|r| (r.step, 0, r.duration_ns, 0)));
    for (step, compile_ns, execute_ns, compiles) in captured {
        let Some(row) = (step as usize).checked_sub(1).and_then(|i| out.get_mut(i)) else {
            continue;
        };
        row.other_ns = row.other_ns.saturating_add(compile_ns).saturating_add(execute_ns);
        row.compile_ns = row.compile_ns.saturating_add(compile_ns);
        row.execute_ns = row.execute_ns.saturating_add(execute_ns);
        row.compiles = row.compiles.saturating_add(compiles);
    }
    for s in &p.syncs {
        // Steps are 1-based; syncs after the last `step()` belong to no finished step.
        let Some(row) = (s.step as usize).checked_sub(1).and_then(|i| out.get_mut(i)) else {
            continue;
        };
        // Until every sync is counted, `other_ns` holds the time in the step's syncs.
        // Saturating: a damaged or crafted profile can hold durations near `u64::MAX`.
        let add = |total: &mut u64, ns: u64| *total = total.saturating_add(ns);
        add(&mut row.other_ns, s.phases_ns());
        add(&mut row.build_ns, s.build_ns);
        add(&mut row.lower_ns, s.lower_ns);
        add(&mut row.compile_ns, s.compile_ns);
        add(&mut row.transfer_ns, s.transfer_ns);
        add(&mut row.execute_ns, s.execute_ns);
        row.syncs = row.syncs.saturating_add(1);
        row.compiles = row.compiles.saturating_add(s.compiled() as u32);
        let value_read = matches!(s.cause, crate::record::Cause::ValueRead);
        row.value_read_syncs = row.value_read_syncs.saturating_add(value_read as u32);
    }
    for row in &mut out {
        row.other_ns = row.duration_ns.saturating_sub(row.other_ns);
    }
    out
}

/// One distinct graph: what it cost, where it came from, and what it replaced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphRow {
    pub hash: u64,
    /// The call site of the sync that first built it (location id and text).
    pub site_id: u32,
    pub site: String,
    /// 1 for the first graph its site compiled, 2 for the next, ...
    pub version: u32,
    pub nodes: u32,
    pub inputs: u32,
    pub outputs: u32,
    pub compiles: u32,
    pub compile_ns: u64,
    pub executions: u32,
    pub execute_ns: u64,
    pub mean_execute_ns: u64,
    pub flops: Option<f64>,
    pub peak_memory_bytes: Option<i64>,
    /// The earlier graph of the same site it is nearest to, and what changed from it.
    pub previous: Option<u64>,
    pub changes: Vec<GraphChange>,
    /// The source lines its ops were recorded at, with how many nodes each, most first.
    pub source_lines: Vec<(String, u32)>,
}

/// Every graph of the profile, in the order they were first built. `recompiles` is the
/// profile's [`crate::Analysis::recompiles`] (or [`crate::diagnostics::find_recompiles`] of it).
pub fn graph_rows(p: &Profile, recompiles: &[Recompile]) -> Vec<GraphRow> {
    let captured = crate::diagnostics::captured_recompiles(p);
    let mut replaced: BTreeMap<u64, (u64, &[GraphChange])> = BTreeMap::new();
    for r in recompiles {
        replaced.entry(r.hash).or_insert((r.previous, &r.changes));
    }
    for (hash, previous, changes) in &captured {
        replaced.entry(*hash).or_insert((*previous, changes));
    }
    // Graphs a front end's compiler captured belong to no sync: they go in the order compiled.
    let compiled_order: BTreeMap<u64, usize> = p
        .function_compiles
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.graphs.iter().map(move |&h| (h, i)))
        .collect();
    let mut graphs: Vec<_> = p.graphs.values().collect();
    graphs.sort_by_key(|g| {
        (g.first_sync, compiled_order.get(&g.def.hash).copied().unwrap_or(0), g.def.hash)
    });
    let mut versions: BTreeMap<u32, u32> = BTreeMap::new();
    graphs
        .into_iter()
        .map(|g| {
            let site_id =
                p.sync(g.first_sync).map(|s| s.location).or(g.function).unwrap_or(u32::MAX);
            let version = versions.entry(site_id).or_default();
            *version = version.saturating_add(1);
            // Counted by id, so each distinct location is formatted once.
            let mut by_id: BTreeMap<u32, u32> = BTreeMap::new();
            for n in &g.def.node_defs {
                let count = by_id.entry(n.location).or_default();
                *count = count.saturating_add(1);
            }
            // Then by text: one line can hold several locations (columns).
            let mut lines: BTreeMap<String, u32> = BTreeMap::new();
            for (l, n) in by_id {
                let count = lines.entry(p.location(l)).or_default();
                *count = count.saturating_add(n);
            }
            let mut source_lines: Vec<(String, u32)> = lines.into_iter().collect();
            source_lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let (previous, changes) = match replaced.get(&g.def.hash) {
                Some((prev, changes)) => (Some(*prev), changes.to_vec()),
                None => (None, Vec::new()),
            };
            GraphRow {
                hash: g.def.hash,
                site_id,
                site: p.location(site_id),
                version: *version,
                nodes: g.def.nodes,
                inputs: g.def.inputs.len() as u32,
                outputs: g.def.outputs.len() as u32,
                compiles: g.compiles,
                compile_ns: g.compile_ns,
                executions: g.executions,
                execute_ns: g.execute_ns,
                mean_execute_ns: g.execute_ns.checked_div(g.executions as u64).unwrap_or(0),
                flops: g.cost.map(|c| c.flops),
                peak_memory_bytes: g.memory.map(|m| m.peak_memory_bytes),
                previous,
                changes,
                source_lines,
            }
        })
        .collect()
}

/// The versions of a graph's call site, oldest first: its recompile history.
pub fn site_history(rows: &[GraphRow], hash: u64) -> Vec<&GraphRow> {
    let Some(site) = rows.iter().find(|r| r.hash == hash).map(|r| r.site_id) else {
        return Vec::new();
    };
    rows.iter().filter(|r| r.site_id == site).collect()
}

/// One source line as the line profiler shows it: what the engine did because of it. A line
/// inside a library counts for the user's line that called into it, where known.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LineRow {
    pub file: String,
    pub line: u32,
    /// The profile's location ids on this line (a line can hold several: functions, columns).
    pub locations: Vec<u32>,
    /// Ops recorded at the line, over every graph the program ran (a graph built each step
    /// counts each time).
    pub ops: u64,
    /// Calls into the engine the front end made at the line (a torch op, an `xp` function),
    /// and the time recording them took on the host (the line's share of tracing).
    pub calls: u64,
    pub trace_ns: u64,
    /// Tensors made at the line that graphs read as inputs (a batch moved to the device, a
    /// parameter an optimizer wrote), over every graph the program ran.
    pub inputs: u64,
    /// Syncs the line forced (value reads, steps, explicit syncs), and of them those that
    /// compiled, with the compile time.
    pub syncs: u64,
    pub compiles: u64,
    pub compile_ns: u64,
    /// Values read to the host at the line, and the bytes read and uploaded by its syncs.
    pub reads: u64,
    pub bytes: u64,
    /// Ops run on the host for want of a lowering.
    pub fallbacks: u64,
}

/// Every source line the engine did something for, by file and line.
pub fn line_rows(p: &Profile) -> Vec<LineRow> {
    let user = |id: u32| p.callers.get(&id).copied().unwrap_or(id);
    let mut rows: BTreeMap<(String, u32), LineRow> = BTreeMap::new();
    // The nodes of each graph by location, counted once per graph.
    let mut per_graph: BTreeMap<u64, BTreeMap<u32, (u64, u64)>> = BTreeMap::new();
    let mut uploaded: BTreeMap<u64, u64> = BTreeMap::new();
    for t in p.transfers.iter().filter(|t| t.to_device) {
        *uploaded.entry(t.sync).or_default() += t.bytes;
    }
    for s in &p.syncs {
        if let Some(r) = line_row(&mut rows, p, user(s.location)) {
            r.syncs += 1;
            if s.compiled() {
                r.compiles += 1;
                r.compile_ns = r.compile_ns.saturating_add(s.compile_ns);
            }
            r.bytes = r.bytes.saturating_add(uploaded.get(&s.id).copied().unwrap_or(0));
        }
        let Some(g) = s.hash.and_then(|h| p.graphs.get(&h)) else { continue };
        let counts = per_graph.entry(g.def.hash).or_insert_with(|| {
            let mut c: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            for n in g.def.node_defs.iter().filter(|n| n.op != "parameter") {
                c.entry(n.location).or_default().0 += 1;
            }
            for i in g.def.inputs.iter().filter(|i| i.data) {
                c.entry(i.location).or_default().1 += 1;
            }
            c
        });
        for (&id, &(ops, inputs)) in counts.iter() {
            if let Some(r) = line_row(&mut rows, p, user(id)) {
                r.ops = r.ops.saturating_add(ops);
                r.inputs = r.inputs.saturating_add(inputs);
            }
        }
    }
    for v in &p.value_reads {
        if let Some(r) = line_row(&mut rows, p, user(v.location)) {
            r.reads += 1;
            r.bytes = r.bytes.saturating_add(v.bytes);
        }
    }
    for f in &p.host_fallbacks {
        if let Some(r) = line_row(&mut rows, p, user(f.location)) {
            r.fallbacks += 1;
        }
    }
    for (&id, t) in &p.traced {
        if let Some(r) = line_row(&mut rows, p, id) {
            r.calls = r.calls.saturating_add(t.calls);
            r.trace_ns = r.trace_ns.saturating_add(t.ns);
        }
    }
    rows.into_values().collect()
}

fn line_row<'r>(
    rows: &'r mut BTreeMap<(String, u32), LineRow>,
    p: &Profile,
    id: u32,
) -> Option<&'r mut LineRow> {
    let l = p.locations.get(id as usize)?;
    let r = rows.entry((l.file.clone(), l.line)).or_insert_with(|| LineRow {
        file: l.file.clone(),
        line: l.line,
        ..LineRow::default()
    });
    if !r.locations.contains(&id) {
        r.locations.push(id);
    }
    Some(r)
}
