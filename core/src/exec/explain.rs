//! `explain()`: the graph that computing some tensors would run, described without running it:
//! each node's op, shape and line, and which inputs are device data and which host scalars (a
//! host scalar is uploaded whenever its value changes). Nothing is compiled, run or read.

use std::fmt;

use super::{engine, summary};
use crate::error::Result;
use crate::events::{GraphSummary, InputKind};
use crate::ir::{Donate, Graph, NodeRef};
use crate::trace;

/// The pending graph of some tensors, as [`explain`] found it.
#[derive(Debug, Clone)]
pub struct Explanation {
    pub tensors: usize,
    pub graph: GraphSummary,
}

/// What computing the tensors whose nodes are `roots` would run now (the tensor API's
/// `explain`). A tensor already computed is one node of device data.
pub(crate) fn explain(roots: &[NodeRef]) -> Result<Explanation> {
    let engine = engine()?;
    let _serial = trace::serialize();
    let epoch = engine.epoch.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let graph = Graph::build(roots, epoch, Donate::Nothing);
    Ok(Explanation { tensors: roots.len(), graph: summary::summary(&graph) })
}

impl fmt::Display for Explanation {
    /// `pending graph of 1 tensor: 7 nodes, ...`, then a line per node with its source line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.graph;
        let data = g.inputs.iter().filter(|i| i.kind == InputKind::Data).count();
        let scalars = g.inputs.len() - data;
        let ops = g.node_defs.iter().filter(|n| !matches!(n.op, "parameter" | "scalar")).count();
        writeln!(
            f,
            "pending graph of {} tensor{}: {} nodes, {ops} ops; inputs: {data} device data, {scalars} host scalars (uploaded when their values change); not run",
            self.tensors,
            if self.tensors == 1 { "" } else { "s" },
            g.nodes,
        )?;
        for (at, n) in g.node_defs.iter().enumerate() {
            let operands: Vec<String> = n.inputs.iter().map(|i| format!("%{i}")).collect();
            let attrs: Vec<String> = n.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let attrs =
                if attrs.is_empty() { String::new() } else { format!(" {{{}}}", attrs.join(", ")) };
            let line = format!("%{at} = {}({}){attrs} : {}", n.op, operands.join(", "), n.shape);
            writeln!(f, "  {line:<60} # {}", n.location)?;
        }
        Ok(())
    }
}
