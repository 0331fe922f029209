//! The answer of the torch bridge's device guard (`_device._device_guard`), and the error it
//! keeps when torch asks it while unwinding a failed backward.
//!
//! torch asks the guard for its device type through Python, two or three times per aten op, and
//! also from the destructor of the stream guard its autograd engine holds around each backward
//! node. When a built-in node's op fails in the bridge (a lowering's `ShapeError`), torch
//! unwinds with that Python error still set; a Python call made then fails, and a failure in a
//! destructor ends the process (`std::terminate`). So the guard's answer takes the pending
//! error into a slot of its thread, where the backward's caller (`_device.engine_run_backward`)
//! finds it and raises it: the user gets the op's error, not an abort.

use std::cell::RefCell;

use pyo3::prelude::*;

thread_local! {
    /// The error pending when the guard was last asked, until the backward's caller takes it.
    static PENDING: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// A callable that returns `value` (the device type), keeping an error pending at the call.
#[pyclass(frozen)]
pub(crate) struct DeviceTypeAnswer {
    value: Py<PyAny>,
}

#[pymethods]
impl DeviceTypeAnswer {
    #[new]
    fn new(value: Py<PyAny>) -> Self {
        Self { value }
    }

    fn __call__(&self, py: Python<'_>) -> Py<PyAny> {
        if let Some(err) = PyErr::take(py) {
            // The first error is the cause; a later one comes of the unwinding.
            PENDING.with(|p| {
                p.borrow_mut().get_or_insert(err);
            });
        }
        self.value.clone_ref(py)
    }
}

/// The error the guard took while torch unwound a failed backward on this thread, if any
/// (taken: a second call returns None).
#[pyfunction]
pub(crate) fn take_guard_error(py: Python<'_>) -> Option<Py<PyAny>> {
    PENDING.with(|p| p.borrow_mut().take()).map(|e| e.into_value(py).into_any())
}
