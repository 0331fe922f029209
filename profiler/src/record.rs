//! The records of a profile file: the engine's events, made compact and self-contained.
//!
//! Locations and graph definitions are written once and referred to by id afterwards, so a sync
//! that hits the cache costs a few dozen bytes. Every record is plain data (no engine types), so a
//! profile can be read anywhere, by a program that never ran the engine.

use serde::{Deserialize, Serialize};

/// Why a sync happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Cause {
    Explicit,
    ValueRead,
    StepEnd,
}

impl Cause {
    pub fn describe(self) -> &'static str {
        match self {
            Cause::Explicit => "explicit sync()",
            Cause::ValueRead => "a value read on the host",
            Cause::StepEnd => "end of step",
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

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if !self.function.is_empty() {
            write!(f, " in {}", self.function)?;
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

impl std::fmt::Display for ShapeRec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        write!(f, "{}[{}]", self.dtype, dims.join(","))
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
            AttrValue::Ints(v) => write!(f, "{v:?}"),
            AttrValue::Pairs(v) => write!(f, "{v:?}"),
            AttrValue::Name(n) => f.write_str(n),
        }
    }
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
    pub fn text(&self, at: usize) -> String {
        let mut s = format!("%{at} = {}(", self.op);
        for (i, input) in self.inputs.iter().enumerate() {
            s += &format!("{}%{input}", if i > 0 { ", " } else { "" });
        }
        s.push(')');
        if !self.attrs.is_empty() {
            let attrs: Vec<String> = self.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s += &format!(" {{{}}}", attrs.join(", "));
        }
        s + &format!(" : {}", self.shape)
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
}
