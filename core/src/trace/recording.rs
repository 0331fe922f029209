//! One trace: the nodes recorded since the last full sync, with each node's share of the key added
//! up as it is recorded (see the module above and `ir::key`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::dtype::DType;
use crate::ir::{
    data_held_once, donations, keys, replaced_per_output, scalar_key, share, FastHasher, Graph,
    Inputs, Node, NodeRef, Op, References, Replaces, ScalarKey, PARAMETER, SCALAR_SLOT,
};
use crate::location::SourceLocation;
use crate::shape::Shape;

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A broadcast host scalar's line (site id), value (bits) and dtype.
pub(crate) type OperandKey = (u64, u64, DType);

/// What one trace recorded, as far as a sync needs it (the nodes carry the rest: their position,
/// their users, their place among the leaves).
pub(crate) struct Trace {
    pub(super) gen: u64,
    /// Nodes recorded so far.
    pub(super) recorded: u32,
    /// Nodes nothing recorded uses (yet): the graph's sinks.
    pub(super) leaves: Vec<NodeRef>,
    /// Device data the nodes read, numbered by first use, with the edges to each.
    pub(super) params: Vec<NodeRef>,
    param_edges: Vec<u32>,
    param_of: FastMap<usize, u32>,
    /// Host scalars, one slot per (value, dtype, line): see `exec::graph` on why per line.
    scalars: Vec<(f64, DType)>,
    scalar_of: FastMap<ScalarKey, u32>,
    /// Broadcast host scalars by line, value and dtype, for reuse (see
    /// `Registry::scalar_operand`).
    operands: FastMap<OperandKey, NodeRef>,
    /// Sum of the recorded nodes' shares of the key, less those the sync found unneeded.
    sum: u64,
    /// A node's input was recorded by an older trace: this trace cannot describe the graph.
    pub(super) broken: bool,
    /// The sync found recorded nodes that no output needs: positions, parameter numbers and
    /// scalar slots then have gaps, and the sum is not the graph's key (see `exec::key`).
    gaps: bool,
}

/// Which recorded nodes a full sync outputs.
pub(crate) struct Outputs {
    /// Distinct output nodes, by position in the trace.
    positions: Vec<u32>,
    /// For each root, which output holds it.
    of_root: Vec<usize>,
}

impl Trace {
    pub(super) const fn empty(gen: u64) -> Trace {
        Trace {
            gen,
            recorded: 0,
            leaves: Vec::new(),
            params: Vec::new(),
            param_edges: Vec::new(),
            param_of: HashMap::with_hasher(BuildHasherDefault::new()),
            scalars: Vec::new(),
            scalar_of: HashMap::with_hasher(BuildHasherDefault::new()),
            operands: HashMap::with_hasher(BuildHasherDefault::new()),
            sum: 0,
            broken: false,
            gaps: false,
        }
    }

    pub(super) fn record(
        &mut self,
        op: Op,
        shape: Shape,
        inputs: Inputs,
        location: SourceLocation,
    ) -> NodeRef {
        let node = Node::traced(op, shape, inputs, location, self.gen, self.recorded);
        self.recorded += 1;
        // How the node refers to its inputs and scalar slot, worked out once here (see `share`).
        let mut refs = References::new();
        for input in &node.inputs {
            if let Op::Data(_) = input.op {
                let next = self.params.len() as u32;
                let p = *self.param_of.entry(Arc::as_ptr(input) as usize).or_insert(next);
                if p == next {
                    self.params.push(input.clone());
                    self.param_edges.push(0);
                }
                self.param_edges[p as usize] += 1;
                refs.push(PARAMETER | p as u64);
            } else {
                if input.trace_gen == self.gen {
                    self.add_user(input);
                } else {
                    self.broken = true;
                }
                refs.push(input.trace_seq as u64);
            }
        }
        if let Op::Scalar(value) = node.op {
            let next = self.scalars.len() as u32;
            let slot = *self.scalar_of.entry(scalar_key(&node, value)).or_insert(next);
            if slot == next {
                self.scalars.push((value, node.shape.dtype));
            }
            refs.push(SCALAR_SLOT | slot as u64);
        }
        self.sum = self.sum.wrapping_add(share(&node, node.trace_seq, &refs));
        node.trace_leaf_at.store(self.leaves.len() as u32, Relaxed);
        self.leaves.push(node.clone());
        node
    }

