//! Debugging tools: `forbid_sync()` (a block in which running a graph or reading a value is an
//! error at its line), `detect_anomaly()` (a block whose syncs are checked for NaN and Inf) and
//! `explain()` (the graph pending tensors would run, without running it).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use xlaprof_core::{DetectingAnomalies, SyncsForbidden};

use super::tensor::PyTensor;
use super::trace::traced;

/// What an open block holds: the engine's guard, dropped when the block ends.
enum Guard {
    ForbidSync(SyncsForbidden),
    DetectAnomaly(DetectingAnomalies),
}

/// The block of `xp.forbid_sync()` (`kind="forbid_sync"`) or `xp.detect_anomaly()`
/// (`"detect_anomaly"`): open while entered, on the thread that entered it.
#[pyclass(name = "_Block", module = "xlaprof", unsendable)]
pub(crate) struct PyBlock {
    kind: String,
    guard: Option<Guard>,
}

#[pymethods]
impl PyBlock {
    #[new]
    fn new(kind: String) -> PyResult<Self> {
        match kind.as_str() {
            "forbid_sync" | "detect_anomaly" => Ok(PyBlock { kind, guard: None }),
            _ => Err(PyValueError::new_err(format!(
                "no debugging block {kind:?}: forbid_sync or detect_anomaly"
            ))),
        }
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        if slf.guard.is_none() {
            slf.guard = Some(match slf.kind.as_str() {
                "forbid_sync" => Guard::ForbidSync(xlaprof_core::forbid_syncs()),
                _ => Guard::DetectAnomaly(xlaprof_core::detect_anomalies()),
            });
        }
        slf
    }

    /// Leaving a `detect_anomaly()` block checks what its syncs left running (where the host
    /// runs ahead of the device: GPUs); after an error in the block, that error stands.
    #[pyo3(signature = (*exc))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<bool> {
        let detecting = matches!(self.guard, Some(Guard::DetectAnomaly(_)));
        self.guard = None;
        if detecting {
            let checked = traced(py, "detect_anomaly", xlaprof_core::check_anomalies);
            if exc.get_item(0).is_ok_and(|e| e.is_none()) {
                checked?;
            }
        }
        Ok(false)
    }
}

/// The pending graph of `tensors` as text: a line per node with its shape and source line.
#[pyfunction]
pub(crate) fn explain(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>) -> PyResult<String> {
    let ts: Vec<&xlaprof_core::Tensor> = tensors.iter().map(|t| &t.t).collect();
    traced(py, "explain", || xlaprof_core::explain(&ts).map(|e| e.to_string()))
}
