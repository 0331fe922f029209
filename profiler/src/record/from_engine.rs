//! The engine's values as records: each conversion that needs nothing but the value itself.
//! (What needs the recording's state, a location interned as an id or a graph written once,
//! stays with the recorder.)

use xlaprof_core::events::SyncCause;
use xlaprof_core::ir::Attr;
use xlaprof_core::runtime::{CostAnalysis, MemoryStats};
use xlaprof_core::Shape;

use super::{AttrValue, Cause, CostRec, MemoryRec, ShapeRec};

impl From<&Shape> for ShapeRec {
    fn from(s: &Shape) -> Self {
        ShapeRec { dtype: s.dtype.to_string(), dims: s.dims.to_vec() }
    }
}

impl From<&Attr> for AttrValue {
    fn from(a: &Attr) -> Self {
        match a {
            Attr::Int(v) => AttrValue::Int(*v),
            Attr::Ints(v) => AttrValue::Ints(v.clone()),
            Attr::Pairs(v) => AttrValue::Pairs(v.clone()),
            Attr::Name(n) => AttrValue::Name(n.to_string()),
            Attr::Text(t) => AttrValue::Name(t.clone()),
        }
    }
}

impl From<SyncCause> for Cause {
    fn from(c: SyncCause) -> Self {
        match c {
            SyncCause::Explicit => Cause::Explicit,
            SyncCause::ValueRead => Cause::ValueRead,
            SyncCause::StepEnd => Cause::StepEnd,
            SyncCause::CompiledGraph => Cause::CompiledGraph,
        }
    }
}

impl From<&MemoryStats> for MemoryRec {
    fn from(m: &MemoryStats) -> Self {
        MemoryRec {
            generated_code_bytes: m.generated_code_bytes,
            argument_bytes: m.argument_bytes,
            output_bytes: m.output_bytes,
            alias_bytes: m.alias_bytes,
            temp_bytes: m.temp_bytes,
            peak_memory_bytes: m.peak_memory_bytes,
        }
    }
}

impl From<&CostAnalysis> for CostRec {
    fn from(c: &CostAnalysis) -> Self {
        CostRec {
            flops: c.flops().unwrap_or(0.0),
            bytes_accessed: c.bytes_accessed().unwrap_or(0.0),
            transcendentals: c.transcendentals().unwrap_or(0.0),
        }
    }
}
