//! The one place that turns Rust failures into Python exceptions. Panics never cross into
//! Python: every call from Python runs under `guarded`, which turns one into `InternalError`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::{create_exception, PyErr};

create_exception!(_native, XlaprofError, PyException, "Base class of xlaprof's errors.");
create_exception!(
    _native,
    ShapeError,
    PyValueError,
    "An op was given shapes or dtypes it cannot take (raised where the op is recorded)."
);
create_exception!(_native, AutogradError, PyRuntimeError, "backward() cannot run as asked.");
create_exception!(
    _native,
    PluginError,
    PyRuntimeError,
    "The PJRT plugin could not be found or loaded."
);
create_exception!(_native, XlaError, PyRuntimeError, "XLA (through PJRT) reported an error.");
create_exception!(_native, ProfileError, PyRuntimeError, "A profile could not be read or written.");
create_exception!(
    _native,
    InternalError,
    PyRuntimeError,
    "A bug in xlaprof (a panic caught at the Python boundary); please report it."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("XlaprofError", py.get_type::<XlaprofError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("AutogradError", py.get_type::<AutogradError>())?;
    m.add("PluginError", py.get_type::<PluginError>())?;
    m.add("XlaError", py.get_type::<XlaError>())?;
    m.add("ProfileError", py.get_type::<ProfileError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}

pub(crate) fn engine_error(e: xlaprof_core::Error) -> PyErr {
    use xlaprof_core::Error as E;
    let message = e.to_string();
    match e {
        E::Shape { .. } => ShapeError::new_err(message),
        E::Autograd { .. } => AutogradError::new_err(message),
        E::PluginNotFound { .. }
        | E::PluginLoad { .. }
        | E::NotAPjrtPlugin { .. }
        | E::ApiVersion { .. } => PluginError::new_err(message),
        _ => XlaError::new_err(message),
    }
}

pub(crate) fn profile_error(e: xlaprof_profiler::Error) -> PyErr {
    ProfileError::new_err(e.to_string())
}

/// Runs `f`, turning a panic into `InternalError` instead of unwinding into Python.
pub(crate) fn guarded<R>(what: &str, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            Err(InternalError::new_err(format!("{what}: internal error: {detail}")))
        }
    }
}