    /// The broadcast scalar this trace recorded for `key`, if it has `shape`.
    pub(super) fn operand(&self, key: &OperandKey, shape: &Shape) -> Option<NodeRef> {
        self.operands.get(key).filter(|n| n.shape == *shape).cloned()
    }

    pub(super) fn keep_operand(&mut self, key: OperandKey, operand: NodeRef) {
        self.operands.insert(key, operand);
    }

    /// The references `record` worked out for a node, looked up again (for the few a sync drops).
    fn references(&self, node: &Node) -> References {
        let mut refs: References = node
            .inputs
            .iter()
            .map(|input| match input.op {
                Op::Data(_) => PARAMETER | self.param(input) as u64,
                _ => input.trace_seq as u64,
            })
            .collect();
        if let Op::Scalar(value) = node.op {
            refs.push(SCALAR_SLOT | self.scalar_slot(node, value) as u64);
        }
        refs
    }

    fn param(&self, data: &NodeRef) -> u32 {
        self.param_of[&(Arc::as_ptr(data) as usize)]
    }

    fn scalar_slot(&self, node: &Node, value: f64) -> u32 {
        self.scalar_of[&scalar_key(node, value)]
    }

    /// `input` gains a user: a leaf no longer, on its first.
    fn add_user(&mut self, input: &Node) {
        // Changed only under the registry's lock: a load and a store, no locked instruction.
        let users = input.trace_users.load(Relaxed);
        input.trace_users.store(users + 1, Relaxed);
        if users == 0 {
            let at = input.trace_leaf_at.load(Relaxed) as usize;
            self.leaves.swap_remove(at);
            if let Some(moved) = self.leaves.get(at) {
                moved.trace_leaf_at.store(at as u32, Relaxed);
            }
        }
    }

    /// Whether this trace recorded every node the roots need (else the sync walks).
    pub fn covers(&self, roots: &[NodeRef]) -> bool {
        !self.broken && roots.iter().all(|r| r.trace_gen == self.gen)
    }

    /// After [`Trace::settle`]: whether the trace's sum is the graph's key, which it is when the
    /// roots need every node recorded (no gaps). Otherwise the sync walks the graph.
    pub fn is_exact(&self) -> bool {
        !self.gaps
    }

    /// Settles the roots as outputs, and takes the shares of the nodes none of them needs (leaves
    /// that are not outputs, then what only those used) off the sum.
    pub fn settle(&mut self, roots: &[NodeRef]) -> Outputs {
        let mut out = Outputs { positions: Vec::new(), of_root: Vec::with_capacity(roots.len()) };
        let mut output_of: FastMap<u32, usize> = FastMap::default();
        for root in roots {
            let next = out.positions.len();
            let o = *output_of.entry(root.trace_seq).or_insert(next);
            if o == next {
                out.positions.push(root.trace_seq);
            }
            out.of_root.push(o);
        }
        let mut unneeded: Vec<&Node> = self
            .leaves
            .iter()
            .filter(|l| !output_of.contains_key(&l.trace_seq))
            .map(|l| &**l)
            .collect();
        let mut sum = self.sum;
        while let Some(node) = unneeded.pop() {
            sum = sum.wrapping_sub(share(node, node.trace_seq, &self.references(node)));
            self.gaps = true;
            for input in &node.inputs {
                if matches!(input.op, Op::Data(_)) {
                    continue;
                }
                let users = input.trace_users.load(Relaxed) - 1;
                input.trace_users.store(users, Relaxed);
                if users == 0 && !output_of.contains_key(&input.trace_seq) {
                    unneeded.push(input);
                }
            }
        }
        self.sum = sum;
        out
    }

