//! A tensor's value as the trace and the sync see it: an id and the current node, pending IR or
//! device data once computed. The tensor API holds one in each tensor (`Holder`); the trace and
//! the executor need no more than this, so they do not depend on the API built above them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::ir::{NodeRef, Op};

pub(crate) struct Value {
    /// Unique for the process; the order of ids is the order tensors were created in.
    pub id: u64,
    /// A mutex because in-place updates (optimizers) rebind values; held only for a pointer swap.
    node: Mutex<NodeRef>,
    /// What the user calls it (a parameter's name), given to the data each sync makes of it.
    name: OnceLock<Arc<str>>,
}

/// What owns a [`Value`]: the trace keeps weak references to holders of pending values, so that a
/// full sync can find every live one.
pub(crate) trait Holder: Send + Sync + 'static {
    fn value(&self) -> &Value;
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Value {
    pub fn new(node: NodeRef) -> Value {
        Value {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            node: Mutex::new(node),
            name: OnceLock::new(),
        }
    }

    pub fn name(&self) -> Option<&Arc<str>> {
        self.name.get()
    }

    /// Names the value, and its data when it is data now (the first name given is kept).
    pub fn set_name(&self, name: Arc<str>) {
        if let Op::Data(data) = &self.node().op {
            data.set_name(name.clone());
        }
        let _ = self.name.set(name);
    }

    /// The current node.
    pub fn node(&self) -> NodeRef {
        self.node.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// True once the value is device data (no pending computation).
    pub fn is_data(&self) -> bool {
        matches!(self.node.lock().unwrap_or_else(|p| p.into_inner()).op, Op::Data(_))
    }

    /// Swaps in a node of the same shape and returns the old one (see `trace::rebind`).
    pub fn replace_node(&self, node: NodeRef) -> NodeRef {
        let mut slot = self.node.lock().unwrap_or_else(|p| p.into_inner());
        debug_assert_eq!(node.shape, slot.shape);
        std::mem::replace(&mut *slot, node)
    }

    /// Makes this value the device data a sync computed for it.
    pub fn set_data(&self, data: NodeRef) {
        debug_assert!(matches!(data.op, Op::Data(_)));
        if let (Some(name), Op::Data(d)) = (self.name.get(), &data.op) {
            d.set_name(name.clone());
        }
        let old = self.replace_node(data);
        if !matches!(old.op, Op::Data(_)) {
            super::pending_remove(self.id);
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        let node = self.node.get_mut().unwrap_or_else(|p| p.into_inner());
        if !matches!(node.op, Op::Data(_)) {
            super::pending_remove(self.id);
        }
    }
}
