//! One sync's graph: the post-order of the pending nodes, its structural key, and its inputs.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::hash::Hasher;
use std::sync::Arc;

use crate::events::{GraphInput, GraphSummary, InputKind};
use crate::ir::{FastHasher, Node, NodeRef, Op};
use crate::runtime::Buffer;
use crate::shape::Shape;

pub(crate) struct Graph<'a> {
    /// Every node once, inputs before users. A graph from the trace has none until laid out
    /// (`Trace::lay_out`), which only a compile needs.
    pub order: Vec<&'a Node>,
    /// Per node in `order`: its parameter number (data leaves), its scalar slot (scalars), else 0.
    pub slot: Vec<u32>,
    /// The structural key: ops, attributes, shapes, and how nodes connect; never data.
    pub key: u64,
    /// Device buffers fed as parameters 0..n, in order.
    pub data: Vec<Arc<Buffer>>,
    /// Host scalars, fed as one f64 vector after the buffers.
    pub scalars: Vec<f64>,
    /// Distinct output nodes (indices into `order`; positions in the trace until laid out).
    pub outputs: Vec<u32>,
    /// For each root, which output holds it.
    pub root_outputs: Vec<usize>,
    /// Device-data inputs donated to an output: `(parameter, output)`. XLA reuses their memory.
    pub donated: Vec<(usize, usize)>,
}

