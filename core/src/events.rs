//! The engine's instrumentation: one [`Event`] enum emitted at every step of a sync, delivered to
//! whoever listens, plus cheap always-on [`counters`].
//!
//! With no listener the cost is one relaxed atomic load per step (`enabled()`); events and their
//! payloads are only built when someone listens.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use crate::ir::{NodeDef, OpKind};
use crate::location::SourceLocation;
use crate::runtime::{CostAnalysis, DeviceMemory, MemoryStats};
use crate::shape::Shape;

/// Why a sync happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncCause {
    /// `sync()` (torch_xla's mark_step).
    Explicit,
    /// A value was read on the host (`to_vec`, `item`, printing).
    ValueRead,
    /// The end of a training step (`step()`).
    StepEnd,
    /// A front end's compiled graph ran (torch.compile's, through `Replay`), computing its
    /// pending arguments first.
    CompiledGraph,
}

/// One input of a compiled graph, in parameter order.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphInput {
    pub shape: Shape,
    pub kind: InputKind,
    /// Where the tensor that feeds this input was created.
    pub location: SourceLocation,
    /// What the user calls that tensor, where known (`Tensor::set_name`: a parameter's name).
    pub name: Option<Arc<str>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// A device buffer (a tensor that is already data).
    Data,
    /// A host scalar, a 0-d input in its own dtype (its value never changes the graph).
    Scalar,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ToDevice,
    ToHost,
}

/// What a graph is made of, for the profiler: counts per op name, and per family.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphSummary {
    pub nodes: usize,
    pub ops: Vec<(&'static str, usize)>,
    pub kinds: Vec<(OpKind, usize)>,
    pub inputs: Vec<GraphInput>,
    pub outputs: Vec<Shape>,
    /// Inputs whose buffers were donated to outputs, as `(input, output)`.
    pub donated: Vec<(usize, usize)>,
    /// Every node as data, inputs first (operands are positions in this list): what the
    /// profiler diffs to explain a recompile and the viewers draw.
    pub node_defs: Vec<NodeDef>,
}

/// How a partitioned graph runs over a mesh.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PartitionPlan {
    /// The mesh's axes and sizes, `[("data", 4)]`.
    pub mesh_axes: Vec<(String, usize)>,
    /// The devices (indices) of partitions 0, 1, ...
    pub devices: Vec<usize>,
    /// Per graph input (device data, then host scalars): its sharding, None when whole.
    pub inputs: Vec<Option<String>>,
    /// Per output: its sharding, None when whole.
    pub outputs: Vec<Option<String>>,
    /// The collectives XLA inserted, from its optimized, partitioned program.
    pub collectives: Vec<Collective>,
}

/// One collective op of a partitioned program, as XLA compiled it.
#[derive(Debug, Clone, PartialEq)]
pub struct Collective {
    /// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all` or `collective-permute`.
    pub kind: String,
    /// Its result on one device (a tuple when XLA combined several).
    pub shapes: Vec<Shape>,
    /// Bytes of its result on each device.
    pub bytes: u64,
    /// Which devices exchange data, as XLA writes it (`{{0,1,2,3}}`).
    pub groups: String,
    /// The user's line of the op XLA inserted it for, when XLA kept it.
    pub location: Option<SourceLocation>,
}

