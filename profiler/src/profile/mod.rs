//! A profile: what the engine did, as syncs, graphs, compiles, executions, transfers, steps and
//! scopes on one timeline. Built by replaying records, whether they come from a live recording, a
//! file, or a file still being written.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

mod counters;
mod items;
pub mod recorder;
pub mod variables;

pub(crate) use counters::CounterNames;
pub use counters::Counters;
pub use items::*;

use serde::Serialize;

use crate::record::{clip, clip_to, Cause, Location, Meta, Record};

/// What the profile could not take from its records, by kind: each kind is one warning, however
/// many records it hit (a crafted file must not make the warnings as long as itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Dropped {
    LocationId,
    Operand,
    InputName,
}

impl Dropped {
    fn warning(self, n: u64) -> String {
        let (one, many) = match self {
            Dropped::LocationId => (
                "1 location record was dropped: its id is",
                "location records were dropped: their ids are",
            ),
            Dropped::Operand => (
                "1 operand of a graph node was dropped: it is",
                "operands of graph nodes were dropped: they are",
            ),
            Dropped::InputName => (
                "1 graph input name was dropped: its input is",
                "graph input names were dropped: their inputs are",
            ),
        };
        let why = match self {
            Dropped::LocationId => {
                "larger than the number of records before it, which no recorder writes"
            }
            Dropped::Operand => "not an earlier node of its graph",
            Dropped::InputName => "not an input of its graph",
        };
        let what = if n == 1 { one.to_string() } else { format!("{n} {many}") };
        format!("{what} {why} (the file is damaged or was not written by xlaprof)")
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Profile {
    pub meta: Meta,
    pub locations: Vec<Location>,
    pub graphs: BTreeMap<u64, Graph>,
    pub syncs: Vec<Sync>,
    pub compiles: Vec<Compile>,
    pub executions: Vec<Execution>,
    pub transfers: Vec<Transfer>,
    pub value_reads: Vec<ValueRead>,
    /// Ops run on the host for want of a lowering, in order.
    pub host_fallbacks: Vec<HostFallback>,
    pub data_waits: Vec<DataWait>,
    /// In a job of several processes: this one's rank, and its collectives with the others.
    pub job: Option<JobRank>,
    pub collectives: Vec<Collective>,
    pub size_reads: Vec<SizeRead>,
    /// Compiles by a front end's compiler (torch.compile), its graph breaks and graph runs.
    pub function_compiles: Vec<FunctionCompile>,
    pub graph_breaks: Vec<GraphBreak>,
    pub captured_runs: Vec<CapturedRun>,
    /// What the debugging tools caught, in order.
    pub caught: Vec<Caught>,
    /// Recording time per location: ops recorded there and the time it took the front end.
    pub traced: BTreeMap<u32, Tracing>,
    /// For a library's line where a sync or fallback happened, the user's line that called it.
    pub callers: BTreeMap<u32, u32>,
    pub steps: Vec<Step>,
    /// Each device's memory at the end of each step (GPUs; empty on the CPU).
    pub device_memory: Vec<DeviceMemory>,
    pub scopes: Vec<Scope>,
    /// The engine's counters at the end of each sync.
    pub counters: Vec<(u64, Counters)>,
    /// What could not be read (truncated or corrupt files).
    pub warnings: Vec<String>,
    /// Records applied (events, definitions, ...).
    pub records: u64,
    /// The scopes still open, by name, innermost last: an end closes the innermost of its name.
    #[serde(skip)]
    open_scopes: HashMap<String, Vec<usize>>,
    #[serde(skip)]
    open_scope_count: u32,
    #[serde(skip)]
    counter_names: Arc<CounterNames>,
    /// The warning of each kind of dropped content, and how many were dropped.
    #[serde(skip)]
    dropped: BTreeMap<Dropped, (usize, u64)>,
    #[serde(skip)]
    sync_index: BTreeMap<u64, usize>,
    /// The tensors graphs compute, by the line that made them and their shape: a graph input
    /// found here is an earlier graph's result (an activation a mid-step sync materialized), not
    /// data the program brought in.
    #[serde(skip)]
    computed: std::collections::HashSet<(u32, crate::record::ShapeRec)>,
    /// The lines that recorded ops since the last sync began.
    #[serde(skip)]
    traced_since_sync: Vec<u32>,
    #[serde(skip)]
    last_step_end: u64,
    #[serde(skip)]
    end_ns: u64,
}

impl Profile {
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Profile {
        let mut p = Profile::default();
        for r in records {
            p.apply(r);
        }
        p
    }

    /// The location with id `id` (an unknown id reads as `?`).
    /// A location as findings name it: a library's line is named after the user's line that
    /// called into it (`train.py:20 in <module> (via masking_utils.py:761 in ...)`).
    pub fn location(&self, id: u32) -> String {
        match self.callers.get(&id) {
            Some(&caller) => format!("{} (via {})", self.line(caller), self.line(id)),
            None => self.line(id),
        }
    }

    /// The line `id` names itself (`masking_utils.py:761 in ...`), without its caller.
    pub fn line(&self, id: u32) -> String {
        self.locations.get(id as usize).map(|l| l.to_string()).unwrap_or_else(|| "?".to_string())
    }

    /// Whether some graph computes a tensor of `shape` at line `location`.
    pub fn computed(&self, location: u32, shape: &crate::record::ShapeRec) -> bool {
        self.computed.contains(&(location, shape.clone()))
    }

    /// The last time anything happened, in ns since time zero.
    pub fn end_ns(&self) -> u64 {
        self.end_ns
    }

    /// The step the record being applied belongs to: the one after the last `step()`.
    fn current_step(&self) -> u64 {
        self.steps.len() as u64 + 1
    }

    /// The sync with id `id`.
    pub fn sync(&self, id: u64) -> Option<&Sync> {
        self.sync_index.get(&id).and_then(|&i| self.syncs.get(i))
    }

    fn sync_mut(&mut self, id: u64) -> Option<&mut Sync> {
        let i = *self.sync_index.get(&id)?;
        self.syncs.get_mut(i)
    }

    fn seen(&mut self, t: u64) {
        self.end_ns = self.end_ns.max(t);
    }

    /// The engine's counters when recording started.
    pub fn start_counters(&self) -> Counters {
        Counters { names: self.counter_names.clone(), values: self.meta.counters.clone() }
    }

    /// Counts `n` more of what was dropped, in the one warning of its kind.
    fn dropped(&mut self, what: Dropped, n: u64) {
        let (at, before) = self.dropped.get(&what).copied().unwrap_or((usize::MAX, 0));
        let total = before.saturating_add(n);
        let text = what.warning(total);
        // The warning is rewritten in place while it is still the one written before.
        let at = match self.warnings.get_mut(at) {
            Some(w) if *w == what.warning(before) => {
                *w = text;
                at
            }
            _ => {
                self.warnings.push(text);
                self.warnings.len() - 1
            }
        };
        self.dropped.insert(what, (at, total));
    }

    /// Adds one record.
    pub fn apply(&mut self, record: Record) {
        self.records += 1;
        match record {
            Record::Meta(meta) => {
                self.counter_names = Arc::new(CounterNames::new(&meta.counter_names));
                self.meta = meta;
            }
            Record::Location { id, location } => {
                // Ids are given in order, each location written before anything names it: an id
                // can never reach the number of records read. One that does would grow the table
                // beyond anything the file holds (to billions of entries for an id near
                // `u32::MAX`).
                if u64::from(id) >= self.records {
                    self.dropped(Dropped::LocationId, 1);
                    return;
                }
                let id = id as usize;
                if self.locations.len() <= id {
                    self.locations.resize(
                        id + 1,
                        Location { file: "?".into(), line: 0, function: String::new() },
                    );
                }
                self.locations[id] = location;
            }
            Record::Graph(mut def) => {
                // Operands are earlier nodes (a graph lists its nodes inputs first); views walk
                // them as such.
                let mut bad = 0;
                for (at, node) in def.node_defs.iter_mut().enumerate() {
                    let before = node.inputs.len();
                    node.inputs.retain(|&i| (i as usize) < at);
                    bad += (before - node.inputs.len()) as u64;
                }
                if bad > 0 {
                    self.dropped(Dropped::Operand, bad);
                }
                let hash = def.hash;
                if !self.graphs.contains_key(&hash) {
                    let computed = def.node_defs.iter().filter(|n| n.op != "parameter");
                    self.computed.extend(computed.map(|n| (n.location, n.shape.clone())));
                }
                self.graphs.entry(hash).or_insert_with(|| Graph {
                    def: *def,
                    stablehlo: None,
                    optimized_hlo: None,
                    memory: None,
                    cost: None,
                    partition: None,
                    compiles: 0,
                    compile_ns: 0,
                    executions: 0,
                    execute_ns: 0,
                    first_sync: 0,
                    function: None,
                });
            }
            Record::InputNames { hash, names } => {
                let mut bad = 0;
                if let Some(g) = self.graphs.get_mut(&hash) {
                    for (input, name) in names {
                        match g.def.inputs.get_mut(input as usize) {
                            Some(i) => i.name = Some(name),
                            None => bad += 1,
                        }
                    }
                }
                if bad > 0 {
                    self.dropped(Dropped::InputName, bad);
                }
            }
            Record::StableHlo { hash, text } => {
                if let Some(g) = self.graphs.get_mut(&hash) {
                    g.stablehlo = Some(text);
                }
            }
            Record::OptimizedHlo { hash, text } => {
                if let Some(g) = self.graphs.get_mut(&hash) {
                    g.optimized_hlo = Some(text);
                }
            }
            Record::SyncBegin { t, sync, cause, location, tensors } => {
                self.seen(t);
                let step = self.current_step();
                self.sync_index.insert(sync, self.syncs.len());
                self.syncs.push(Sync {
                    id: sync,
                    cause,
                    location,
                    tensors,
                    start_ns: t,
                    end_ns: t,
                    hash: None,
                    cache_hit: false,
                    persistent_hit: false,
                    build_ns: 0,
                    lower_ns: 0,
                    compile_ns: 0,
                    transfer_ns: 0,
                    execute_ns: 0,
                    step,
                    left_pending: None,
                    traced_before: std::mem::take(&mut self.traced_since_sync),
                });
            }
            Record::LeftPending { sync, tensors } => {
                if let Some(&i) = self.sync_index.get(&sync) {
                    self.syncs[i].left_pending = Some(tensors);
                }
            }
            Record::GraphBuilt { t, sync, hash, dur } => {
                self.seen(t);
                if let Some(g) = self.graphs.get_mut(&hash) {
                    if g.first_sync == 0 {
                        g.first_sync = sync;
                    }
                }
                if let Some(s) = self.sync_mut(sync) {
                    s.hash = Some(hash);
                    s.build_ns = s.build_ns.saturating_add(dur);
                }
            }
            Record::CacheLookup { t, sync, hit, persistent, .. } => {
                self.seen(t);
                if let Some(s) = self.sync_mut(sync) {
                    s.cache_hit = hit;
                    s.persistent_hit = persistent;
                }
            }
            Record::Lowered { t, sync, dur, .. } => {
                self.seen(t);
                if let Some(s) = self.sync_mut(sync) {
                    s.lower_ns = s.lower_ns.saturating_add(dur);
                }
            }
            Record::Compiled { t, sync, hash, dur, memory, cost } => {
                self.seen(t);
                self.compiles.push(Compile {
                    sync,
                    hash,
                    start_ns: t.saturating_sub(dur),
                    duration_ns: dur,
                });
                if let Some(g) = self.graphs.get_mut(&hash) {
                    g.compiles = g.compiles.saturating_add(1);
                    g.compile_ns = g.compile_ns.saturating_add(dur);
                    g.memory = memory.or(g.memory);
                    g.cost = cost.or(g.cost);
                }
                if let Some(s) = self.sync_mut(sync) {
                    s.compile_ns = s.compile_ns.saturating_add(dur);
                }
            }
            Record::Transfer { t, sync, to_device, bytes, dur } => {
                self.seen(t);
                self.transfers.push(Transfer {
                    sync,
                    to_device,
                    bytes,
                    start_ns: t.saturating_sub(dur),
                    duration_ns: dur,
                });
                if let Some(s) = self.sync_mut(sync) {
                    s.transfer_ns = s.transfer_ns.saturating_add(dur);
                }
            }
            Record::Executed { t, sync, hash, dur } => {
                self.seen(t);
                self.executions.push(Execution {
                    sync,
                    hash,
                    start_ns: t.saturating_sub(dur),
                    duration_ns: dur,
                    device_end_ns: Vec::new(),
                });
                if let Some(g) = self.graphs.get_mut(&hash) {
                    g.executions = g.executions.saturating_add(1);
                    g.execute_ns = g.execute_ns.saturating_add(dur);
                }
                if let Some(s) = self.sync_mut(sync) {
                    s.execute_ns = s.execute_ns.saturating_add(dur);
                }
            }
            Record::SyncEnd { t, sync, counters, .. } => {
                self.seen(t);
                // Never before it began (a damaged file can hold times out of order).
                if let Some(s) = self.sync_mut(sync) {
                    s.end_ns = t.max(s.start_ns);
                }
                let names = self.counter_names.clone();
                self.counters.push((t, Counters { names, values: counters }));
            }
            Record::Step { t, step, location } => {
                self.seen(t);
                let start_ns = self.last_step_end;
                let end_ns = t.max(start_ns);
                self.steps.push(Step {
                    index: step.max(self.steps.len() as u64 + 1),
                    start_ns,
                    end_ns,
                    location,
                });
                self.last_step_end = end_ns;
            }
            Record::ScopeBegin { t, name, location } => {
                self.seen(t);
                let depth = self.open_scope_count;
                self.open_scope_count = self.open_scope_count.saturating_add(1);
                self.open_scopes.entry(name.clone()).or_default().push(self.scopes.len());
                self.scopes.push(Scope { name, location, start_ns: t, end_ns: None, depth });
            }
            Record::ScopeEnd { t, name } => {
                self.seen(t);
                // By name, not by a search of every open scope: a file of unmatched begins and
                // ends must not take quadratic time.
                let Some(open) = self.open_scopes.get_mut(&name) else { return };
                if let Some(i) = open.pop() {
                    self.scopes[i].end_ns = Some(t.max(self.scopes[i].start_ns));
                    self.open_scope_count -= 1;
                }
                if open.is_empty() {
                    self.open_scopes.remove(&name);
                }
            }
            Record::Platform { platform, plugin } => {
                self.meta.platform = platform;
                self.meta.plugin = plugin;
            }
            Record::Partitioned(plan) => {
                if let Some(g) = self.graphs.get_mut(&plan.hash) {
                    g.partition = Some(*plan);
                }
            }
            Record::DevicesFinished { sync, hash, after_launch } => {
                // The execution it follows, among the last few: a replay that ran ahead reports
                // both from the device's thread, where another run's may come between. A damaged
                // file's stray record is ignored.
                let mut recent = self.executions.iter_mut().rev().take(16);
                if let Some(e) = recent.find(|e| e.sync == sync && e.hash == hash) {
                    e.device_end_ns =
                        after_launch.iter().map(|&d| e.start_ns.saturating_add(d)).collect();
                }
            }
            Record::DeviceMemory { t, step, device, in_use, peak, limit } => {
                self.seen(t);
                self.device_memory.push(DeviceMemory {
                    step,
                    device,
                    at_ns: t,
                    in_use_bytes: in_use,
                    peak_bytes: peak,
                    limit_bytes: limit,
                });
            }
            Record::HostFallback { t, op, location, dur } => {
                self.seen(t);
                let step = self.current_step();
                self.host_fallbacks.push(HostFallback {
                    op: clip(&op).into_owned(),
                    location,
                    start_ns: t.saturating_sub(dur),
                    duration_ns: dur,
                    step,
                });
            }
            Record::Called { id, caller } => {
                // Both are written before: an id beyond them names nothing this file holds.
                let known = self.locations.len() as u64;
                if u64::from(id) >= known || u64::from(caller) >= known || id == caller {
                    self.dropped(Dropped::LocationId, 1);
                    return;
                }
                self.callers.insert(id, caller);
            }
            Record::DataWait { t, location, dur } => {
                self.seen(t);
                let step = self.current_step();
                self.data_waits.push(DataWait {
                    location,
                    start_ns: t.saturating_sub(dur),
                    duration_ns: dur,
                    step,
                });
            }
            Record::JobRank { rank, world } => self.job = Some(JobRank { rank, world }),
            Record::CollectiveEnter { t, group, seq, op, bytes, location } => {
                self.seen(t);
                let step = self.current_step();
                self.collectives.push(Collective {
                    group: clip(&group).into_owned(),
                    seq,
                    op: clip(&op).into_owned(),
                    bytes,
                    location,
                    start_ns: t,
                    end_ns: None,
                    step,
                });
            }
            Record::CollectiveLeave { t, group, seq } => {
                self.seen(t);
                // The latest entered with its group and number (collectives nest only through
                // a library calling another inside its own).
                if let Some(c) = self
                    .collectives
                    .iter_mut()
                    .rev()
                    .find(|c| c.seq == seq && c.group == group && c.end_ns.is_none())
                {
                    c.end_ns = Some(t.max(c.start_ns));
                }
            }
            Record::SizeRead { t, op, what, size, location, dur } => {
                self.seen(t);
                let step = self.current_step();
                self.size_reads.push(SizeRead {
                    op: clip(&op).into_owned(),
                    what: clip(&what).into_owned(),
                    size,
                    location,
                    start_ns: t.saturating_sub(dur),
                    duration_ns: dur,
                    step,
                });
            }
            Record::FunctionCompiled(c) => {
                self.seen(c.t);
                let step = self.current_step();
                for hash in &c.graphs {
                    if let Some(g) = self.graphs.get_mut(hash) {
                        g.function = g.function.or(Some(c.function));
                        g.compiles = g.compiles.saturating_add(1);
                        g.compile_ns = g.compile_ns.saturating_add(c.dur);
                    }
                }
                let c = *c;
                self.function_compiles.push(FunctionCompile {
                    id: clip_to(&c.id, 66).into_owned(),
                    function: c.function,
                    caller: c.caller,
                    start_ns: c.t.saturating_sub(c.dur),
                    duration_ns: c.dur,
                    phases: c
                        .phases
                        .into_iter()
                        .map(|(n, ns)| (clip_to(&n, 66).into_owned(), ns))
                        .collect(),
                    graphs: c.graphs,
                    reason: c.reason,
                    reason_location: c.reason_location,
                    failure: c.failure,
                    step,
                });
            }
            Record::GraphBreak { t, compile, reason, location } => {
                self.seen(t);
                let step = self.current_step();
                let compile = clip_to(&compile, 66).into_owned();
                self.graph_breaks.push(GraphBreak { compile, reason, location, at_ns: t, step });
            }
            Record::Caught { t, tool, message, location } => {
                self.seen(t);
                let step = self.current_step();
                let (tool, message) =
                    (clip_to(&tool, 40).into_owned(), clip(&message).into_owned());
                self.caught.push(Caught { tool, message, location, at_ns: t, step });
            }
            Record::Traced { t, location, calls, dur } => {
                self.seen(t);
                let line = self.traced.entry(location).or_default();
                line.calls = line.calls.saturating_add(calls);
                line.ns = line.ns.saturating_add(dur);
                self.traced_since_sync.push(location);
            }
            Record::CapturedRun { t, hash, dur } => {
                self.seen(t);
                let step = self.current_step();
                if let Some(g) = self.graphs.get_mut(&hash) {
                    g.executions = g.executions.saturating_add(1);
                    g.execute_ns = g.execute_ns.saturating_add(dur);
                }
                let start_ns = t.saturating_sub(dur);
                self.captured_runs.push(CapturedRun { hash, start_ns, duration_ns: dur, step });
            }
            Record::ValueRead { t, location, shape, bytes, dur } => {
                self.seen(t);
                let step = self.current_step();
                // A read of a pending value runs its sync first, at the same line.
                let forced_sync = self
                    .syncs
                    .last()
                    .filter(|s| s.cause == Cause::ValueRead && s.location == location)
                    .filter(|s| self.value_reads.last().and_then(|r| r.forced_sync) != Some(s.id))
                    .map(|s| s.id);
                let start_ns = t.saturating_sub(dur);
                self.value_reads.push(ValueRead {
                    location,
                    shape,
                    bytes,
                    start_ns,
                    duration_ns: dur,
                    step,
                    forced_sync,
                });
            }
        }
    }
}
