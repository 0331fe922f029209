//! The records of a profile file: the engine's events, made compact and self-contained.
//!
//! Locations and graph definitions are written once and referred to by id afterwards, so a sync
//! that hits the cache costs a few dozen bytes. Every record is plain data (no engine types), so a
//! profile can be read anywhere, by a program that never ran the engine; the conversions from
//! the engine's values are in `from_engine`.

use std::borrow::Cow;
use std::fmt::Debug;

pub mod file;
mod from_engine;

use serde::{Deserialize, Serialize};

/// At most this many items of a list are spelled out in a line of text (a node's operands, an
/// attribute's values, a shape's dimensions): real graphs stay well below it, and a crafted
/// profile cannot make one line, copied into every finding that quotes it, arbitrarily long.
pub const LISTED: usize = 16;

/// At most this many characters of one name (a file, an op, a dtype ...) go into a sentence.
pub const CLIPPED_CHARS: usize = 256;

/// `s` cut to [`CLIPPED_CHARS`] characters for a sentence: its start and, as paths and
/// `file:line` end in what matters most, its end, with `…` where the middle was cut.
pub fn clip(s: &str) -> Cow<'_, str> {
    clip_to(s, CLIPPED_CHARS)
}

/// [`clip`] to `max` characters (at least 66).
pub fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    let max = max.max(66);
    let head = 64;
    let tail = max - head - 1;
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let start = s.char_indices().nth(head).map_or(s.len(), |(i, _)| i);
            let end = s.char_indices().rev().nth(tail - 1).map_or(0, |(i, _)| i);
            Cow::Owned(format!("{}…{}", &s[..start], &s[end.max(start)..]))
        }
    }
}

/// Writes at most [`LISTED`] items separated by `sep`, then how many more there are.
fn write_list<T>(
    f: &mut std::fmt::Formatter<'_>,
    items: &[T],
    sep: &str,
    item: impl Fn(&mut std::fmt::Formatter<'_>, &T) -> std::fmt::Result,
) -> std::fmt::Result {
    for (i, x) in items.iter().take(LISTED).enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        item(f, x)?;
    }
    if items.len() > LISTED {
        write!(f, "{sep}… {} more", items.len() - LISTED)?;
    }
    Ok(())
}

/// Why a sync happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Cause {
    Explicit,
    ValueRead,
    StepEnd,
    /// A compiled graph ran (torch.compile with backend="xlaprof").
    CompiledGraph,
}

impl Cause {
    pub fn describe(self) -> &'static str {
        match self {
            Cause::Explicit => "explicit sync()",
            Cause::ValueRead => "a value read on the host",
            Cause::StepEnd => "end of step",
            Cause::CompiledGraph => "a compiled graph ran",
        }
    }
}

/// A line of the user's program.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// `file:line in function`, each name cut to [`CLIPPED_CHARS`]: a location is quoted wherever
/// its id is (every span, every finding), so a crafted name of a megabyte must not be.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", clip(&self.file), self.line)?;
        if !self.function.is_empty() {
            write!(f, " in {}", clip(&self.function))?;
        }
        Ok(())
    }
}

/// `dtype[dims]`, as users read shapes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ShapeRec {
    pub dtype: String,
    pub dims: Vec<i64>,
}

impl ShapeRec {
    /// Its size in bytes (0 for a dtype this profiler does not know), saturating.
    pub fn bytes(&self) -> u64 {
        let size: u64 = match self.dtype.as_str() {
            "pred" | "bool" | "s8" | "u8" | "i8" | "int8" | "uint8" => 1,
            "f16" | "bf16" | "float16" | "bfloat16" => 2,
            "f32" | "s32" | "i32" | "float32" | "int32" => 4,
            "f64" | "s64" | "i64" | "float64" | "int64" => 8,
            _ => 0,
        };
        self.dims.iter().fold(size, |n, &d| n.saturating_mul(d.max(0) as u64))
    }
}

impl std::fmt::Display for ShapeRec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[", clip(&self.dtype))?;
        write_list(f, &self.dims, ",", |f, d| write!(f, "{d}"))?;
        f.write_str("]")
    }
}

/// One input of a graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRec {
    pub shape: ShapeRec,
    /// A device buffer (`false`: a host scalar, a 0-d input in its own dtype).
    pub data: bool,
    pub location: u32,
    pub donated: bool,
    /// What the user calls the tensor: a name the front end gave it (a parameter's), or the
    /// variable its line assigns. Not part of the `Graph` record: `InputNames` carries it.
    #[serde(skip)]
    pub name: Option<InputName>,
}

