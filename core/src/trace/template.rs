//! A recorded graph kept to be recorded again on new arguments, with no front end in the loop:
//! how a compiled graph (torch.compile's) joins the lazy trace instead of running on its own.
//!
//! The front end records its graph once, lazily, on arguments that are device data; the
//! template keeps the nodes between those arguments and the graph's outputs. Each later run
//! records the same nodes over the new arguments' values, pending or not, in one pass under the
//! trace's lock: a copy per node, no dispatch. The next sync then computes the graphs of a step
//! and the lazy code between them as one program, whose key, like any sync's, is its structure.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{read_nodes, registry, Holder, Value};
use crate::ir::{Inputs, NodeRef, Op};
use crate::location::SourceLocation;
use crate::shape::Shape;

/// Where a node of the template, or an output, takes its value from.
#[derive(Clone)]
enum Slot {
    /// An argument of the graph, by position.
    Argument(usize),
    /// A node the run records, by position in the template.
    Recorded(usize),
    /// A node every run shares: data the first recording made (a constant).
    Fixed(NodeRef),
}

struct TemplateNode {
    op: Op,
    shape: Shape,
    inputs: smallvec::SmallVec<[Slot; 2]>,
    location: SourceLocation,
    /// A random op's seed: drawn afresh at every run, or each run would repeat the first
    /// one's random numbers.
    seed: bool,
}

/// A graph recorded once, to record again (see the module's comment).
pub(crate) struct Template {
    nodes: Vec<TemplateNode>,
    outputs: Vec<Slot>,
}

impl Template {
    /// The graph computing `outputs` from `arguments` (device data). None when an argument is
    /// not device data.
    pub(crate) fn new(arguments: &[&Value], outputs: &[&Value]) -> Option<Template> {
        let mut by_buffer = HashMap::new();
        for (i, a) in arguments.iter().enumerate() {
            match &a.node().op {
                Op::Data(d) => {
                    by_buffer.entry(Arc::as_ptr(d)).or_insert(i);
                }
                _ => return None,
            }
        }
        let roots: Vec<NodeRef> = outputs.iter().map(|o| o.node()).collect();
        let mut seeds = HashSet::new();
        let mut slots: HashMap<*const crate::ir::Node, Slot> = HashMap::new();
        let mut nodes = Vec::new();
        // Post-order without recursion: a long chain would overflow the stack.
        let mut stack: Vec<(NodeRef, bool)> =
            roots.iter().rev().map(|r| (r.clone(), false)).collect();
        while let Some((node, expanded)) = stack.pop() {
            let key = Arc::as_ptr(&node);
            if slots.contains_key(&key) {
                continue;
            }
            if let Op::Data(d) = &node.op {
                let slot = match by_buffer.get(&Arc::as_ptr(d)) {
                    Some(&i) => Slot::Argument(i),
                    None => Slot::Fixed(node.clone()),
                };
                slots.insert(key, slot);
                continue;
            }
            if !expanded {
                stack.push((node.clone(), true));
                for input in node.inputs.iter().rev() {
                    if !slots.contains_key(&Arc::as_ptr(input)) {
                        stack.push((input.clone(), false));
                    }
                }
                continue;
            }
            if matches!(node.op, Op::Random { .. }) {
                seeds.insert(Arc::as_ptr(&node.inputs[0]));
            }
            let inputs = node.inputs.iter().map(|i| slots[&Arc::as_ptr(i)].clone()).collect();
            slots.insert(key, Slot::Recorded(nodes.len()));
            nodes.push(TemplateNode {
                op: node.op.clone(),
                shape: node.shape.clone(),
                inputs,
                location: node.location.clone(),
                seed: false,
            });
        }
        // A seed is recorded before the random op that reads it: marked once all are known.
        for (node, slot) in &slots {
            if let (true, Slot::Recorded(i)) = (seeds.contains(node), slot) {
                nodes[*i].seed = true;
            }
        }
        let outputs = roots.iter().map(|r| slots[&Arc::as_ptr(r)].clone()).collect();
        Some(Template { nodes, outputs })
    }

    /// How many nodes a run records.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }
}

/// Records `template` over `arguments`: the holders `make` wraps its outputs in, pending ones
/// registered as such (see `record`).
pub(crate) fn record_template<H: Holder>(
    template: &Template,
    arguments: &[&Value],
    make: impl Fn(NodeRef) -> Arc<H>,
) -> Vec<Arc<H>> {
    let (mut reg, arguments) = read_nodes(registry(), arguments);
    let mut recorded: Vec<NodeRef> = Vec::with_capacity(template.nodes.len());
    let node_of = |slot: &Slot, recorded: &[NodeRef]| match slot {
        Slot::Argument(i) => arguments[*i].clone(),
        Slot::Recorded(i) => recorded[*i].clone(),
        Slot::Fixed(node) => node.clone(),
    };
    for n in &template.nodes {
        let inputs: Inputs = n.inputs.iter().map(|s| node_of(s, &recorded)).collect();
        let op = if n.seed { Op::Scalar(crate::ir::next_seed() as f64) } else { n.op.clone() };
        let node = reg.record(op, n.shape.clone(), inputs, n.location.clone());
        recorded.push(node);
    }
    template
        .outputs
        .iter()
        .map(|slot| {
            let node = node_of(slot, &recorded);
            if matches!(node.op, Op::Data(_)) {
                make(node)
            } else {
                reg.hold(node, &make)
            }
        })
        .collect()
}
