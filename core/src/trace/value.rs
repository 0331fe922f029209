//! A tensor's value as the trace and the sync see it: an id and the current node, pending IR or
//! device data once computed. The tensor API holds one in each tensor (`Holder`); the trace and
//! the executor need no more than this, so they do not depend on the API built above them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::ir::{DeviceData, NodeRef, Op, Replaces};

pub(crate) struct Value {
    /// Unique for the process; the order of ids is the order tensors were created in.
    pub id: u64,
    /// A mutex because in-place updates (optimizers) rebind values; held only for a pointer swap.
    slot: Mutex<Slot>,
    /// What the user calls it (a parameter's name), given to the data each sync makes of it.
    name: OnceLock<Arc<str>>,
}

/// A value's node, and the device data a pending node takes the place of.
struct Slot {
    node: NodeRef,
    /// The buffer this value held before an in-place write made it pending (or that the value it
    /// took the place of held: `take_place_of`), which the sync donates to this value's own
    /// output before pairing the rest by shape (`ir::graph::donations`): paired by shape alone,
    /// a parameter's buffer could go to its optimizer state's update, and XLA then copied both
    /// (an AdamW step over 12 tensors had 48 copies, and took 1.6 times as long).
    replaces: Option<Weak<DeviceData>>,
}

impl Slot {
    /// The data a write over this slot replaces: the data it holds, else what it replaces.
    fn replaced(&self) -> Option<Weak<DeviceData>> {
        match &self.node.op {
            Op::Data(d) => Some(Arc::downgrade(d)),
            _ => self.replaces.clone(),
        }
    }
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
            slot: Mutex::new(Slot { node, replaces: None }),
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
        self.slot().node.clone()
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True once the value is device data (no pending computation).
    pub fn is_data(&self) -> bool {
        matches!(self.slot().node.op, Op::Data(_))
    }

    /// The device data whose place this pending value takes, by address (see
    /// [`Slot::replaces`]); None once it is data.
    pub fn replaced(&self) -> Replaces {
        Self::replaced_in(&self.slot())
    }

    /// The current node and [`Value::replaced`], under one lock (a sync asks it of every tensor).
    pub fn node_and_replaced(&self) -> (NodeRef, Replaces) {
        let slot = self.slot();
        (slot.node.clone(), Self::replaced_in(&slot))
    }

    fn replaced_in(slot: &Slot) -> Replaces {
        match slot.node.op {
            Op::Data(_) => None,
            _ => slot.replaces.as_ref().map(Weak::as_ptr),
        }
    }

    /// This value is an in-place write's result over `old`, a value of another tensor object
    /// (the torch bridge gives a written tensor a new value): it takes the place of the data
    /// `old` holds or replaces.
    pub fn take_place_of(&self, old: &Value) {
        let replaced = old.slot().replaced();
        self.slot().replaces = replaced;
    }

    /// Swaps in a node of the same shape and returns the old one (see `trace::rebind`).
    pub fn replace_node(&self, node: NodeRef) -> NodeRef {
        let mut slot = self.slot();
        debug_assert_eq!(node.shape, slot.node.shape);
        slot.replaces = slot.replaced();
        std::mem::replace(&mut slot.node, node)
    }

    /// Makes this value the device data a sync computed for it.
    pub fn set_data(&self, data: NodeRef) {
        debug_assert!(matches!(data.op, Op::Data(_)));
        if let (Some(name), Op::Data(d)) = (self.name.get(), &data.op) {
            d.set_name(name.clone());
        }
        let old = {
            let mut slot = self.slot();
            slot.replaces = None;
            std::mem::replace(&mut slot.node, data)
        };
        if !matches!(old.op, Op::Data(_)) {
            super::pending_remove(self.id);
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(|p| p.into_inner());
        if !matches!(slot.node.op, Op::Data(_)) {
            super::pending_remove(self.id);
        }
    }
}