/// A graph input's name, as findings say it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InputName {
    /// Given by the front end (`model.lm_head.weight`): says which tensor on its own.
    Given(String),
    /// The variable assigned at the line that made the tensor (`x`): said with that line.
    Variable(String),
}

/// A distinct graph, written the first time its hash is seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphDef {
    pub hash: u64,
    pub nodes: u32,
    /// Count per op name.
    pub ops: Vec<(String, u32)>,
    pub inputs: Vec<InputRec>,
    pub outputs: Vec<ShapeRec>,
    /// Every node, inputs first: what recompiles are explained by and the viewers draw.
    pub node_defs: Vec<NodeRec>,
}

/// The value of one attribute of an op (axes, a permutation, slice bounds, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttrValue {
    Int(i64),
    Ints(Vec<i64>),
    /// `(low, high)` per dimension: padding.
    Pairs(Vec<(i64, i64)>),
    Name(String),
}

impl std::fmt::Display for AttrValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Ints(v) => bracketed(f, v),
            AttrValue::Pairs(v) => bracketed(f, v),
            AttrValue::Name(n) => f.write_str(&clip(n)),
        }
    }
}

/// `[a, b, c]`, as `{:?}` writes a list, with at most [`LISTED`] items.
fn bracketed<T: Debug>(f: &mut std::fmt::Formatter<'_>, items: &[T]) -> std::fmt::Result {
    f.write_str("[")?;
    write_list(f, items, ", ", |f, x| write!(f, "{x:?}"))?;
    f.write_str("]")
}

/// One node of a graph: its op with its attributes, its operands (positions in the graph's node
/// list), its shape, where it was recorded and its structural hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRec {
    pub op: String,
    pub attrs: Vec<(String, AttrValue)>,
    pub inputs: Vec<u32>,
    pub shape: ShapeRec,
    pub location: u32,
    pub hash: u64,
}

impl NodeRec {
    /// The node as one line, `%3 = transpose(%1) {perm=[1, 0]} : f32[8,4]`, `at` its position.
    /// Long lists are cut (see [`LISTED`]), so the line stays short whatever the node holds.
    pub fn text(&self, at: usize) -> String {
        struct Line<'a>(&'a NodeRec, usize);
        impl std::fmt::Display for Line<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let Line(n, at) = self;
                write!(f, "%{at} = {}(", clip(&n.op))?;
                write_list(f, &n.inputs, ", ", |f, i| write!(f, "%{i}"))?;
                f.write_str(")")?;
                if !n.attrs.is_empty() {
                    f.write_str(" {")?;
                    write_list(f, &n.attrs, ", ", |f, (k, v)| write!(f, "{}={v}", clip(k)))?;
                    f.write_str("}")?;
                }
                write!(f, " : {}", n.shape)
            }
        }
        Line(self, at).to_string()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryRec {
    pub generated_code_bytes: i64,
    pub argument_bytes: i64,
    pub output_bytes: i64,
    pub alias_bytes: i64,
    pub temp_bytes: i64,
    pub peak_memory_bytes: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CostRec {
    pub flops: f64,
    pub bytes_accessed: f64,
    pub transcendentals: f64,
}

/// What the profile is of.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Meta {
    pub program: String,
    pub pid: u32,
    /// Wall-clock time of the profile's time zero, in milliseconds since the Unix epoch.
    pub start_unix_ms: u64,
    pub platform: String,
    pub plugin: String,
    /// The names of the engine's counters, in the order every record lists their values: the
    /// engine's own names and order (`Counters::named`), so a counter added to the engine reaches
    /// profiles without a change here, and without a new format version.
    pub counter_names: Vec<String>,
    /// The engine's counters when recording started (totals since the program began), in the
    /// order of `counter_names`.
    pub counters: Vec<u64>,
}

