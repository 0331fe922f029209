//! One sync's graph: the nodes it computes laid out in one canonical order, its inputs, its
//! outputs, and its structural key, the compiled-graph cache key.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::hash::Hasher;
use std::sync::Arc;

use super::{DeviceData, FastHasher, Node, NodeRef, Op};
use crate::dtype::DType;
use crate::shape::Shape;

/// Tags that keep the kinds of references apart in a node's share of the key.
pub(crate) const PARAMETER: u64 = 1 << 62;
pub(crate) const SCALAR_SLOT: u64 = 1 << 63;

/// How a node refers to its inputs (parameter number or position) and, for a scalar, to its slot.
pub(crate) type References = smallvec::SmallVec<[u64; 3]>;

/// Scalars recorded at one line with one value and dtype share a slot; see `Graph::build`.
pub(crate) type ScalarKey = (u64, DType, u64);

pub(crate) fn scalar_key(node: &Node, value: f64) -> ScalarKey {
    (value.to_bits(), node.shape.dtype, node.location.site_id())
}

/// A node's share of the key: its structure (its hash), its position in the graph, and how it
/// refers to its inputs and scalar slot.
pub(crate) fn share(node: &Node, position: u32, refs: &[u64]) -> u64 {
    let mut h = FastHasher::default();
    h.write_u64(node.hash);
    h.write_u64(position as u64);
    for &r in refs {
        h.write_u64(r);
    }
    h.finish()
}

/// The structural key of a graph, from the sum of its nodes' shares and what lies outside the
/// nodes: its parameters (by structure), how many scalar slots it has, its outputs (by position,
/// parameters tagged), which output each root is, and the donations.
///
/// There is one layout, so one key, whichever path built the graph: the nodes the roots need, in
/// recording order, positions counted from 0 among them; device data numbered by first use in
/// that order; scalar slots likewise. The graph walk lays a graph out so; the trace's incremental
/// sum is the same sum when the sync found every recorded node needed (see `trace`), and is not
/// used otherwise. A sum of shares (not a running hash) is what lets the trace add nodes as they
/// are recorded and take unneeded ones off.
pub(crate) fn keys(
    sum: u64,
    params: impl Iterator<Item = u64>,
    scalars: usize,
    outputs: &[u64],
    root_outputs: &[usize],
    donated: &[(usize, usize)],
) -> Keys {
    let mut h = FastHasher::default();
    h.write_u64(sum);
    for p in params {
        h.write_u64(p);
    }
    h.write_u64(scalars as u64);
    for &o in outputs {
        h.write_u64(o);
    }
    h.write_u64(outputs.len() as u64);
    for &o in root_outputs {
        h.write_u64(o as u64);
    }
    // The donations come last, so the key without them is the state before them.
    let undonated = h.finish();
    for &(param, output) in donated {
        h.write_u64(((param as u64) << 32) | output as u64);
    }
    Keys { key: h.finish(), undonated }
}

/// A graph's key (see [`keys`]), and the key it has with no input donated.
pub(crate) struct Keys {
    pub key: u64,
    pub undonated: u64,
}

pub(crate) struct Graph<'a> {
    /// Every node once, inputs before users. A graph from the trace has none until laid out
    /// (`Trace::lay_out`), which only a compile needs.
    pub order: Vec<&'a Node>,
    /// Per node in `order`: its parameter number (data leaves), its scalar slot (scalars), else 0.
    pub slot: Vec<u32>,
    /// The structural key: ops, attributes, shapes, and how nodes connect; never data.
    pub key: u64,
    /// The key the graph has with no input donated (`key` itself when none is).
    pub undonated_key: u64,
    /// Device buffers fed as parameters 0..n, in order.
    pub data: Vec<Arc<DeviceData>>,
    /// Host scalars, one 0-d parameter each in its own dtype, fed after the buffers.
    pub scalars: Vec<(f64, DType)>,
    /// Distinct output nodes (indices into `order`; positions in the trace until laid out).
    pub outputs: Vec<u32>,
    /// For each root, which output holds it.
    pub root_outputs: Vec<usize>,
    /// Device-data inputs donated to an output: `(parameter, output)`. XLA reuses their memory.
    pub donated: Vec<(usize, usize)>,
    /// Parameters the executable run for this graph donates but that something else still
    /// holds now: launched as not donatable (XLA copies them), instead of compiling the graph
    /// again for that donation alone.
    pub kept: Vec<usize>,
    /// `detect_anomaly()`: the program has one more output, last, an f32 scalar that is 0 when
    /// every floating-point output is finite and NaN otherwise (see `lower`). Part of the key.
    pub check_finite: bool,
}

