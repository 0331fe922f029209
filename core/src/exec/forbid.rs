//! `forbid_syncs()`: a block that promises not to sync. Inside it, on the thread that made it,
//! running a graph (a sync, a step, a value read of a pending tensor) or reading a value is an
//! error at the line that did it, instead of a stall found later in a profile. Recording ops,
//! shapes and `repr` never count: they do not touch the device.

use std::cell::Cell;

use crate::error::{Error, Result};
use crate::location::SourceLocation;

thread_local! {
    /// How many `forbid_syncs()` blocks are open on this thread.
    static FORBIDDEN: Cell<u32> = const { Cell::new(0) };
}

/// Forbids syncs and value reads on this thread until the guard is dropped (blocks nest).
#[must_use = "syncs are allowed again when this guard is dropped"]
pub fn forbid_syncs() -> SyncsForbidden {
    FORBIDDEN.with(|f| f.set(f.get().saturating_add(1)));
    SyncsForbidden(std::marker::PhantomData)
}

/// Allows syncs again when dropped. Not `Send`: the block belongs to the thread that opened it.
pub struct SyncsForbidden(std::marker::PhantomData<*const ()>);

impl Drop for SyncsForbidden {
    fn drop(&mut self) {
        FORBIDDEN.with(|f| f.set(f.get().saturating_sub(1)));
    }
}

/// Whether a `forbid_syncs()` block is open on this thread.
pub(crate) fn is_open() -> bool {
    FORBIDDEN.with(|f| f.get()) > 0
}

/// An error if a `forbid_syncs()` block is open on this thread: `what` happened at `location`.
pub(crate) fn check(what: &str, location: &SourceLocation) -> Result<()> {
    if !is_open() {
        return Ok(());
    }
    let error = Error::SyncForbidden { what: what.to_string(), location: location.clone() };
    crate::events::caught(crate::events::Tool::ForbiddenSync, &error.to_string(), location.clone());
    Err(error)
}
