//! The lazy IR: one node type over one closed op enum.
//!
//! A node is immutable once built and carries its structural hash, computed from its op, its
//! attributes, its shape and its inputs' hashes, never from data. Two graphs with equal structure
//! therefore have equal keys, and the key is the compiled-graph cache key.

mod data;
mod def;
mod graph;
mod op;

use std::hash::Hasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

pub use data::{DeviceData, OnMesh};

/// The seed of the next random draw that names none (`manual_seed` sets it): one stream for the
/// process, which the runs of a captured graph draw from too (`exec::replay`).
static NEXT_SEED: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

pub fn next_seed() -> i64 {
    NEXT_SEED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub fn manual_seed(seed: i64) {
    NEXT_SEED.store(seed, std::sync::atomic::Ordering::Relaxed);
}
pub use def::{Attr, NodeDef};
pub(crate) use graph::{
    data_held_once, donations, keys, needed, replaced_per_output, scalar_key, share, Donate, Graph,
    References, Replaces, ScalarKey, PARAMETER, SCALAR_SLOT,
};
pub use op::{
    qr_taus, BinaryOp, CompareOp, FftKind, LuOutput, Op, OpKind, Recursion, ReduceKind, UnaryOp,
};

use crate::location::SourceLocation;
use crate::shape::Shape;

pub type NodeRef = Arc<Node>;

/// A node's inputs: inline up to two (nearly every op), so a node is one allocation.
pub type Inputs = smallvec::SmallVec<[NodeRef; 2]>;

pub struct Node {
    pub op: Op,
    pub shape: Shape,
    pub inputs: Inputs,
    pub location: SourceLocation,
    /// Structural hash of the subgraph rooted here (op, attributes, shapes; not data).
    pub hash: u64,
    /// The trace generation that recorded this node, and its position in that trace's recording
    /// order (see `trace`); generation 0 for device data, which no trace records.
    pub(crate) trace_gen: u64,
    pub(crate) trace_seq: u32,
    /// Edges from nodes of the same trace to this one, and (while it has none) its place in the
    /// trace's list of leaves. Changed only under the trace's lock.
    pub(crate) trace_users: AtomicU32,
    pub(crate) trace_leaf_at: AtomicU32,
    /// The sync that last visited this node, and the node's position in that sync's post-order:
    /// visiting is one atomic compare instead of a hash-set lookup. Syncs are serialized.
    pub(crate) visit_epoch: AtomicU64,
    pub(crate) visit_index: AtomicU32,
}

impl Node {
    pub fn new(op: Op, shape: Shape, inputs: Inputs, location: SourceLocation) -> NodeRef {
        Node::traced(op, shape, inputs, location, 0, 0)
    }

    /// A node recorded by trace generation `trace_gen` at position `trace_seq`.
    pub(crate) fn traced(
        op: Op,
        shape: Shape,
        inputs: Inputs,
        location: SourceLocation,
        trace_gen: u64,
        trace_seq: u32,
    ) -> NodeRef {
        let mut h = FastHasher::default();
        op.hash_structure(&mut h);
        h.write_u8(shape.dtype as u8);
        h.write_usize(shape.dims.len());
        for &d in &shape.dims {
            h.write_i64(d);
        }
        for input in &inputs {
            h.write_u64(input.hash);
        }
        Arc::new(Node {
            op,
            shape,
            inputs,
            location,
            hash: h.finish(),
            trace_gen,
            trace_seq,
            trace_users: AtomicU32::new(0),
            trace_leaf_at: AtomicU32::new(0),
            visit_epoch: AtomicU64::new(0),
            visit_index: AtomicU32::new(0),
        })
    }

    pub(crate) fn visited_in(&self, epoch: u64) -> Option<u32> {
        (self.visit_epoch.load(Ordering::Relaxed) == epoch)
            .then(|| self.visit_index.load(Ordering::Relaxed))
    }

    /// The index the current sync gave this node (valid once visited in its epoch).
    pub(crate) fn visit_index(&self) -> u32 {
        self.visit_index.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_visited(&self, epoch: u64, index: u32) {
        self.visit_index.store(index, Ordering::Relaxed);
        self.visit_epoch.store(epoch, Ordering::Relaxed);
    }
}

impl Drop for Node {
    /// Drops long chains iteratively: a 100,000-op chain would overflow the stack recursively.
    fn drop(&mut self) {
        let mut stack: Vec<NodeRef> = Vec::new();
        let free = |mut node: NodeRef, stack: &mut Vec<NodeRef>| {
            if let Some(last) = Arc::get_mut(&mut node) {
                stack.extend(last.inputs.drain(..));
            }
        };
        for input in self.inputs.drain(..) {
            free(input, &mut stack);
        }
        while let Some(node) = stack.pop() {
            free(node, &mut stack);
        }
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} -> {} ({} inputs)", self.op, self.shape, self.inputs.len())
    }
}

/// A small, fast, non-cryptographic 64-bit hasher for structural keys (FxHash-style mixing).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        // Final avalanche so that nearby inputs give unrelated keys.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51afd7ed558ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
        x ^ (x >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(SEED);
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64)
    }
}
