//! What `detect_anomaly()` needs from the executor: whether it is on (a block, or
//! `XLAPROF_DEBUG_NANS=1` for the whole program), donation off while it is (a graph's inputs must
//! survive it, to run it again with its intermediates exposed), and the syncs' graphs kept for
//! the check above the executor (the anomaly module, which uses the tensor API). A sync whose
//! program runs ahead (GPUs) is checked at the next sync, wait or the block's end: reading its
//! verdict at once would wait for its program, and the host could no longer run ahead.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::ir::{DeviceData, NodeRef};
use crate::location::SourceLocation;

static BLOCKS: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The syncs on this thread not checked yet, oldest first (at most two: the one checked
    /// next, and one that ran ahead), while anomalies are looked for.
    static UNCHECKED: RefCell<Vec<Synced>> = const { RefCell::new(Vec::new()) };
    /// The check itself runs graphs: they are not checked in turn.
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

/// A sync's graph, kept for the check: its roots as they were (pending), and their values now.
pub(crate) struct Synced {
    pub roots: Vec<NodeRef>,
    pub outputs: Vec<NodeRef>,
    pub location: SourceLocation,
    /// The program's verdict on its results, on the device: 0 when all are finite (`None`: it
    /// did not compute one, a graph over a mesh: a graph of its own checks them).
    pub marker: Option<Arc<DeviceData>>,
    /// Its program may still be running: its verdict is read later.
    pub ran_ahead: bool,
}

/// Whether syncs are checked for NaN and Inf now.
pub(crate) fn detecting() -> bool {
    static FROM_ENV: OnceLock<bool> = OnceLock::new();
    let env = *FROM_ENV.get_or_init(|| {
        std::env::var(crate::config::DEBUG_NANS).is_ok_and(|v| !v.is_empty() && v != "0")
    });
    (env || BLOCKS.load(Ordering::Relaxed) > 0) && !CHECKING.with(Cell::get)
}

/// Looks for NaN and Inf in what every sync computes until the guard is dropped.
#[must_use = "anomalies are looked for until this guard is dropped"]
pub fn detect_anomalies() -> DetectingAnomalies {
    BLOCKS.fetch_add(1, Ordering::Relaxed);
    DetectingAnomalies(())
}

pub struct DetectingAnomalies(());

impl Drop for DetectingAnomalies {
    fn drop(&mut self) {
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) fn keep(synced: Synced) {
    UNCHECKED.with(|l| l.borrow_mut().push(synced));
}

/// The syncs to check now, oldest first: all of them, or (`all` false) all but the newest
/// when its program ran ahead.
pub(crate) fn take(all: bool) -> Vec<Synced> {
    UNCHECKED.with(|l| {
        let mut l = l.borrow_mut();
        let keep_newest = usize::from(!all && l.last().is_some_and(|s| s.ran_ahead));
        let checkable = l.len() - keep_newest;
        l.drain(..checkable).collect() // nothing allocated when there is nothing to check
    })
}

/// Runs `f` (the check's own graphs) unchecked.
pub(crate) fn unchecked<R>(f: impl FnOnce() -> R) -> R {
    CHECKING.with(|c| c.set(true));
    let out = f();
    CHECKING.with(|c| c.set(false));
    out
}
