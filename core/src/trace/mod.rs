//! The trace: every live tensor whose value is pending IR, and what a full sync needs to know
//! about the nodes recorded since the last one.
//!
//! Recording order is a topological order, so a full sync (`sync()`, `step()`) need not walk the
//! graph: each node's share of the structural key is added up as it is recorded, and the sync adds
//! only what it alone knows: which tensors are live, which recorded nodes none of them needs,
//! which inputs can be donated. A cache hit then costs time in the number of live tensors, inputs
//! and unneeded nodes, not in the size of the graph (the 1,000-step chain of `xlaprof bench` records
//! 2,004 nodes); only a compile lays the graph out. Whatever the trace cannot vouch for (a node
//! whose input was recorded before the trace was last restarted) sends the sync back to the graph
//! walk of `exec::graph`, as do value reads, which compute a part.
//!
//! The trace holds its leaves (nodes nothing recorded uses yet), and through them every node it
//! recorded, until the sync. The sync's graph then goes to a graveyard, freed while the next sync's
//! program runs on the device (host work the device's hides), or a few nodes per newly recorded
//! node when it grows large: a graph of thousands of nodes takes hundreds of microseconds to free,
//! which would otherwise lengthen every sync. One step's graph, with the buffers it read, is kept
//! that much longer.

mod recording;
mod template;
mod value;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

pub(crate) use recording::Trace;
pub(crate) use template::{record_template, Template};
pub(crate) use value::{Holder, Value};

use crate::ir::{Inputs, Node, NodeRef, Op};
use crate::location::SourceLocation;
use crate::shape::Shape;

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

struct Registry {
    /// Live tensors holding pending IR, by id.
    pending: HashMap<u64, Weak<dyn Holder>, BuildHasherDefault<IdHasher>>,
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
            let Some(mut node) = self.graveyard.pop() else {
                // Nodes freed elsewhere (their last holder was not the graveyard) were not counted.
                self.buried = 0;
                return;
            };
            // `get_mut`, not `try_unwrap`: no copy of the node out of its allocation.
            if let Some(last) = Arc::get_mut(&mut node) {
                self.graveyard.extend(last.inputs.drain(..));
                self.buried = self.buried.saturating_sub(1);
            }
        }
    }
}

/// Syncs run one at a time: they mark nodes with the sync's epoch while laying out a graph, and a
/// new use of a node that a running sync computes must wait for it (see `read_nodes`).
static SYNC: Mutex<()> = Mutex::new(());

/// Holds off every other sync, and every new use of what this one computes, while it lives.
pub(crate) fn serialize() -> MutexGuard<'static, ()> {
    SYNC.lock().unwrap_or_else(|p| p.into_inner())
}

/// The nodes of `tensors`, read under the registry's lock for a new use. A node still pending
/// from a trace that a sync has taken is being computed by that sync right now, and the sync may
/// donate the inputs it reads: a new node built on it would need a deleted buffer later. So wait
/// for the sync, and read the tensors again (they are device data by then).
fn read_nodes(
    reg: MutexGuard<'static, Registry>,
    tensors: &[&Value],
) -> (MutexGuard<'static, Registry>, Inputs) {
    let nodes: Inputs = tensors.iter().map(|t| t.node()).collect();
    if !nodes.iter().any(|n| reg.stale(n)) {
        return (reg, nodes);
    }
    drop(reg);
    drop(nodes);
    drop(serialize());
    let reg = registry();
    // Still stale after that (a sync failed, or the trace outgrew its cap): the next full sync
    // then walks the graph.
    let nodes = tensors.iter().map(|t| t.node()).collect();
    (reg, nodes)
}

/// Records an op node over the values of `inputs`, and registers the holder `make` wraps it in
/// as pending.
pub(crate) fn record<H: Holder>(
    op: Op,
    shape: Shape,
    inputs: &[&Value],
    location: SourceLocation,
    make: impl FnOnce(NodeRef) -> Arc<H>,
) -> Arc<H> {
    let (mut reg, inputs) = read_nodes(registry(), inputs);
    let node = reg.record(op, shape, inputs, location);
    reg.hold(node, make)
}