    /// The graph of a settled trace, without its node order (see [`Trace::lay_out`]): all a
    /// cache hit needs. `donate`: whether inputs only this graph refers to may be donated, with
    /// the data each root takes the place of (`graph::donations`).
    pub fn graph(
        &self,
        roots: &[NodeRef],
        outputs: Outputs,
        donate: Option<&[Replaces]>,
    ) -> Graph<'_> {
        let data = self
            .params
            .iter()
            .map(|p| match &p.op {
                Op::Data(data) => data.clone(),
                _ => unreachable!("parameters are device data"),
            })
            .collect();
        let mut g = Graph {
            order: Vec::new(),
            slot: Vec::new(),
            key: 0,
            data,
            scalars: self.scalars.clone(),
            outputs: outputs.positions,
            root_outputs: outputs.of_root,
            donated: Vec::new(),
            kept: Vec::new(),
            check_finite: false,
            undonated_key: 0,
        };
        if let Some(replaces) = donate {
            self.donate(&mut g, roots, replaces);
        }
        let outputs: Vec<u64> = g.outputs.iter().map(|&o| o as u64).collect();
        let params = self.params.iter().map(|p| p.hash);
        let k = keys(self.sum, params, self.scalars.len(), &outputs, &g.root_outputs, &g.donated);
        (g.key, g.undonated_key) = (k.key, k.undonated);
        g
    }

    /// Donates every parameter that nothing but this trace's edges refers to (the parameter list
    /// holds one more reference): see `graph::donations`.
    fn donate(&self, g: &mut Graph, roots: &[NodeRef], replaces: &[Replaces]) {
        let mut outputs: Vec<&Shape> = vec![&roots[0].shape; g.outputs.len()];
        for (root, &o) in roots.iter().zip(&g.root_outputs) {
            outputs[o] = &root.shape;
        }
        let candidates = self.params.iter().enumerate().filter_map(|(p, node)| {
            let unheld = Arc::strong_count(node) == self.param_edges[p] as usize + 1;
            (unheld && data_held_once(node)).then_some((p, &**node))
        });
        g.donated = donations(candidates, &outputs, &replaced_per_output(g, replaces));
    }

    /// Lays the graph out for lowering and its summary: the parameters, then every node the roots
    /// need, in recording order. Outputs become indices into that order. Only a compile needs it.
    pub fn lay_out<'a>(&'a self, g: &mut Graph<'a>, roots: &'a [NodeRef], epoch: u64) {
        // The nodes the roots need (the roots are this trace's, never device data), walked once
        // and marked with the epoch, then put in order.
        let mut needed = crate::ir::needed(roots, epoch);
        needed.sort_unstable_by_key(|n| n.trace_seq);
        g.order.clear();
        g.slot.clear();
        for (p, node) in self.params.iter().enumerate() {
            node.mark_visited(epoch, g.order.len() as u32);
            g.order.push(node);
            g.slot.push(p as u32);
        }
        for node in needed {
            node.mark_visited(epoch, g.order.len() as u32);
            g.order.push(node);
            g.slot.push(match node.op {
                Op::Scalar(value) => self.scalar_slot(node, value),
                _ => 0,
            });
        }
        let index_of = |position: u32| {
            let at = g.order[self.params.len()..].partition_point(|n| n.trace_seq < position);
            (self.params.len() + at) as u32
        };
        let outputs: Vec<u32> = g.outputs.iter().map(|&o| index_of(o)).collect();
        g.outputs = outputs;
    }

    /// Lets go of the parameter list: the graph walk counts references to judge donation.
    pub fn release_params(&mut self) {
        self.params.clear();
        self.param_of.clear();
    }
}
