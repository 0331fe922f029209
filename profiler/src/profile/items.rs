//! What a profile holds, item by item: syncs, graphs, compiles, executions, transfers, reads,
//! fallbacks, waits, a front end's compiles and runs, what the debugging tools caught, steps and
//! scopes.

use serde::Serialize;

use crate::record::{Cause, CostRec, GraphDef, MemoryRec, PartitionRec, ShapeRec};

/// One sync: a graph built, found or compiled, and executed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sync {
    pub id: u64,
    pub cause: Cause,
    pub location: u32,
    pub tensors: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub hash: Option<u64>,
    /// Found compiled in memory.
    pub cache_hit: bool,
    /// Loaded from the persistent cache instead of compiling.
    pub persistent_hit: bool,
    pub build_ns: u64,
    pub lower_ns: u64,
    pub compile_ns: u64,
    pub transfer_ns: u64,
    pub execute_ns: u64,
    /// The step this sync belongs to (1-based; steps end at `step()`).
    pub step: u64,
    /// A value read's: how many live tensors it left pending for a later graph (unknown in
    /// profiles written before it was recorded).
    pub left_pending: Option<u32>,
    /// The lines that recorded ops since the sync before this one (what a value read before
    /// this sync could have left for it, and what was recorded after).
    #[serde(skip)]
    pub traced_before: Vec<u32>,
}

impl Sync {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
    /// The time of its five phases (build, lower, compile, transfer, execute) together: what
    /// `duration_ns` holds beyond it is in no phase.
    pub fn phases_ns(&self) -> u64 {
        [self.build_ns, self.lower_ns, self.compile_ns, self.transfer_ns, self.execute_ns]
            .into_iter()
            .fold(0, u64::saturating_add)
    }
    pub fn compiled(&self) -> bool {
        self.compile_ns > 0
    }
}

/// A distinct graph and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Graph {
    pub def: GraphDef,
    pub stablehlo: Option<String>,
    /// XLA's optimized HLO, when recorded with `XLAPROF_OPTIMIZED_HLO=1`.
    pub optimized_hlo: Option<String>,
    pub memory: Option<MemoryRec>,
    pub cost: Option<CostRec>,
    /// How it runs over a mesh, when it is partitioned (memory and cost are then per device).
    pub partition: Option<PartitionRec>,
    pub compiles: u32,
    pub compile_ns: u64,
    pub executions: u32,
    pub execute_ns: u64,
    /// The first sync that built it.
    pub first_sync: u64,
    /// For a graph a front end's compiler captured, the compiled function's line (it belongs
    /// to no sync).
    pub function: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compile {
    pub sync: u64,
    pub hash: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execution {
    pub sync: u64,
    pub hash: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// When each device finished (partitioned executions: one per partition, in partition
    /// order; empty on one device).
    pub device_end_ns: Vec<u64>,
}

impl Execution {
    /// For an execution on several devices: when its first and its last device finished, and
    /// the partition that finished last (the latest of those that tie).
    pub fn device_spread(&self) -> Option<(u64, u64, usize)> {
        if self.device_end_ns.len() < 2 {
            return None;
        }
        let first = self.device_end_ns.iter().copied().min()?;
        let (last_at, &last) = self.device_end_ns.iter().enumerate().max_by_key(|(_, &t)| t)?;
        Some((first, last, last_at))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transfer {
    pub sync: u64,
    pub to_device: bool,
    pub bytes: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
}

/// A device-to-host read of a value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueRead {
    pub location: u32,
    pub shape: ShapeRec,
    pub bytes: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub step: u64,
    /// The sync this read forced (the value was still pending), if any.
    pub forced_sync: Option<u64>,
}

/// An op run on the host for want of a lowering.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostFallback {
    pub op: String,
    pub location: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub step: u64,
}

/// A size read from the device: an op whose result's size the data decides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeRead {
    pub op: String,
    /// Whose count the size is ("true entries of its boolean mask").
    pub what: String,
    pub size: u64,
    pub location: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub step: u64,
}

/// The job this process is one rank of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JobRank {
    pub rank: u32,
    pub world: u32,
}

/// A collective this process took part in with the job's other processes (torch.distributed's),
/// matched across ranks by its process group and sequence number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collective {
    pub group: String,
    pub seq: u64,
    pub op: String,
    pub bytes: u64,
    pub location: u32,
    /// When the process entered it, and left it (None: still inside, or the profile ended
    /// there: stuck).
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    pub step: u64,
}

/// A wait for the next batch of the input pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataWait {
    /// The loop that asked for the batch.
    pub location: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub step: u64,
}

/// One compile of a function by a front end's compiler (torch.compile: Dynamo, then its
/// backend), with the graphs it captured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCompile {
    /// The compiler's name for it (torch.compile's `0/1`: frame 0's second compile).
    pub id: String,
    /// The compiled function's first line, and the user's line that called it.
    pub function: u32,
    pub caller: Option<u32>,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Where the time went, in order (`Dynamo`, `AOTAutograd`, `backend`).
    pub phases: Vec<(String, u64)>,
    pub graphs: Vec<u64>,
    /// The failed check that made it compile again (a guard failure); None for a first compile.
    pub reason: Option<String>,
    pub reason_location: Option<u32>,
    /// Why the compiler gave up on the function (its recompile limit): it runs uncompiled.
    pub failure: Option<String>,
    pub step: u64,
}

impl FunctionCompile {
    /// The compiler's frame number: `0` of `0/1`.
    pub fn frame(&self) -> &str {
        self.id.split('/').next().unwrap_or(&self.id)
    }
}

/// A function torch.compile could not capture whole: split at `location`, the rest run
/// uncompiled until the next captured part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphBreak {
    pub compile: String,
    pub reason: String,
    pub location: u32,
    pub at_ns: u64,
    pub step: u64,
}

/// What a debugging tool caught (`detect_anomaly`, `forbid_sync`, `break_on`,
/// `compare_with_eager`, `check`), at the line behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Caught {
    pub tool: String,
    pub message: String,
    pub location: u32,
    pub at_ns: u64,
    pub step: u64,
}

/// What recording ops at one line cost the front end, over the whole profile.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Tracing {
    pub calls: u64,
    pub ns: u64,
}

/// A run of a graph captured and compiled by a front end's compiler.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapturedRun {
    pub hash: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub step: u64,
}

/// A device's memory at the end of a step, in bytes, as its allocator counts it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceMemory {
    pub step: u64,
    pub device: u32,
    pub at_ns: u64,
    pub in_use_bytes: i64,
    /// The most held at once since the process started, where the allocator tracks it.
    pub peak_bytes: Option<i64>,
    /// What the allocator may hand out, where it has a limit.
    pub limit_bytes: Option<i64>,
}

/// A training step: from the end of the previous step (or the profile's start) to `step()`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub index: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub location: u32,
}

impl Step {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// A named region of the user's program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scope {
    pub name: String,
    pub location: u32,
    pub start_ns: u64,
    /// `None` while still open (or when the program stopped inside it).
    pub end_ns: Option<u64>,
    pub depth: u32,
}
