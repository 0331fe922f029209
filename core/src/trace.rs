//! The trace: every live tensor whose value is pending IR, and what a full sync needs to know
//! about the nodes recorded since the last one.
//!
//! Recording order is a topological order, so a full sync (`sync()`, `step()`) need not walk the
//! graph: each node's share of the structural key is added up as it is recorded, and the sync adds
//! only what it alone knows: which tensors are live, which recorded nodes none of them needs,
//! which inputs can be donated. A cache hit then costs time in the number of live tensors, inputs
//! and unneeded nodes, not in the size of the graph (the 1,000-op chain of `xlaprof bench` records
//! 6,000 nodes); only a compile lays the graph out. Whatever the trace cannot vouch for (a node
//! whose input was recorded before the trace was last restarted) sends the sync back to the graph
//! walk of `exec::graph`, as do value reads, which compute a part.
//!
//! The trace holds its leaves (nodes nothing recorded uses yet), and through them every node it
//! recorded, until the sync. The sync's graph then goes to a graveyard, freed while the next sync's
//! program runs on the device (host work the device's hides), or a few nodes per newly recorded
//! node when it grows large: a graph of thousands of nodes takes hundreds of microseconds to free,
//! which would otherwise lengthen every sync. One step's graph, with the buffers it read, is kept
//! that much longer.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::dtype::DType;
use crate::exec::{donations, Graph};
use crate::ir::{FastHasher, Inputs, Node, NodeRef, Op};
use crate::location::SourceLocation;
use crate::shape::Shape;
use crate::tensor::{Tensor, TensorInner};

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Past this many nodes a trace starts over (its nodes live on where still used) and the next
/// full sync walks: positions are 32-bit, and a program that reads values in a loop but never
/// syncs everything would otherwise keep every node it ever recorded.
const MAX_NODES: u32 = 1 << 22;

/// Graveyard entries taken per node recorded, while more than `GRAVEYARD_SLACK` nodes wait there
/// (about 16 MiB): programs too short to hide the freeing still do not pile up graphs. An entry is
/// a node to free or, for a node with other users left, one reference to let go; a graph has about
/// as many entries as edges, so this keeps up with a program that records as much as it frees.
const REAPED_PER_RECORD: usize = 4;
const GRAVEYARD_SLACK: usize = 1 << 16;

/// Graveyard entries taken between two looks at whether the device has finished (a few µs).
const REAPED_PER_LOOK: usize = 64;

/// Tags that keep the kinds of references apart in a node's share of the key.
const PARAMETER: u64 = 1 << 62;
const SCALAR_SLOT: u64 = 1 << 63;
/// Sets trace keys apart from keys of the graph walk.
const TRACE_KEY: u64 = 0x7472_6163_655f_6b65;

struct Registry {
    /// Live tensors holding pending IR, by id.
    pending: HashMap<u64, Weak<TensorInner>, BuildHasherDefault<IdHasher>>,
    trace: Trace,
    last_gen: u64,
    /// Nodes of synced graphs, freed a few at a time (a stack: a node freed puts its inputs on
    /// top), and about how many nodes wait there.
    graveyard: Vec<NodeRef>,
    buried: usize,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    pending: HashMap::with_hasher(BuildHasherDefault::new()),
    trace: Trace::empty(1),
    last_gen: 1,
    graveyard: Vec::new(),
    buried: 0,
});

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// Pending, but not recorded by the current trace (see `read_nodes`).
    fn stale(&self, node: &Node) -> bool {
        !matches!(node.op, Op::Data(_)) && node.trace_gen != self.trace.gen
    }

    fn remove_pending(&mut self, id: u64) {
        self.pending.remove(&id);
        // With nothing pending, whatever the trace recorded is unneeded: starting over keeps
        // earlier work out of the next graph's positions, and so out of its key.
        if self.pending.is_empty() && self.trace.recorded > 0 {
            let old = self.restart();
            self.bury(old);
        }
    }

    /// Starts a new trace and returns the old one.
    fn restart(&mut self) -> Trace {
        self.last_gen += 1;
        std::mem::replace(&mut self.trace, Trace::empty(self.last_gen))
    }

    fn bury(&mut self, trace: Trace) {
        self.buried += trace.recorded as usize;
        self.graveyard.extend(trace.leaves);
        self.graveyard.extend(trace.params);
    }

    /// Frees up to `n` graveyard entries. A node this frees leaves its inputs in the graveyard
    /// instead of freeing them at once, as dropping it would.
    fn reap(&mut self, n: usize) {
        for _ in 0..n {
            let Some(node) = self.graveyard.pop() else {
                // Nodes freed elsewhere (their last holder was not the graveyard) were not counted.
                self.buried = 0;
                return;
            };
            if let Ok(mut node) = Arc::try_unwrap(node) {
                self.graveyard.extend(node.inputs.drain(..));
                self.buried = self.buried.saturating_sub(1);
            }
        }
    }
}

