//! A graph described for the profiler: what events carry, built on a compile (or when someone
//! listens and the cache has none).

use std::collections::BTreeMap;

use crate::events::{GraphInput, GraphSummary, InputKind};
use crate::ir::{Graph, NodeDef, Op};
use crate::location::SourceLocation;
use crate::shape::Shape;

/// The graph described for the profiler (built on a cache miss, or when someone listens).
pub(crate) fn summary(graph: &Graph) -> GraphSummary {
    let mut ops: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut kinds = BTreeMap::new();
    let mut inputs = Vec::new();
    let mut node_defs = Vec::with_capacity(graph.order.len());
    for node in &graph.order {
        *ops.entry(node.op.name()).or_default() += 1;
        *kinds.entry(node.op.kind()).or_default() += 1;
        if let Op::Data(data) = &node.op {
            inputs.push(GraphInput {
                shape: node.shape.clone(),
                kind: InputKind::Data,
                location: node.location.clone(),
                name: data.name().cloned(),
            });
        }
        node_defs.push(NodeDef {
            op: node.op.name(),
            attrs: node.op.attrs(),
            inputs: node.inputs.iter().map(|n| n.visit_index()).collect(),
            shape: node.shape.clone(),
            location: node.location.clone(),
            hash: node.hash,
        });
    }
    // One input per scalar slot, located where its first scalar was recorded.
    let mut scalar_at: Vec<Option<&SourceLocation>> = vec![None; graph.scalars.len()];
    for (node, &slot) in graph.order.iter().zip(&graph.slot) {
        if let (Op::Scalar(_), Some(at @ None)) = (&node.op, scalar_at.get_mut(slot as usize)) {
            *at = Some(&node.location);
        }
    }
    for (&(_, dtype), at) in graph.scalars.iter().zip(scalar_at) {
        // Every slot was given to a scalar of the graph, so each has its location.
        let Some(location) = at.cloned() else { continue };
        let shape = Shape::new(dtype, []);
        inputs.push(GraphInput { shape, kind: InputKind::Scalar, location, name: None });
    }
    GraphSummary {
        nodes: graph.order.len(),
        ops: ops.into_iter().collect(),
        kinds: kinds.into_iter().collect(),
        inputs,
        outputs: graph.outputs.iter().map(|&o| graph.order[o as usize].shape.clone()).collect(),
        donated: graph.donated.clone(),
        node_defs,
    }
}