/// A host scalar broadcast to `shape`, the operand of `x * 0.5`: the scalar node and its
/// broadcast recorded under one lock, and only the broadcast held. The scalar alone is never a
/// value anyone reads, so it gets no holder and no registry entry (half the cost of the op).
pub(crate) fn record_scalar_operand<H: Holder>(
    value: f64,
    shape: Shape,
    location: SourceLocation,
    make: impl FnOnce(NodeRef) -> Arc<H>,
) -> Arc<H> {
    let mut reg = registry();
    let node = reg.scalar_operand(value, &shape, &location);
    reg.hold(node, make)
}

/// `op(x, value)` for a host scalar of `x`'s dtype, where no gradient is recorded: the nodes of
/// `x.op(broadcast(scalar(value)))`, exactly as recorded one at a time (so the same key), under
/// one lock and with one holder, for the result (a third of the cost of three ops).
pub(crate) fn record_scalar_op<H: Holder>(
    op: Op,
    x: &Value,
    value: f64,
    location: SourceLocation,
    make: impl FnOnce(NodeRef) -> Arc<H>,
) -> Arc<H> {
    let (mut reg, mut inputs) = read_nodes(registry(), &[x]);
    let shape = inputs[0].shape.clone();
    let operand = reg.scalar_operand(value, &shape, &location);
    inputs.push(operand);
    let node = reg.record(op, shape, inputs, location);
    reg.hold(node, make)
}

impl Registry {
    /// Records a node (restarting a full trace first).
    fn record(&mut self, op: Op, shape: Shape, inputs: Inputs, loc: SourceLocation) -> NodeRef {
        if self.trace.recorded >= MAX_NODES {
            let full = self.restart();
            self.trace.broken = true;
            self.bury(full);
        }
        self.trace.record(op, shape, inputs, loc)
    }

    /// A host scalar broadcast to `shape`: recorded once per trace for each line, value and
    /// shape, and shared by every op that line records with it (the 1,000 `x * 0.5` of a loop
    /// read one operand, as its scalar slot already was one). The graph is the same computation;
    /// the trace records a third of the nodes and the compiler is handed fewer.
    fn scalar_operand(&mut self, value: f64, shape: &Shape, location: &SourceLocation) -> NodeRef {
        let key = (location.site_id(), value.to_bits(), shape.dtype);
        if let Some(operand) = self.trace.operand(&key, shape) {
            return operand;
        }
        let scalar_shape = Shape::new(shape.dtype, []);
        let scalar = self.record(Op::Scalar(value), scalar_shape, Inputs::new(), location.clone());
        let mut inputs = Inputs::new();
        inputs.push(scalar);
        // A 0-d operand maps to no output dimension: the dims list is empty (no allocation).
        let broadcast = Op::Broadcast { dims: Vec::new() };
        let operand = self.record(broadcast, shape.clone(), inputs, location.clone());
        self.trace.keep_operand(key, operand.clone());
        operand
    }

    /// The holder `make` wraps `node` in, registered as pending; and a few graveyard entries
    /// freed when it has grown large.
    fn hold<H: Holder>(&mut self, node: NodeRef, make: impl FnOnce(NodeRef) -> Arc<H>) -> Arc<H> {
        let holder = make(node);
        let weak: Weak<dyn Holder> = Arc::downgrade(&holder) as Weak<H>;
        self.pending.insert(holder.value().id, weak);
        if self.buried > GRAVEYARD_SLACK {
            self.reap(REAPED_PER_RECORD);
        }
        holder
    }
}

/// A graveyard of at most this many recorded nodes is freed whole when a sync starts (a few
/// microseconds): its graph may still hold the buffers this sync reads, and a buffer held there
/// cannot be donated, so an evaluation step between two training steps would give the next
/// training step a graph without donation, compiled once more. Larger graveyards stay deferred.
const FREED_AT_SYNC: usize = 1024;