/// Every step of a sync. Durations are in nanoseconds.
#[derive(Debug, Clone)]
pub enum Event {
    SyncBegin {
        sync_id: u64,
        cause: SyncCause,
        location: SourceLocation,
        tensors: usize,
        /// Live tensors still pending outside this sync (a value read's: what it leaves for
        /// another graph to compute; a full sync leaves none).
        left_pending: usize,
    },
    GraphBuilt {
        sync_id: u64,
        hash: u64,
        summary: Arc<GraphSummary>,
        duration_ns: u64,
    },
    CacheLookup {
        sync_id: u64,
        hash: u64,
        hit: bool,
        persistent_hit: bool,
    },
    Lowered {
        sync_id: u64,
        hash: u64,
        stablehlo: Arc<str>,
        duration_ns: u64,
    },
    Compiled {
        sync_id: u64,
        hash: u64,
        duration_ns: u64,
        memory: Option<MemoryStats>,
        cost: Option<CostAnalysis>,
        /// XLA's optimized HLO text, when the engine was asked to keep it.
        optimized_hlo: Option<Arc<str>>,
    },
    Transfer {
        sync_id: u64,
        direction: Direction,
        bytes: u64,
        duration_ns: u64,
    },
    Executed {
        sync_id: u64,
        hash: u64,
        duration_ns: u64,
    },
    SyncEnd {
        sync_id: u64,
        duration_ns: u64,
    },
    /// A training step ended: `step()` was called (after its sync). Steps count from 1.
    StepMarker {
        step: u64,
        location: SourceLocation,
    },
    /// A device's memory at the end of a step, as its allocator counts it (where the plugin
    /// keeps such figures: GPUs, not the CPU).
    DeviceMemory {
        step: u64,
        device: usize,
        memory: DeviceMemory,
    },
    /// A named region of the user's program began ([`scope`]).
    ScopeBegin {
        name: Arc<str>,
        location: SourceLocation,
    },
    /// The innermost open region named `name` ended.
    ScopeEnd {
        name: Arc<str>,
    },
    /// A device-to-host read of a tensor's value (the stall a hidden sync costs).
    ValueRead {
        location: SourceLocation,
        shape: Shape,
        bytes: u64,
        duration_ns: u64,
    },
    /// A graph partitioned over a mesh was compiled: how XLA runs it on the devices.
    Partitioned {
        sync_id: u64,
        hash: u64,
        plan: Arc<PartitionPlan>,
    },
    /// A partitioned execution ended: when each device finished, after its launch (partition
    /// order). The spread is how long devices waited on one another.
    DevicesFinished {
        sync_id: u64,
        hash: u64,
        after_launch_ns: Vec<u64>,
    },
    /// An op the engine has no lowering for ran on the host instead (the torch bridge's CPU
    /// fallback, e.g. `aten::erfinv`): its operands were read to the host and its results uploaded.
    HostFallback {
        op: Arc<str>,
        location: SourceLocation,
        duration_ns: u64,
    },
    /// The program waited for its input pipeline: the next batch was not ready (the torch
    /// bridge's `DeviceLoader`); `location` is the loop that asked for it.
    DataWait {
        location: SourceLocation,
        duration_ns: u64,
    },
    /// A front end read the size of an op's result from the device, because the data decides
    /// it (the torch bridge's `x[mask]`, `nonzero`, `unique`, `bincount`, as on CUDA): a sync,
    /// and a graph for each size. `what` says whose count the size is; `duration_ns` is the
    /// read, the sync it forced included.
    SizeRead {
        op: Arc<str>,
        what: Arc<str>,
        size: u64,
        location: SourceLocation,
        duration_ns: u64,
    },
    /// This process is rank `rank` of a job of `world` processes (torchrun's `RANK` and
    /// `WORLD_SIZE`): its profile is one of the job's.
    JobRank {
        rank: u32,
        world: u32,
    },
    /// The process entered a collective with the job's other processes (torch.distributed's
    /// `all_reduce`, a DDP bucket's): the `seq`th of its process group `group`, `op` over `bytes`
    /// at `location`. Reported on entry, so a collective the others never join shows as entered
    /// and never left.
    CollectiveEnter {
        group: Arc<str>,
        seq: u64,
        op: Arc<str>,
        bytes: u64,
        location: SourceLocation,
    },
    /// The process left collective `seq` of `group` (its result was ready).
    CollectiveLeave {
        group: Arc<str>,
        seq: u64,
    },
    /// A graph a front end's own compiler captured (torch.compile: a graph Dynamo traced), as
    /// the front end describes it; runs and compiles refer to it by `hash`.
    CapturedGraph {
        hash: u64,
        graph: Arc<CapturedGraph>,
    },
    /// A front end's compiler compiled a function (torch.compile: Dynamo, then its backend).
    FunctionCompiled(Arc<FunctionCompile>),
    /// The front end's compiler could not capture a function whole: it split it at `location`
    /// and ran what it could not capture without compiling (torch.compile's graph break).
    GraphBreak {
        /// The compile it happened in (torch.compile's id, `0/1`).
        compile: Arc<str>,
        reason: Arc<str>,
        location: SourceLocation,
    },
    /// A run of a captured graph, compiled by the front end's compiler (ends at the event).
    CapturedRun {
        hash: u64,
        duration_ns: u64,
    },
    /// The front end spent `duration_ns` recording `calls` ops at `location` since the last
    /// such event for it (summed per location over every thread, written before each sync).
    Traced {
        location: SourceLocation,
        calls: u64,
        duration_ns: u64,
    },
    /// A debugging tool caught something at `location` (the line behind it: the op that made
    /// the first NaN, the read inside `forbid_sync()`); `message` is what the user's error says.
    Caught {
        tool: Tool,
        message: Arc<str>,
        location: SourceLocation,
    },
}