/// The nodes of `tensors`, read under the registry's lock for a new use. A node still pending
/// from a trace that a sync has taken is being computed by that sync right now, and the sync may
/// donate the inputs it reads: a new node built on it would need a deleted buffer later. So wait
/// for the sync, and read the tensors again (they are device data by then).
fn read_nodes(
    reg: MutexGuard<'static, Registry>,
    tensors: &[&Tensor],
) -> (MutexGuard<'static, Registry>, Inputs) {
    let nodes: Inputs = tensors.iter().map(|t| t.node()).collect();
    if !nodes.iter().any(|n| reg.stale(n)) {
        return (reg, nodes);
    }
    drop(reg);
    drop(nodes);
    crate::exec::wait_for_sync();
    let reg = registry();
    // Still stale after that (a sync failed, or the trace outgrew its cap): the next full sync
    // then walks the graph.
    let nodes = tensors.iter().map(|t| t.node()).collect();
    (reg, nodes)
}

/// Records an op node over the values of `inputs`, and registers the tensor `make` wraps it in
/// as pending.
pub(crate) fn record(
    op: Op,
    shape: Shape,
    inputs: &[&Tensor],
    location: SourceLocation,
    make: impl FnOnce(NodeRef) -> Arc<TensorInner>,
) -> Tensor {
    let (mut reg, inputs) = read_nodes(registry(), inputs);
    if reg.trace.recorded >= MAX_NODES {
        let full = reg.restart();
        reg.trace.broken = true;
        reg.bury(full);
    }
    let node = reg.trace.record(op, shape, inputs, location);
    let inner = make(node);
    reg.pending.insert(inner.id, Arc::downgrade(&inner));
    if reg.buried > GRAVEYARD_SLACK {
        reg.reap(REAPED_PER_RECORD);
    }
    Tensor(inner)
}

/// Frees a few graveyard entries; false once it is empty. For the time a program runs.
pub(crate) fn reap_while_executing() -> bool {
    let mut reg = registry();
    reg.reap(REAPED_PER_LOOK);
    !reg.graveyard.is_empty()
}

pub(crate) fn pending_remove(id: u64) {
    registry().remove_pending(id);
}

/// A new tensor (from `make`) holding the value of `t`, registered as pending if it is.
pub(crate) fn alias(t: &Tensor, make: impl FnOnce(NodeRef) -> Arc<TensorInner>) -> Tensor {
    let (mut reg, nodes) = read_nodes(registry(), &[t]);
    let node = nodes.into_iter().next().expect("one tensor, one node");
    let pending = !matches!(node.op, Op::Data(_));
    let inner = make(node);
    if pending {
        reg.pending.insert(inner.id, Arc::downgrade(&inner));
    }
    Tensor(inner)
}

/// Gives `target` the value of `value` (an in-place update).
pub(crate) fn rebind(target: &Tensor, value: &Tensor) {
    let (mut reg, nodes) = read_nodes(registry(), &[value]);
    let node = nodes.into_iter().next().expect("one tensor, one node");
    let pending = !matches!(node.op, Op::Data(_));
    let old = target.replace_node(node);
    match (matches!(old.op, Op::Data(_)), pending) {
        (true, true) => {
            reg.pending.insert(target.0.id, Arc::downgrade(&target.0));
        }
        (false, false) => reg.remove_pending(target.0.id),
        _ => {}
    }
    drop(reg);
    drop(old);
}

/// For a full sync: every live pending tensor (oldest first) and the trace that recorded them,
/// taken together so that nodes recorded meanwhile go to the next trace.
pub(crate) fn take() -> (Vec<Tensor>, Trace) {
    let mut reg = registry();
    let mut live: Vec<Tensor> =
        reg.pending.values().filter_map(|w| w.upgrade().map(Tensor)).collect();
    live.sort_by_key(|t| t.0.id);
    (live, reg.restart())
}

/// Hands a synced trace's nodes to the graveyard.
pub(crate) fn bury(trace: Trace) {
    registry().bury(trace);
}

