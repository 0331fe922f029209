//! Reading version-1 files. Version 1 differs from version 2 in three records: a graph's nodes
//! were lines of text (`%3 = add(%1, %2) : f32[4]`) with their locations beside them, and the
//! engine's counters (in `Meta` and at the end of each sync) were a struct of 13 fields where
//! version 2 writes their names once and their values as a list. Every other record decodes as
//! it is today, so only these three have types of their own here: graph lines are read back
//! into nodes (with no attributes: version 1 never wrote any), counters into names and values.

use serde::Deserialize;

use crate::record::{GraphDef, InputRec, Meta, NodeRec, Record, ShapeRec};

/// Postcard writes an enum's variant index first, as a varint (one byte below 128).
const META_VARIANT: u8 = 0;
const GRAPH_VARIANT: u8 = 2;
const SYNC_END_VARIANT: u8 = 11;

/// The counters of version 1, in the order it wrote them.
const COUNTER_NAMES: [&str; 13] = [
    "tensors_created",
    "tensors_destroyed",
    "ops_traced",
    "syncs",
    "cache_hits",
    "cache_misses",
    "persistent_cache_hits",
    "persistent_cache_misses",
    "compiles",
    "executions",
    "bytes_to_device",
    "bytes_from_device",
    "value_reads",
];

/// Postcard writes a struct as its fields in order, without names: 13 counters are 13 numbers.
type CountersV1 = [u64; 13];

#[derive(Deserialize)]
struct MetaV1 {
    program: String,
    pid: u32,
    start_unix_ms: u64,
    platform: String,
    plugin: String,
    counters: CountersV1,
}

#[derive(Deserialize)]
struct SyncEndV1 {
    t: u64,
    sync: u64,
    dur: u64,
    counters: CountersV1,
}

#[derive(Deserialize)]
struct GraphDefV1 {
    hash: u64,
    nodes: u32,
    ops: Vec<(String, u32)>,
    inputs: Vec<InputRec>,
    outputs: Vec<ShapeRec>,
    nodes_text: Vec<String>,
    node_locations: Vec<u32>,
}

/// One version-1 record, as today's record; `None` when it cannot be decoded.
pub(super) fn decode(payload: &[u8]) -> Option<Record> {
    match payload.split_first() {
        Some((&META_VARIANT, rest)) => {
            let old: MetaV1 = postcard::from_bytes(rest).ok()?;
            Some(Record::Meta(Meta {
                program: old.program,
                pid: old.pid,
                start_unix_ms: old.start_unix_ms,
                platform: old.platform,
                plugin: old.plugin,
                counter_names: COUNTER_NAMES.map(String::from).to_vec(),
                counters: old.counters.to_vec(),
            }))
        }
        Some((&SYNC_END_VARIANT, rest)) => {
            let old: SyncEndV1 = postcard::from_bytes(rest).ok()?;
            let SyncEndV1 { t, sync, dur, counters } = old;
            Some(Record::SyncEnd { t, sync, dur, counters: counters.to_vec() })
        }
        Some((&GRAPH_VARIANT, rest)) => {
            let old: GraphDefV1 = postcard::from_bytes(rest).ok()?;
            let node_defs = old
                .nodes_text
                .iter()
                .enumerate()
                .map(|(i, line)| node(line, old.node_locations.get(i).copied().unwrap_or(0)))
                .collect();
            Some(Record::Graph(Box::new(GraphDef {
                hash: old.hash,
                nodes: old.nodes,
                ops: old.ops,
                inputs: old.inputs,
                outputs: old.outputs,
                node_defs,
            })))
        }
        _ => postcard::from_bytes::<Record>(payload).ok(),
    }
}

/// A node from its version-1 line, `%3 = add(%1, %2) : f32[4]`. A line that does not read so
/// keeps its text as the op, so nothing is lost from view.
fn node(line: &str, location: u32) -> NodeRec {
    let (body, shape) = line.rsplit_once(" : ").unwrap_or((line, ""));
    let expr = body.split_once(" = ").map_or(body, |(_, e)| e);
    // The operands are the last parenthesized group (an op's name could hold parentheses).
    let (op, args) = match (expr.rfind('('), expr.ends_with(')')) {
        (Some(open), true) => (&expr[..open], &expr[open + 1..expr.len() - 1]),
        _ => (expr, ""),
    };
    let inputs = args
        .split(',')
        .filter_map(|a| a.trim().strip_prefix('%').and_then(|n| n.parse().ok()))
        .collect();
    NodeRec {
        op: op.to_string(),
        attrs: Vec::new(),
        inputs,
        shape: shape_rec(shape),
        location,
        hash: 0,
    }
}

/// `f32[64,64]` as a shape record (`f32[]` is a scalar).
fn shape_rec(text: &str) -> ShapeRec {
    let (dtype, dims) = text.split_once('[').unwrap_or((text, ""));
    let dims =
        dims.trim_end_matches(']').split(',').filter_map(|d| d.trim().parse().ok()).collect();
    ShapeRec { dtype: dtype.to_string(), dims }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_lines_read_back_as_nodes() {
        let n = node("%4 = compare(Lt)(%2, %3) : pred[3,2]", 7);
        assert_eq!(n.op, "compare(Lt)");
        assert_eq!(n.inputs, vec![2, 3]);
        assert_eq!(n.shape, ShapeRec { dtype: "pred".into(), dims: vec![3, 2] });
        assert_eq!(n.location, 7);
        let scalar = node("%0 = scalar() : f32[]", 0);
        assert!(scalar.inputs.is_empty() && scalar.shape.dims.is_empty());
        let odd = node("not a node line", 0);
        assert_eq!(odd.op, "not a node line");
    }
}