/// The debugging tools whose catches the profile keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    /// `detect_anomaly()`: the first NaN or Inf.
    Anomaly,
    /// `forbid_sync()`: a graph run or value read inside it.
    ForbiddenSync,
    /// `break_on()`: the program stopped on a recompile, sync or fallback.
    Break,
    /// `compare_with_eager()`: the first op beyond tolerance of torch's eager.
    Divergence,
    /// `XLAPROF_CHECK`: an index out of range.
    IndexCheck,
    /// `XLAPROF_CHECK`: an argument's values outside what its op takes (a CTC loss's lengths
    /// past its input).
    RangeCheck,
}

impl Tool {
    pub const ALL: [Tool; 6] = [
        Tool::Anomaly,
        Tool::ForbiddenSync,
        Tool::Break,
        Tool::Divergence,
        Tool::IndexCheck,
        Tool::RangeCheck,
    ];

    /// The tool's name, as profiles store it and the front ends pass it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Anomaly => "detect_anomaly",
            Tool::ForbiddenSync => "forbid_sync",
            Tool::Break => "break_on",
            Tool::Divergence => "compare_with_eager",
            Tool::IndexCheck => "check",
            Tool::RangeCheck => "range_check",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// A graph captured by a front end's compiler: its nodes in order, inputs first, each with the
/// front end's op name, its result's dtype and dimensions, and the user's line that made it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CapturedGraph {
    pub nodes: Vec<CapturedNode>,
    /// How many of the first nodes are the graph's inputs.
    pub inputs: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CapturedNode {
    pub op: Arc<str>,
    /// Positions of its operands among the earlier nodes.
    pub operands: Vec<u32>,
    pub dtype: Arc<str>,
    pub dims: Vec<i64>,
    pub location: SourceLocation,
}

/// One compile of a function by a front end's compiler (ends at the event).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionCompile {
    /// The compiler's name for this compile (torch.compile's `0/1`: the second of frame 0).
    pub id: Arc<str>,
    /// The compiled function's first line.
    pub function: SourceLocation,
    /// The user's line that called it.
    pub caller: Option<SourceLocation>,
    pub duration_ns: u64,
    /// Where the time went, in order (`Dynamo`, `AOTAutograd`, `backend`).
    pub phases: Vec<(Arc<str>, u64)>,
    /// The graphs it produced (hashes of [`Event::CapturedGraph`]s).
    pub graphs: Vec<u64>,
    /// Why it compiled again: the check on the earlier compile's inputs that failed
    /// (torch.compile's guard failure); None for a function's first compile.
    pub reason: Option<Arc<str>>,
    /// The user's line behind the failed check, where it is known (what set the value).
    pub reason_location: Option<SourceLocation>,
    /// The compiler gave up on the function (its recompile limit): it now runs uncompiled.
    pub failure: Option<Arc<str>>,
}

