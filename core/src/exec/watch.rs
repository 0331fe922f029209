//! What `detect_anomaly()` needs from the executor: whether it is on (a block, or
//! `XLAPROF_DEBUG_NANS=1` for the whole program), donation off while it is (a graph's inputs must
//! survive it, to run it again with its intermediates exposed), and the last sync's graph kept
//! for the check above the executor (the anomaly module, which uses the tensor API).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use crate::ir::NodeRef;
use crate::location::SourceLocation;

static BLOCKS: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The last sync on this thread, while anomalies are looked for.
    static LAST: RefCell<Option<Synced>> = const { RefCell::new(None) };
    /// The check itself runs graphs: they are not checked in turn.
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

/// A sync's graph, kept for the check: its roots as they were (pending), and their values now.
pub(crate) struct Synced {
    pub roots: Vec<NodeRef>,
    pub outputs: Vec<NodeRef>,
    pub location: SourceLocation,
    /// Whether its results were all finite, when its program computed that (`None`: it did
    /// not, a graph over a mesh: a graph of its own checks them).
    pub finite: Option<bool>,
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
    LAST.with(|l| *l.borrow_mut() = Some(synced));
}

/// The last sync's graph, once.
pub(crate) fn take() -> Option<Synced> {
    LAST.with(|l| l.borrow_mut().take())
}

/// Runs `f` (the check's own graphs) unchecked.
pub(crate) fn unchecked<R>(f: impl FnOnce() -> R) -> R {
    CHECKING.with(|c| c.set(true));
    let out = f();
    CHECKING.with(|c| c.set(false));
    out
}