/// What one trace recorded, as far as a sync needs it (the nodes carry the rest: their position,
/// their users, their place among the leaves).
pub(crate) struct Trace {
    gen: u64,
    /// Nodes recorded so far.
    recorded: u32,
    /// Nodes nothing recorded uses (yet): the graph's sinks.
    leaves: Vec<NodeRef>,
    /// Device data the nodes read, numbered by first use, with the edges to each.
    params: Vec<NodeRef>,
    param_edges: Vec<u32>,
    param_of: FastMap<usize, u32>,
    /// Host scalars, one slot per (value, dtype, line): see `exec::graph` on why per line.
    scalars: Vec<f64>,
    scalar_of: FastMap<(u64, DType, u64), u32>,
    /// Sum of the recorded nodes' shares of the key, less those the sync found unneeded.
    sum: u64,
    /// A node's input was recorded by an older trace: this trace cannot describe the graph.
    broken: bool,
}

/// Which recorded nodes a full sync outputs.
pub(crate) struct Outputs {
    /// Distinct output nodes, by position in the trace.
    positions: Vec<u32>,
    /// For each root, which output holds it.
    of_root: Vec<usize>,
}

impl Trace {
    const fn empty(gen: u64) -> Trace {
        Trace {
            gen,
            recorded: 0,
            leaves: Vec::new(),
            params: Vec::new(),
            param_edges: Vec::new(),
            param_of: HashMap::with_hasher(BuildHasherDefault::new()),
            scalars: Vec::new(),
            scalar_of: HashMap::with_hasher(BuildHasherDefault::new()),
            sum: 0,
            broken: false,
        }
    }

    fn record(
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
                self.scalars.push(value);
            }
            refs.push(SCALAR_SLOT | slot as u64);
        }
        self.sum = self.sum.wrapping_add(share(&node, &refs));
        node.trace_leaf_at.store(self.leaves.len() as u32, Relaxed);
        self.leaves.push(node.clone());
        node
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
            sum = sum.wrapping_sub(share(node, &self.references(node)));
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
    /// cache hit needs. `donate`: whether inputs only this graph refers to may be donated.
    pub fn graph(&self, roots: &[NodeRef], outputs: Outputs, donate: bool) -> Graph<'_> {
        let data = self
            .params
            .iter()
            .map(|p| match &p.op {
                Op::Data(buffer) => buffer.clone(),
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
        };
        if donate {
            self.donate(&mut g, roots);
        }
        let mut h = FastHasher::default();
        h.write_u64(TRACE_KEY);
        h.write_u64(self.sum);
        for p in &self.params {
            h.write_u64(p.hash);
        }
        h.write_u64(self.scalars.len() as u64);
        for &o in &g.outputs {
            h.write_u64(o as u64);
        }
        for &o in &g.root_outputs {
            h.write_u64(o as u64);
        }
        for &(param, output) in &g.donated {
            h.write_u64(((param as u64) << 32) | output as u64);
        }
        g.key = h.finish();
        g
    }

    /// Donates every parameter that nothing but this trace's edges refers to (the parameter list
    /// holds one more reference): see `graph::donations`.
    fn donate(&self, g: &mut Graph, roots: &[NodeRef]) {
        let mut outputs: Vec<&Shape> = vec![&roots[0].shape; g.outputs.len()];
        for (root, &o) in roots.iter().zip(&g.root_outputs) {
            outputs[o] = &root.shape;
        }
        let candidates = self.params.iter().enumerate().map(|(p, node)| {
            (p, &**node, Arc::strong_count(node) == self.param_edges[p] as usize + 1)
        });
        g.donated = donations(candidates, &outputs);
    }

    /// Lays the graph out for lowering and its summary: the parameters, then every node the roots
    /// need, in recording order. Outputs become indices into that order. Only a compile needs it.
    pub fn lay_out<'a>(&'a self, g: &mut Graph<'a>, roots: &'a [NodeRef], epoch: u64) {
        // The nodes the roots need: walked once (marked with the epoch), then put in order.
        let mut needed: Vec<&'a Node> = Vec::new();
        let mut stack: Vec<&'a Node> = Vec::new();
        for root in roots {
            if root.visited_in(epoch).is_none() {
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

/// How a node refers to its inputs (parameter number or position in the trace) and, for a
/// scalar, to its slot.
type References = smallvec::SmallVec<[u64; 3]>;

/// A node's share of the key: its structure, its position, and its references.
fn share(node: &Node, refs: &[u64]) -> u64 {
    let mut h = FastHasher::default();
    h.write_u64(node.hash);
    h.write_u64(node.trace_seq as u64);
    for &r in refs {
        h.write_u64(r);
    }
    h.finish()
}

fn scalar_key(node: &Node, value: f64) -> (u64, DType, u64) {
    (value.to_bits(), node.shape.dtype, node.location.site_id())
}

/// Hashes tensor ids (already unique) with one multiplication.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 ids are hashed; anything else still hashes, just slower.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E3779B97F4A7C15);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i.wrapping_mul(0x9E3779B97F4A7C15);
    }
}