/// Receives every event while registered. Called on the thread that runs the sync.
pub trait Listener: Send + Sync {
    fn on_event(&self, at_ns: u64, event: &Event);
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static LISTENERS: RwLock<Vec<(u64, Arc<dyn Listener>)>> = RwLock::new(Vec::new());
static NEXT_LISTENER: AtomicU64 = AtomicU64::new(1);

/// Registers a listener; keep the id to remove it.
pub fn add_listener(listener: Arc<dyn Listener>) -> u64 {
    let id = NEXT_LISTENER.fetch_add(1, Ordering::Relaxed);
    let mut listeners = LISTENERS.write().unwrap_or_else(|p| p.into_inner());
    listeners.push((id, listener));
    ACTIVE.store(true, Ordering::Release);
    id
}

pub fn remove_listener(id: u64) {
    let mut listeners = LISTENERS.write().unwrap_or_else(|p| p.into_inner());
    listeners.retain(|(i, _)| *i != id);
    ACTIVE.store(!listeners.is_empty(), Ordering::Release);
}

/// True when someone listens: the one check on the hot path.
#[inline]
pub fn enabled() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

pub(crate) fn emit(event: Event) {
    let at = now_ns();
    let listeners = LISTENERS.read().unwrap_or_else(|p| p.into_inner());
    for (_, l) in listeners.iter() {
        l.on_event(at, &event);
    }
}

/// Marks a named region of the program for the profiler (torch_xla's `Trace`): the region lasts
/// until the returned guard is dropped. Costs one atomic load when nobody listens.
#[track_caller]
pub fn scope(name: &str) -> Scope {
    let location = SourceLocation::caller();
    if !enabled() {
        return Scope(None);
    }
    let name: Arc<str> = name.into();
    emit(Event::ScopeBegin { name: name.clone(), location });
    Scope(Some(name))
}

/// Reports an op that ran on the host because the engine does not lower it (`duration_ns`: its
/// whole cost, the reads of its operands and the upload of its results included).
pub fn host_fallback(op: &str, location: SourceLocation, duration_ns: u64) {
    if enabled() {
        emit(Event::HostFallback { op: op.into(), location, duration_ns });
    }
}

type TracedLines = std::collections::HashMap<
    usize,
    (SourceLocation, u64, u64),
    std::hash::BuildHasherDefault<crate::ir::FastHasher>,
>;

/// Recording time per location since the last sync, keyed by the location's address (a front
/// end interns its locations; the entry holds its location, so the key stays its own): address
/// -> (location, calls, ns). One table for every thread: autograd records a backward on a
/// thread of its own, which never syncs.
static TRACED: Mutex<Option<TracedLines>> = Mutex::new(None);

/// Adds `duration_ns` of recording one op at `location` (a front end's, timed around its call
/// into the engine), reported per line at the next sync. Nothing when nobody listens.
pub fn traced(location: &SourceLocation, duration_ns: u64) {
    if !enabled() {
        return;
    }
    let key = match location {
        SourceLocation::Rust(l) => *l as *const std::panic::Location<'static> as usize,
        SourceLocation::External(e) => Arc::as_ptr(e) as usize,
    };
    let mut traced = TRACED.lock().unwrap_or_else(|p| p.into_inner());
    let entry = traced
        .get_or_insert_with(TracedLines::default)
        .entry(key)
        .or_insert_with(|| (location.clone(), 0, 0));
    entry.1 += 1;
    entry.2 = entry.2.saturating_add(duration_ns);
}

/// Reports the recording time summed since the last sync (before a sync begins, and when a
/// recording stops).
pub fn flush_traced() {
    let lines = TRACED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if enabled() {
        for (_, (location, calls, duration_ns)) in lines.into_iter().flatten() {
            emit(Event::Traced { location, calls, duration_ns });
        }
    }
}

/// Reports what a debugging tool caught at `location` (see [`Event::Caught`]).
pub fn caught(tool: Tool, message: &str, location: SourceLocation) {
    if enabled() {
        emit(Event::Caught { tool, message: message.into(), location });
    }
}

/// Reports a size read from the device (see [`Event::SizeRead`]).
pub fn size_read(op: &str, what: &str, size: u64, location: SourceLocation, duration_ns: u64) {
    if enabled() {
        emit(Event::SizeRead { op: op.into(), what: what.into(), size, location, duration_ns });
    }
}

/// Reports a wait for the next batch of the input pipeline (`duration_ns`: how long the loop
/// was blocked on it).
pub fn data_wait(location: SourceLocation, duration_ns: u64) {
    if enabled() {
        emit(Event::DataWait { location, duration_ns });
    }
}

/// Reports that this process is one rank of a job (see [`Event::JobRank`]).
pub fn job_rank(rank: u32, world: u32) {
    if enabled() {
        emit(Event::JobRank { rank, world });
    }
}

/// Reports entering a collective across processes (see [`Event::CollectiveEnter`]).
pub fn collective_enter(group: &str, seq: u64, op: &str, bytes: u64, location: SourceLocation) {
    if enabled() {
        emit(Event::CollectiveEnter { group: group.into(), seq, op: op.into(), bytes, location });
    }
}

/// Reports leaving a collective across processes (see [`Event::CollectiveLeave`]).
pub fn collective_leave(group: &str, seq: u64) {
    if enabled() {
        emit(Event::CollectiveLeave { group: group.into(), seq });
    }
}

/// Reports a graph a front end's compiler captured (see [`Event::CapturedGraph`]).
pub fn captured_graph(hash: u64, graph: CapturedGraph) {
    if enabled() {
        emit(Event::CapturedGraph { hash, graph: Arc::new(graph) });
    }
}

/// Reports a compile by a front end's compiler (see [`Event::FunctionCompiled`]).
pub fn function_compiled(compile: FunctionCompile) {
    if enabled() {
        emit(Event::FunctionCompiled(Arc::new(compile)));
    }
}

/// Reports a graph break (see [`Event::GraphBreak`]).
pub fn graph_break(compile: &str, reason: &str, location: SourceLocation) {
    if enabled() {
        emit(Event::GraphBreak { compile: compile.into(), reason: reason.into(), location });
    }
}

/// Reports a run of a captured graph that took `duration_ns`.
pub fn captured_run(hash: u64, duration_ns: u64) {
    CAPTURED_RUNS.fetch_add(1, Ordering::Relaxed);
    if enabled() {
        emit(Event::CapturedRun { hash, duration_ns });
    }
}

static CAPTURED_RUNS: AtomicU64 = AtomicU64::new(0);

/// Runs of captured graphs reported so far (a step in which none ran and nothing synced is
/// empty).
pub fn captured_runs() -> u64 {
    CAPTURED_RUNS.load(Ordering::Relaxed)
}

/// Closes its region when dropped.
#[must_use = "the scope ends when this guard is dropped"]
pub struct Scope(Option<Arc<str>>);

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(name) = self.0.take() {
            if enabled() {
                emit(Event::ScopeEnd { name });
            }
        }
    }
}