/// Every node the roots need, device data aside, each once, marked with `epoch` (iteratively:
/// chains can be 100,000 deep); in no particular order. The one walk of a graph: a sync's
/// (`Graph::build`) and a trace's layout for a compile (`Trace::lay_out`) both take it.
pub(crate) fn needed(roots: &[NodeRef], epoch: u64) -> Vec<&Node> {
    let mut needed: Vec<&Node> = Vec::new();
    let mut stack: Vec<&Node> = Vec::new();
    for root in roots {
        if !matches!(root.op, Op::Data(_)) && root.visited_in(epoch).is_none() {
            root.mark_visited(epoch, 0);
            stack.push(root);
        }
        while let Some(node) = stack.pop() {
            needed.push(node);
            for input in &node.inputs {
                if !matches!(input.op, Op::Data(_)) && input.visited_in(epoch).is_none() {
                    input.mark_visited(epoch, 0);
                    stack.push(input);
                }
            }
        }
    }
    needed
}

impl<'a> Graph<'a> {
    /// Walks the graph under `roots` (iteratively: chains can be 100,000 deep) and lays it out
    /// the one canonical way (see [`keys`]): the nodes the roots need in recording order, device
    /// data numbered by first use in that order. `epoch` is this sync's mark; a node already
    /// marked with it was visited. `donate`: which inputs it donates.
    pub fn build(roots: &'a [NodeRef], epoch: u64, donate: Donate<'_>) -> Graph<'a> {
        // 1: every node the roots need, device data aside (numbered below, by first use).
        let mut needed = needed(roots, epoch);
        // 2: recording order, a topological order whichever trace recorded a node.
        needed.sort_unstable_by_key(|n| (n.trace_gen, n.trace_seq));

        // 3: positions, parameters and scalar slots, and each node's share of the key.
        let mut params: Vec<&'a NodeRef> = Vec::new();
        // Per parameter: edges of this graph that use it.
        let mut edges: Vec<usize> = Vec::new();
        let mut scalars: Vec<(f64, DType)> = Vec::new();
        let mut scalar_of: HashMap<ScalarKey, u32, BuildHasherDefault<FastHasher>> =
            HashMap::default();
        let mut slot: Vec<u32> = Vec::with_capacity(needed.len());
        let mut sum = 0u64;
        for (position, node) in needed.iter().enumerate() {
            let mut refs = References::new();
            for input in &node.inputs {
                if let Op::Data(_) = input.op {
                    let p = match input.visited_in(epoch) {
                        Some(p) => p,
                        None => {
                            let p = params.len() as u32;
                            input.mark_visited(epoch, p);
                            params.push(input);
                            edges.push(0);
                            p
                        }
                    };
                    edges[p as usize] += 1;
                    refs.push(PARAMETER | p as u64);
                } else {
                    refs.push(input.visit_index() as u64);
                }
            }
            let s = match node.op {
                Op::Scalar(value) => {
                    let next = scalars.len() as u32;
                    let s = *scalar_of.entry(scalar_key(node, value)).or_insert(next);
                    if s == next {
                        scalars.push((value, node.shape.dtype));
                    }
                    refs.push(SCALAR_SLOT | s as u64);
                    s
                }
                _ => 0,
            };
            slot.push(s);
            node.mark_visited(epoch, position as u32);
            sum = sum.wrapping_add(share(node, position as u32, &refs));
        }
        // Device data that is itself a root (no node uses it) comes last.
        for root in roots {
            if matches!(root.op, Op::Data(_)) && root.visited_in(epoch).is_none() {
                root.mark_visited(epoch, params.len() as u32);
                params.push(root);
                edges.push(0);
            }
        }

        // 4: outputs, by position (device data by parameter number, tagged).
        let mut outputs: Vec<u64> = Vec::new();
        let mut root_outputs = Vec::with_capacity(roots.len());
        for root in roots {
            let at = match root.op {
                Op::Data(_) => PARAMETER | root.visit_index() as u64,
                _ => root.visit_index() as u64,
            };
            let o = match outputs.iter().position(|&x| x == at) {
                Some(o) => o,
                None => {
                    outputs.push(at);
                    outputs.len() - 1
                }
            };
            root_outputs.push(o);
        }

