//! The one place that turns Rust failures into Python exceptions. Panics never cross into
//! Python: every call from Python runs under `guarded`, which turns one into `InternalError`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use pyo3::{create_exception, PyErr};

create_exception!(xlaprof, XlaprofError, PyException, "Base class of xlaprof's errors.");

/// xlaprof's exceptions below `XlaprofError`. Each also derives from the built-in exception it
/// refines, so both `except ValueError` and `except xp.XlaprofError` catch a `ShapeError`;
/// `create_exception!` takes one base, so these are made with `type()` when the module loads.
#[derive(Clone, Copy)]
pub(crate) enum Class {
    Shape,
    Sharding,
    Autograd,
    Sync,
    Anomaly,
    Break,
    Plugin,
    Xla,
    Profile,
    Internal,
}

/// The classes, in the order of `Class`.
static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

impl Class {
    const ALL: [Class; 10] = [
        Class::Shape,
        Class::Sharding,
        Class::Autograd,
        Class::Sync,
        Class::Anomaly,
        Class::Break,
        Class::Plugin,
        Class::Xla,
        Class::Profile,
        Class::Internal,
    ];

    /// The class's name, its docstring and the built-in exception it refines.
    fn spec(self, py: Python<'_>) -> (&'static str, &'static str, Bound<'_, PyType>) {
        let runtime = py.get_type::<PyRuntimeError>();
        match self {
            Class::Shape => (
                "ShapeError",
                "An op was given shapes or dtypes it cannot take (raised where the op is recorded).",
                py.get_type::<PyValueError>(),
            ),
            Class::Sharding => (
                "ShardingError",
                "A mesh or a sharding that cannot be (a device that does not exist, an axis the \
                 mesh lacks, a dimension its axes do not divide), or a sharded tensor used where \
                 it cannot be.",
                py.get_type::<PyValueError>(),
            ),
            Class::Autograd => ("AutogradError", "backward() cannot run as asked.", runtime),
            Class::Anomaly => (
                "AnomalyError",
                "A sync inside `detect_anomaly()` computed a NaN or an Inf; the message names the op \
                 that made the first, its line and its inputs' ranges.",
                runtime,
            ),
            Class::Break => (
                "BreakError",
                "What `XLAPROF_BREAK` (or `break_on`) breaks on happened: a recompile, a hidden sync or \
                 an op with no lowering; raised at the user's line with the explanation (a notebook's \
                 `%debug` stops there).",
                runtime,
            ),
            Class::Sync => (
                "SyncError",
                "A graph ran or a value was read inside `forbid_sync()` (raised at that line).",
                runtime,
            ),
            Class::Plugin => {
                ("PluginError", "The PJRT plugin could not be found, loaded or started.", runtime)
            }
            Class::Xla => ("XlaError", "XLA (through PJRT) reported an error.", runtime),
            Class::Profile => ("ProfileError", "A profile could not be read or written.", runtime),
            Class::Internal => (
                "InternalError",
                "A bug in xlaprof (a panic caught at the Python boundary); please report it.",
                runtime,
            ),
        }
    }

    /// An exception of this class with `message`.
    pub(crate) fn err(self, message: impl Into<String>) -> PyErr {
        let message = message.into();
        Python::attach(|py| match CLASSES.get(py) {
            Some(classes) => PyErr::from_type(classes[self as usize].bind(py).clone(), message),
            // Only before the module has loaded, when nothing can raise.
            None => PyRuntimeError::new_err(message),
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = py.get_type::<XlaprofError>();
    m.add("XlaprofError", &base)?;
    let mut classes = Vec::with_capacity(Class::ALL.len());
    for class in Class::ALL {
        let (name, doc, builtin) = class.spec(py);
        let namespace = PyDict::new(py);
        namespace.set_item("__doc__", doc)?;
        namespace.set_item("__module__", "xlaprof")?;
        let made = py.get_type::<PyType>().call1((name, (&base, builtin), namespace))?;
        m.add(name, &made)?;
        classes.push(made.cast_into::<PyType>()?.unbind());
    }
    // A second load of the module in one process keeps the first classes (pyo3 refuses one).
    let _ = CLASSES.set(py, classes);
    Ok(())
}

pub(crate) fn engine_error(e: xlaprof_core::Error) -> PyErr {
    use xlaprof_core::Error as E;
    let message = e.to_string();
    match e {
        E::Shape { .. } => Class::Shape.err(message),
        E::Sharding { .. } => Class::Sharding.err(message),
        E::Autograd { .. } => Class::Autograd.err(message),
        E::SyncForbidden { .. } => Class::Sync.err(message),
        E::Break { .. } => Class::Break.err(message),
        E::Anomaly { .. } => Class::Anomaly.err(message),
        E::PluginNotFound { .. }
        | E::DevicePluginNotFound { .. }
        | E::UnknownDevice { .. }
        | E::CreateOptions { .. }
        | E::PluginLoad { .. }
        | E::NotAPjrtPlugin { .. }
        | E::ApiVersion { .. } => Class::Plugin.err(message),
        _ => Class::Xla.err(message),
    }
}

pub(crate) fn profile_error(e: xlaprof_profiler::Error) -> PyErr {
    Class::Profile.err(e.to_string())
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
            Err(Class::Internal.err(format!("{what}: internal error: {detail}")))
        }
    }
}