/// Monotonic nanoseconds since the engine's clock started (first use in the process).
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// A snapshot of the engine's counters (totals since the process started).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Counters { $(#[doc = $doc] pub $name: u64,)* }

        #[allow(non_upper_case_globals)]
        pub(crate) mod counter {
            use std::sync::atomic::AtomicU64;
            $(pub static $name: AtomicU64 = AtomicU64::new(0);)*
        }

        impl Counters {
            /// Every counter with its name, in declaration order (for front ends that list them).
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }

        /// Reads every counter.
        pub fn counters() -> Counters {
            Counters { $($name: counter::$name.load(Ordering::Relaxed),)* }
        }
    };
}

counters! {
    tensors_created: "tensors created",
    tensors_destroyed: "tensors dropped",
    ops_traced: "IR nodes recorded",
    syncs: "syncs run (graphs executed)",
    cache_hits: "syncs whose graph was already compiled (in memory)",
    cache_misses: "syncs that had to compile",
    persistent_cache_hits: "compiles avoided by the on-disk cache",
    persistent_cache_misses: "on-disk cache lookups that found nothing usable",
    compiles: "XLA compiles",
    executions: "program executions",
    bytes_to_device: "bytes copied host to device",
    bytes_from_device: "bytes copied device to host",
    value_reads: "device-to-host reads of tensor values",
    buffers_donated: "input buffers programs took for their outputs (donated)",
}

#[inline]
pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Ordering::Relaxed);
}