        // 5: the layout lowering reads: parameters first, then the nodes.
        let n_params = params.len() as u32;
        let mut order: Vec<&'a Node> = Vec::with_capacity(params.len() + needed.len());
        let mut order_slot: Vec<u32> = Vec::with_capacity(order.capacity());
        for (p, node) in params.iter().enumerate() {
            node.mark_visited(epoch, p as u32);
            order.push(&***node);
            order_slot.push(p as u32);
        }
        for (position, node) in needed.iter().enumerate() {
            node.mark_visited(epoch, n_params + position as u32);
            order.push(node);
            order_slot.push(slot[position]);
        }
        let data = params
            .iter()
            .map(|p| match &p.op {
                Op::Data(data) => data.clone(),
                _ => unreachable!("parameters are device data"),
            })
            .collect();
        let mut g = Graph {
            order,
            slot: order_slot,
            key: 0,
            data,
            scalars,
            outputs: outputs
                .iter()
                .map(|&at| match at & PARAMETER {
                    0 => n_params + at as u32,
                    _ => (at & !PARAMETER) as u32,
                })
                .collect(),
            root_outputs,
            donated: Vec::new(),
            kept: Vec::new(),
            check_finite: false,
            undonated_key: 0,
        };
        let shapes =
            || -> Vec<&Shape> { g.outputs.iter().map(|&o| &g.order[o as usize].shape).collect() };
        match donate {
            Donate::Nothing => {}
            Donate::Unheld(replaces) => {
                // The node is held by this graph's edges only, its buffer by the node and `data`.
                let candidates = params.iter().enumerate().filter_map(|(p, node)| {
                    (edges[p] == Arc::strong_count(node) && data_held_once(node))
                        .then_some((p, &***node))
                });
                g.donated = donations(candidates, &shapes(), &replaced_per_output(&g, replaces));
            }
            Donate::Replaced(replaces) => {
                let candidates = params.iter().enumerate().map(|(p, node)| (p, &***node));
                let replaced = replaced_per_output(&g, replaces);
                g.donated = own_updates(candidates, &shapes(), &replaced).0;
            }
        }
        let param_hashes = params.iter().map(|p| p.hash);
        let k = keys(sum, param_hashes, g.scalars.len(), &outputs, &g.root_outputs, &g.donated);
        (g.key, g.undonated_key) = (k.key, k.undonated);
        g
    }
}

/// Which inputs a graph donates (see [`Graph::build`]).
#[derive(Clone, Copy)]
pub(crate) enum Donate<'r> {
    Nothing,
    /// A sync's: those that nothing but the graph refers to, each to the output that takes its
    /// place where one does, given per root (see [`donations`]).
    Unheld(&'r [Replaces]),
    /// A captured graph's: each input that an output takes the place of (per root), whoever
    /// holds it now; each run says which its caller hands over (`exec::replay`).
    Replaced(&'r [Replaces]),
}

/// Per root of a sync, the device data its value takes the place of (an in-place write's result:
/// the buffer the tensor held before), by address; `None` for a value of its own.
pub(crate) type Replaces = Option<*const DeviceData>;

/// What each output of `g` takes the place of, from its roots' (`replaces`, per root).
pub(crate) fn replaced_per_output(g: &Graph, replaces: &[Replaces]) -> Vec<Replaces> {
    let mut per_output = vec![None; g.outputs.len()];
    for (&o, r) in g.root_outputs.iter().zip(replaces) {
        if r.is_some() {
            per_output[o as usize] = *r;
        }
    }
    per_output
}

/// Whether a device-data node's buffer is held by the node and a graph's `data` alone.
pub(crate) fn data_held_once(node: &Node) -> bool {
    matches!(&node.op, Op::Data(data) if Arc::strong_count(data) == 2)
}

/// Pairs each input that may be donated (`inputs`: parameter, device-data node) with an output
/// of its type: first with the output that takes its place (`replaced`, per output: an in-place
/// update's, a parameter with its own new value), then the rest with unclaimed outputs in input
/// order. Paired by type alone, an AdamW step's parameters went to their moments' updates: XLA
/// then copies each such input before the output overwrites it, and the output after (48 copies
/// for 12 tensors; the step took 1.6 times as long as with no donation at all).
pub(crate) fn donations<'n>(
    inputs: impl Iterator<Item = (usize, &'n Node)>,
    outputs: &[&Shape],
    replaced: &[Replaces],
) -> Vec<(usize, usize)> {
    let (mut donated, left) = own_updates(inputs, outputs, replaced);
    let mut taken = vec![false; outputs.len()];
    for &(_, o) in &donated {
        taken[o] = true;
    }
    for (param, node) in left {
        if let Some(i) = (0..outputs.len()).find(|&i| !taken[i] && *outputs[i] == node.shape) {
            taken[i] = true;
            donated.push((param, i));
        }
    }
    donated.sort_unstable();
    donated
}

/// The first pass of [`donations`]: each input paired with the output that takes its place,
/// and the inputs no output takes the place of.
fn own_updates<'n>(
    inputs: impl Iterator<Item = (usize, &'n Node)>,
    outputs: &[&Shape],
    replaced: &[Replaces],
) -> (Vec<(usize, usize)>, Vec<(usize, &'n Node)>) {
    let successor: HashMap<*const DeviceData, usize, BuildHasherDefault<FastHasher>> =
        replaced.iter().enumerate().filter_map(|(i, r)| r.map(|data| (data, i))).collect();
    let mut taken = vec![false; outputs.len()];
    let (mut donated, mut left) = (Vec::new(), Vec::new());
    for (param, node) in inputs {
        let Op::Data(data) = &node.op else { continue };
        match successor.get(&Arc::as_ptr(data)) {
            Some(&i) if !taken[i] && *outputs[i] == node.shape => {
                taken[i] = true;
                donated.push((param, i));
            }
            _ => left.push((param, node)),
        }
    }
    (donated, left)
}
