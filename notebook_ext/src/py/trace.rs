//! How every call from Python into the engine runs: at the caller's Python line, with Python's
//! `no_grad` mode applied, and with panics and errors turned into Python exceptions.

use std::cell::Cell;

use pyo3::prelude::*;
use xlaprof_core::location::with_shared_location;

use super::errors::{engine_error, guarded};
use super::location;

thread_local! {
    /// Depth of `with xp.no_grad():` blocks on this thread.
    static NO_GRAD_DEPTH: Cell<u32> = const { Cell::new(0) };
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
    let here = location::current(py);
    guarded(what, || in_mode(here, f).map_err(engine_error))
}

/// Like [`traced`], with the GIL released while the engine works (syncs, reads): other Python
/// threads run meanwhile.
pub(crate) fn traced_detached<R: Send>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> xlaprof_core::Result<R> + Send,
) -> PyResult<R> {
    let here = location::current(py);
    let grad = grad_enabled();
    guarded(what, || {
        py.detach(move || {
            let run = move || match here {
                Some(l) => with_shared_location(l, f),
                None => f(),
            };
            if grad {
                run()
            } else {
                xlaprof_core::no_grad(run)
            }
        })
        .map_err(engine_error)
    })
}

fn in_mode<R>(
    here: Option<std::sync::Arc<xlaprof_core::location::ExternalLocation>>,
    f: impl FnOnce() -> xlaprof_core::Result<R>,
) -> xlaprof_core::Result<R> {
    let run = || match here {
        Some(l) => with_shared_location(l, f),
        None => f(),
    };
    if grad_enabled() {
        run()
    } else {
        xlaprof_core::no_grad(run)
    }
}