/// One record of a profile file. Times (`t`) are nanoseconds since the profile's time zero;
/// `t` of a record with a duration is when it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    Meta(Meta),
    Location {
        id: u32,
        location: Location,
    },
    Graph(Box<GraphDef>),
    /// The StableHLO text of a graph (written once, when it is lowered).
    StableHlo {
        hash: u64,
        text: String,
    },
    SyncBegin {
        t: u64,
        sync: u64,
        cause: Cause,
        location: u32,
        tensors: u32,
    },
    GraphBuilt {
        t: u64,
        sync: u64,
        hash: u64,
        dur: u64,
    },
    CacheLookup {
        t: u64,
        sync: u64,
        hash: u64,
        hit: bool,
        persistent: bool,
    },
    Lowered {
        t: u64,
        sync: u64,
        hash: u64,
        dur: u64,
    },
    Compiled {
        t: u64,
        sync: u64,
        hash: u64,
        dur: u64,
        memory: Option<MemoryRec>,
        cost: Option<CostRec>,
    },
    Transfer {
        t: u64,
        sync: u64,
        to_device: bool,
        bytes: u64,
        dur: u64,
    },
    Executed {
        t: u64,
        sync: u64,
        hash: u64,
        dur: u64,
    },
    SyncEnd {
        t: u64,
        sync: u64,
        dur: u64,
        /// The engine's counters, in the order of `Meta::counter_names`.
        counters: Vec<u64>,
    },
    Step {
        t: u64,
        step: u64,
        location: u32,
    },
    ScopeBegin {
        t: u64,
        name: String,
        location: u32,
    },
    ScopeEnd {
        t: u64,
        name: String,
    },
    ValueRead {
        t: u64,
        location: u32,
        shape: ShapeRec,
        bytes: u64,
        dur: u64,
    },
    /// XLA's optimized HLO text of a graph (only when the program ran with
    /// `XLAPROF_OPTIMIZED_HLO=1`). Added after the other variants, so version-1 files written
    /// before it existed still decode: new variants only ever go at the end.
    OptimizedHlo {
        hash: u64,
        text: String,
    },
    /// An op run on the host for want of a lowering (the torch bridge's CPU fallback). Ends at
    /// `t`; added at the end, as every new variant is.
    HostFallback {
        t: u64,
        op: String,
        location: u32,
        dur: u64,
    },
    /// How a graph runs partitioned over a mesh (written once, when it is compiled).
    Partitioned(Box<PartitionRec>),
    /// The platform and plugin, when the engine started after recording did (`Meta` has them
    /// empty then: recording does not start the engine, whose device count a mesh may decide).
    Platform {
        platform: String,
        plugin: String,
    },
    /// When each device of a partitioned execution finished, in ns after its launch (partition
    /// order); the record follows the execution's `Executed`.
    DevicesFinished {
        sync: u64,
        hash: u64,
        after_launch: Vec<u64>,
    },
    /// A device's memory at the end of a step, as its allocator counts it (GPUs; the CPU plugin
    /// keeps no such figures). `peak` and `limit` where the allocator has them.
    DeviceMemory {
        t: u64,
        step: u64,
        device: u32,
        in_use: i64,
        peak: Option<i64>,
        limit: Option<i64>,
    },
    /// The program waited `dur` for the next batch of its input pipeline, at `location` (the
    /// loop asking for it). Ends at `t`.
    DataWait {
        t: u64,
        location: u32,
        dur: u64,
    },
    /// Location `id` is a library's line, reached from the user's line `caller` (written after
    /// both locations): where a sync or fallback caused inside a library is reported.
    Called {
        id: u32,
        caller: u32,
    },
    /// A function compiled by a front end's own compiler (torch.compile). Ends at `t`.
    FunctionCompiled(Box<FunctionCompileRec>),
    /// torch.compile split a function at `location` (a graph break) in compile `compile`.
    GraphBreak {
        t: u64,
        compile: String,
        reason: String,
        location: u32,
    },
    /// A run of graph `hash`, captured and compiled by a front end's compiler. Ends at `t`.
    CapturedRun {
        t: u64,
        hash: u64,
        dur: u64,
    },
    /// The names of graph `hash`'s inputs that have one, by input position (written after its
    /// `Graph`, which older files describe without names).
    InputNames {
        hash: u64,
        names: Vec<(u32, InputName)>,
    },
    /// A debugging tool (`tool`: `detect_anomaly`, `forbid_sync`, `break_on`,
    /// `compare_with_eager`, `check`) caught something at `location`, the line behind it;
    /// `message` is what the user's error said.
    Caught {
        t: u64,
        tool: String,
        message: String,
        location: u32,
    },
    /// The front end spent `dur` recording `calls` ops at `location` since its previous
    /// `Traced` (written before each sync).
    Traced {
        t: u64,
        location: u32,
        calls: u64,
        dur: u64,
    },
    /// The front end read the size of `op`'s result from the device, `size`, because the data
    /// decides it (`what`: whose count it is); the read took `dur` and ends at `t`.
    SizeRead {
        t: u64,
        op: String,
        what: String,
        size: u64,
        location: u32,
        dur: u64,
    },
    /// This process is rank `rank` of a job of `world` processes.
    JobRank {
        rank: u32,
        world: u32,
    },
    /// The process entered the `seq`th collective of its process group `group` with the job's
    /// other processes: `op` over `bytes`, at `location`.
    CollectiveEnter {
        t: u64,
        group: String,
        seq: u64,
        op: String,
        bytes: u64,
        location: u32,
    },
    /// The process left collective `seq` of `group`.
    CollectiveLeave {
        t: u64,
        group: String,
        seq: u64,
    },
    /// Value-read sync `sync` (its `SyncBegin` just before) left `tensors` live tensors pending
    /// for a later graph: a read that splits the step's work, where none is a read between the
    /// steps' work (an evaluation's).
    LeftPending {
        sync: u64,
        tensors: u32,
    },
}

