//! How every call from Python into the engine runs: at the caller's Python line, with Python's
//! `no_grad` mode applied, and with panics and errors turned into Python exceptions.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;
use xlaprof_core::location::{with_shared_location, ExternalLocation};
use xlaprof_core::Tensor;

use super::errors::{engine_error, guarded};
use super::location;
use super::tensor::PyTensor;

thread_local! {
    /// Depth of `with xp.no_grad():` blocks on this thread.
    static NO_GRAD_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Whether a call being timed as tracing runs on this thread (only the outermost counts: a
    /// torch op's lowering calls the engine's ops in turn).
    static TIMING: Cell<bool> = const { Cell::new(false) };
    /// Nanoseconds this thread spent in syncs and reads, which are not tracing.
    static WAITED_NS: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f`, a call that records ops, and, while a profile records, adds the time it took to
/// tracing at `here()`, the caller's line (less the syncs and reads inside it). The outermost
/// call only.
pub(crate) fn timed<R>(
    here: impl FnOnce() -> Option<Arc<ExternalLocation>>,
    f: impl FnOnce() -> R,
) -> R {
    if !xlaprof_core::events::enabled() || TIMING.with(Cell::get) {
        return f();
    }
    struct Outermost;
    impl Drop for Outermost {
        fn drop(&mut self) {
            TIMING.with(|t| t.set(false));
        }
    }
    TIMING.with(|t| t.set(true));
    let _outermost = Outermost;
    let (start, waited) = (Instant::now(), WAITED_NS.with(Cell::get));
    let result = f();
    let took = start.elapsed().as_nanos() as u64;
    let waited = WAITED_NS.with(Cell::get).saturating_sub(waited);
    if let Some(here) = here() {
        let here = xlaprof_core::location::SourceLocation::External(here);
        xlaprof_core::events::traced(&here, took.saturating_sub(waited));
    }
    result
}

pub(crate) fn enter_no_grad() {
    NO_GRAD_DEPTH.with(|d| d.set(d.get() + 1));
}

pub(crate) fn exit_no_grad() {
    NO_GRAD_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
}

pub(crate) fn grad_enabled() -> bool {
    NO_GRAD_DEPTH.with(|d| d.get() == 0)
}

/// Runs an engine call located at the Python caller's line.
pub(crate) fn traced<R>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> xlaprof_core::Result<R>,
) -> PyResult<R> {
    let (here, grad) = (location::current(py), grad_enabled());
    // The line for the timer, cloned only while a profile records (an op's hot path otherwise).
    let at = if xlaprof_core::events::enabled() { here.clone() } else { None };
    timed(|| at, || guarded(what, || in_mode(here, grad, f).map_err(engine_error)))
}

/// Records an op at the Python caller's line (see [`traced`]); its result is a new `Tensor`.
pub(crate) fn record(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> xlaprof_core::Result<Tensor>,
) -> PyResult<PyTensor> {
    traced(py, what, f).map(PyTensor::new)
}

/// Like [`traced`], with the GIL released while the engine works (syncs, reads): other Python
/// threads run meanwhile. The location and the grad mode are read first, on this thread.
pub(crate) fn traced_detached<R: Send>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> xlaprof_core::Result<R> + Send,
) -> PyResult<R> {
    // Syncs and reads: a library's line is reported with the user's line that called into it.
    let (here, grad) = (location::current_with_caller(py), grad_enabled());
    let start = xlaprof_core::events::enabled().then(Instant::now);
    let result = guarded(what, || py.detach(move || in_mode(here, grad, f)).map_err(engine_error));
    if let Some(start) = start {
        not_tracing(start.elapsed().as_nanos() as u64);
    }
    result
}

/// Takes `ns` this thread spent on something else (a sync, a read, an op run on the CPU) out of
/// the tracing time of the call timed now.
pub(crate) fn not_tracing(ns: u64) {
    WAITED_NS.with(|w| w.set(w.get().saturating_add(ns)));
}

/// Runs `f` at `here` (when a Python frame was found), under `no_grad` unless `grad`.
fn in_mode<R>(
    here: Option<Arc<ExternalLocation>>,
    grad: bool,
    f: impl FnOnce() -> xlaprof_core::Result<R>,
) -> xlaprof_core::Result<R> {
    let run = || match here {
        Some(l) => with_shared_location(l, f),
        None => f(),
    };
    if grad {
        run()
    } else {
        xlaprof_core::no_grad(run)
    }
}