impl<'a> Graph<'a> {
    /// Walks the graph under `roots` once (iteratively: chains can be 100,000 deep). `epoch` is
    /// this sync's mark; a node already marked with it was visited.
    /// `donate`: whether inputs only this graph refers to may be donated (see [`Graph::donate`]).
    pub fn build(roots: &'a [NodeRef], epoch: u64, donate: bool) -> Graph<'a> {
        let mut g = Graph {
            order: Vec::new(),
            slot: Vec::new(),
            key: 0,
            data: Vec::new(),
            scalars: Vec::new(),
            outputs: Vec::new(),
            root_outputs: Vec::with_capacity(roots.len()),
            donated: Vec::new(),
        };
        // Per data parameter: (edges of this graph that use it, strong references to its node).
        let mut uses: Vec<(usize, usize)> = Vec::new();
        let mut h = FastHasher::default();
        let mut scalar_slots: HashMap<
            (u64, crate::DType, u64),
            usize,
            BuildHasherDefault<FastHasher>,
        > = HashMap::default();
        let mut stack: Vec<(&'a Node, usize)> = Vec::new();
        for root in roots {
            let root: &'a Node = root;
            if root.visited_in(epoch).is_none() {
                stack.push((root, 0));
            }
            while let Some((node, next)) = stack.last_mut() {
                let node: &'a Node = node;
                if *next < node.inputs.len() {
                    let child: &'a Node = &node.inputs[*next];
                    *next += 1;
                    if child.visited_in(epoch).is_none() {
                        stack.push((child, 0));
                    }
                    continue;
                }
                stack.pop();
                let index = g.order.len() as u32;
                node.mark_visited(epoch, index);
                h.write_u64(node.hash);
                for input in &node.inputs {
                    let index = input.visited_in(epoch).unwrap_or(u32::MAX);
                    h.write_u64(index as u64);
                    if let Op::Data(_) = input.op {
                        let u = &mut uses[g.slot[index as usize] as usize];
                        *u = (u.0 + 1, Arc::strong_count(input));
                    }
                }
                let slot = match &node.op {
                    Op::Data(buffer) => {
                        g.data.push(buffer.clone());
                        uses.push((0, 0));
                        g.data.len() - 1
                    }
                    Op::Scalar(value) => {
                        // Equal scalars recorded at the same line share one slot (a loop of
                        // `x * 1.0001` is one input to XLA instead of thousands). Only the same
                        // line: values from different lines that happen to be equal in one step
                        // (Adam's 1 - beta1 and its first bias correction) would otherwise change
                        // the sharing, and so the key, from step to step. The sharing is part of
                        // the key, so a program always gets the inputs it was compiled for.
                        let key = (value.to_bits(), node.shape.dtype, node.location.site_id());
                        let next = g.scalars.len();
                        let slot = *scalar_slots.entry(key).or_insert(next);
                        if slot == next {
                            g.scalars.push(*value);
                        }
                        h.write_u64(slot as u64);
                        slot
                    }
                    _ => 0,
                };
                g.slot.push(slot as u32);
                g.order.push(node);
            }
            let index = root.visited_in(epoch).unwrap_or(0);
            let output = match g.outputs.iter().position(|&o| o == index) {
                Some(existing) => existing,
                None => {
                    g.outputs.push(index);
                    g.outputs.len() - 1
                }
            };
            g.root_outputs.push(output);
            h.write_u64(output as u64);
        }
        h.write_u64(g.outputs.len() as u64);
        if donate {
            g.donate(&uses);
        }
        for &(param, output) in &g.donated {
            h.write_u64(((param as u64) << 32) | output as u64);
        }
        g.key = h.finish();
        g
    }

    /// Donates every device-data input that nothing but this graph's edges refers to: no tensor
    /// holds it and no other graph uses it, so after this sync nobody can read it. Its memory
    /// then becomes that of an output of the same type (parameters updated in place).
    fn donate(&mut self, uses: &[(usize, usize)]) {
        let outputs: Vec<&Shape> =
            self.outputs.iter().map(|&o| &self.order[o as usize].shape).collect();
        let params = self.order.iter().zip(&self.slot).filter(|(n, _)| matches!(n.op, Op::Data(_)));
        // The node is held by this graph's edges only.
        let candidates = params.map(|(node, &slot)| {
            let (edges, refs) = uses[slot as usize];
            (slot as usize, *node, edges == refs)
        });
        self.donated = donations(candidates, &outputs);
    }

    /// The graph described for the profiler (built on a cache miss, or when someone listens).
    pub fn summary(&self) -> GraphSummary {
        let mut ops: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut kinds = BTreeMap::new();
        let mut inputs = Vec::new();
        let mut nodes_text = Vec::with_capacity(self.order.len());
        let mut node_locations = Vec::with_capacity(self.order.len());
        for (i, node) in self.order.iter().enumerate() {
            *ops.entry(node.op.name()).or_default() += 1;
            *kinds.entry(node.op.kind()).or_default() += 1;
            if let Op::Data(_) = node.op {
                inputs.push(GraphInput {
                    shape: node.shape.clone(),
                    kind: InputKind::Data,
                    location: node.location.clone(),
                });
            }
            let args: Vec<String> = node
                .inputs
                .iter()
                .map(|n| format!("%{}", n.visit_index.load(std::sync::atomic::Ordering::Relaxed)))
                .collect();
            // A scalar's value is an input, not structure: it is left out of the text.
            let op = match node.op {
                Op::Scalar(_) => "scalar".to_string(),
                _ => format!("{:?}", node.op),
            };
            nodes_text.push(format!("%{i} = {op}({}) : {}", args.join(", "), node.shape));
            node_locations.push(node.location.clone());
        }
        if !self.scalars.is_empty() {
            let first = self.order.iter().find(|n| matches!(n.op, Op::Scalar(_)));
            inputs.push(GraphInput {
                shape: Shape::new(crate::DType::F64, [self.scalars.len() as i64]),
                kind: InputKind::Scalars,
                location: first
                    .map(|n| n.location.clone())
                    .unwrap_or_else(|| self.order[0].location.clone()),
            });
        }
        GraphSummary {
            nodes: self.order.len(),
            ops: ops.into_iter().collect(),
            kinds: kinds.into_iter().collect(),
            inputs,
            outputs: self.outputs.iter().map(|&o| self.order[o as usize].shape.clone()).collect(),
            donated: self.donated.clone(),
            nodes_text,
            node_locations,
        }
    }
}

/// Pairs each input that may be donated with an unclaimed output of its type, in input order.
/// `inputs`: (parameter, its device-data node, whether nothing but this graph refers to the
/// node). The buffer itself must be held by the node and the graph's `data` alone.
pub(crate) fn donations<'n>(
    inputs: impl Iterator<Item = (usize, &'n Node, bool)>,
    outputs: &[&Shape],
) -> Vec<(usize, usize)> {
    let mut taken = vec![false; outputs.len()];
    let mut donated = Vec::new();
    for (param, node, only_this_graph) in inputs {
        let Op::Data(buffer) = &node.op else { continue };
        if !only_this_graph || Arc::strong_count(buffer) != 2 {
            continue;
        }
        if let Some(i) = (0..outputs.len()).find(|&i| !taken[i] && *outputs[i] == node.shape) {
            taken[i] = true;
            donated.push((param, i));
        }
    }
    donated
}