/// One compile of a function by a front end's compiler (torch.compile: Dynamo, then its
/// backend); its graphs are `Graph` records written before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCompileRec {
    pub t: u64,
    /// The compiler's name for it (torch.compile's `0/1`).
    pub id: String,
    /// The compiled function's first line, and the user's line that called it.
    pub function: u32,
    pub caller: Option<u32>,
    pub dur: u64,
    /// Where the time went, in order (`Dynamo`, `AOTAutograd`, `backend`).
    pub phases: Vec<(String, u64)>,
    pub graphs: Vec<u64>,
    /// The failed check that made it compile again (a guard failure); None for a first compile.
    pub reason: Option<String>,
    pub reason_location: Option<u32>,
    /// Why the compiler gave up on the function (its recompile limit).
    pub failure: Option<String>,
}

/// How a graph runs partitioned over a mesh of devices.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PartitionRec {
    pub hash: u64,
    /// The mesh's axes and their sizes, `[("data", 4)]`.
    pub mesh_axes: Vec<(String, u32)>,
    /// The device of each partition.
    pub devices: Vec<u32>,
    /// Per graph input: its sharding (`('data', None)`), or None when whole on every device.
    pub inputs: Vec<Option<String>>,
    /// Per output, likewise.
    pub outputs: Vec<Option<String>>,
    /// The collectives XLA's partitioner inserted.
    pub collectives: Vec<CollectiveRec>,
}

impl PartitionRec {
    /// `data=4`, `data=2 x model=2`.
    pub fn mesh_text(&self) -> String {
        let axes: Vec<String> =
            self.mesh_axes.iter().map(|(a, n)| format!("{}={n}", clip_to(a, 66))).collect();
        axes.join(" x ")
    }

    /// Bytes all the collectives move to each device per execution.
    pub fn collective_bytes(&self) -> u64 {
        crate::util::saturating_sum(self.collectives.iter().map(|c| c.bytes))
    }

    /// The device of partition `partition` (its number, where the plan does not say).
    pub fn device(&self, partition: usize) -> u32 {
        self.devices.get(partition).copied().unwrap_or(partition as u32)
    }
}

/// One collective op of a partitioned program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRec {
    /// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all`, `collective-permute`.
    pub kind: String,
    pub shapes: Vec<ShapeRec>,
    /// Bytes of its result on each device.
    pub bytes: u64,
    /// The devices that exchange data, as XLA writes it (`{{0,1,2,3}}`, `[1,4]<=[4]`).
    pub groups: String,
    /// The user's line of the op it was inserted for, when XLA kept it.
    pub location: Option<u32>,
}

impl CollectiveRec {
    /// `all-reduce f32[512,784] + 7 more (2.7 MB per device)`, without the location.
    pub fn text(&self) -> String {
        let first = self.shapes.first().map(|s| s.to_string()).unwrap_or_default();
        let more = match self.shapes.len() {
            0 | 1 => String::new(),
            n => format!(" + {} more", n - 1),
        };
        format!(
            "{} {first}{more} ({} per device, groups {})",
            clip_to(&self.kind, 66),
            crate::util::format_bytes(self.bytes as f64),
            clip_to(&self.groups, 66)
        )
    }
}
