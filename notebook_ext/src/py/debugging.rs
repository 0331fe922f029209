//! Debugging tools: `forbid_sync()` (a block in which running a graph or reading a value is an
//! error at its line), `detect_anomaly()` (a block whose syncs are checked for NaN and Inf) and
//! `explain()` (the graph pending tensors would run, without running it).

use pyo3::prelude::*;
use xlaprof_core::{DetectingAnomalies, SyncsForbidden};

use super::tensor::PyTensor;
use super::trace::traced;

/// The block of `xp.forbid_sync()`: open while entered, on the thread that entered it.
#[pyclass(name = "_ForbidSync", module = "xlaprof", unsendable)]
pub(crate) struct PyForbidSync(Option<SyncsForbidden>);

#[pymethods]
impl PyForbidSync {
    #[new]
    fn new() -> Self {
        PyForbidSync(None)
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        if slf.0.is_none() {
            slf.0 = Some(xlaprof_core::forbid_syncs());
        }
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.0 = None;
        false
    }
}

/// The block of `xp.detect_anomaly()`: every sync inside it is checked for NaN and Inf.
#[pyclass(name = "_DetectAnomaly", module = "xlaprof", unsendable)]
pub(crate) struct PyDetectAnomaly(Option<DetectingAnomalies>);

#[pymethods]
impl PyDetectAnomaly {
    #[new]
    fn new() -> Self {
        PyDetectAnomaly(None)
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        if slf.0.is_none() {
            slf.0 = Some(xlaprof_core::detect_anomalies());
        }
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.0 = None;
        false
    }
}

/// The pending graph of `tensors` as text: a line per node with its shape and source line.
#[pyfunction]
pub(crate) fn explain(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>) -> PyResult<String> {
    let ts: Vec<&xlaprof_core::Tensor> = tensors.iter().map(|t| &t.t).collect();
    traced(py, "explain", || xlaprof_core::explain(&ts).map(|e| e.to_string()))
}