/// Frees the graveyard when it is small (see [`FREED_AT_SYNC`]); called as a sync starts.
pub(crate) fn free_small_graveyard() {
    let mut reg = registry();
    if reg.buried <= FREED_AT_SYNC {
        while !reg.graveyard.is_empty() {
            reg.reap(REAPED_PER_LOOK);
        }
        reg.buried = 0;
    }
}

/// Frees the whole graveyard; false when it was empty. A buried graph still holds the device
/// data it read, which a captured graph's run would otherwise take for a holder of its own
/// (`exec::replay`: the lazy code between compiled graphs reads their arguments).
pub(crate) fn free_graveyard() -> bool {
    let mut reg = registry();
    if reg.graveyard.is_empty() {
        return false;
    }
    while !reg.graveyard.is_empty() {
        reg.reap(REAPED_PER_LOOK);
    }
    reg.buried = 0;
    true
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

/// A new holder (from `make`) of the value of `t`, registered as pending if it is.
pub(crate) fn alias<H: Holder>(t: &Value, make: impl FnOnce(NodeRef) -> Arc<H>) -> Arc<H> {
    let (mut reg, nodes) = read_nodes(registry(), &[t]);
    let node = nodes.into_iter().next().expect("one tensor, one node");
    let pending = !matches!(node.op, Op::Data(_));
    let holder = make(node);
    if pending {
        let weak: Weak<dyn Holder> = Arc::downgrade(&holder) as Weak<H>;
        reg.pending.insert(holder.value().id, weak);
    }
    holder
}

/// Gives `target` the value of `value` (an in-place update).
pub(crate) fn rebind<H: Holder>(target: &Arc<H>, value: &Value) {
    let (mut reg, nodes) = read_nodes(registry(), &[value]);
    let node = nodes.into_iter().next().expect("one tensor, one node");
    let pending = !matches!(node.op, Op::Data(_));
    let old = target.value().replace_node(node);
    let id = target.value().id;
    match (matches!(old.op, Op::Data(_)), pending) {
        (true, true) => {
            let weak: Weak<dyn Holder> = Arc::downgrade(target) as Weak<H>;
            reg.pending.insert(id, weak);
        }
        (false, false) => reg.remove_pending(id),
        _ => {}
    }
    drop(reg);
    drop(old);
}

/// For a full sync: every live pending tensor (oldest first) and the trace that recorded them,
/// taken together so that nodes recorded meanwhile go to the next trace.
pub(crate) fn take() -> (Vec<Arc<dyn Holder>>, Trace) {
    let mut reg = registry();
    let mut live: Vec<Arc<dyn Holder>> = reg.pending.values().filter_map(Weak::upgrade).collect();
    live.sort_by_key(|h| h.value().id);
    (live, reg.restart())
}

/// Every live pending tensor, in no order, the trace left as it is (for a value read).
pub(crate) fn pending() -> Vec<Arc<dyn Holder>> {
    registry().pending.values().filter_map(Weak::upgrade).collect()
}

/// How many live tensors are pending besides `tensors` (what a value read of them leaves for
/// a later graph).
pub(crate) fn pending_besides(tensors: &[&Value]) -> usize {
    let reg = registry();
    let live = reg.pending.iter().filter(|(_, w)| w.strong_count() > 0);
    live.filter(|(id, _)| !tensors.iter().any(|t| t.id == **id)).count()
}

/// Whether any live tensor is pending (what a full sync would compute).
pub(crate) fn has_pending() -> bool {
    registry().pending.values().any(|w| w.strong_count() > 0)
}

/// Hands a synced trace's nodes to the graveyard.
pub(crate) fn bury(trace: Trace) {
    registry().bury(trace);
}

/// Hands nodes kept past their sync (a checked sync's graph, see `anomaly`) to the graveyard:
/// freed while the next program runs, not where the last holder lets go of them.
pub(crate) fn bury_nodes(nodes: Vec<NodeRef>) {
    let mut reg = registry();
    reg.buried += nodes.len();
    reg.graveyard.extend(nodes);
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
