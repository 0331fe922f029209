//! `_native.Replay`: a graph captured once and run again with nothing recorded (core's
//! `exec::replay`), for torch.compile's graphs (`xlaprof/torch/_compile.py`).

use pyo3::prelude::*;
use xlaprof_core::{Replay, SourceLocation, Tensor};

use super::tensor::PyTensor;
use super::trace::traced_detached;

fn tensors(list: &[PyRef<'_, PyTensor>]) -> Vec<Tensor> {
    list.iter().map(|t| t.t.clone()).collect()
}

fn wrapped(py: Python<'_>, values: Vec<Tensor>) -> PyResult<Vec<Py<PyTensor>>> {
    values.into_iter().map(|t| Py::new(py, PyTensor::new(t))).collect()
}

/// Computes the pending tensors among `tensors` (a sync of what they need, which the profile
/// reports as a compiled graph's): a capture records on data, never on pending values.
#[pyfunction]
pub(crate) fn materialize(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>) -> PyResult<()> {
    let tensors = self::tensors(&tensors);
    traced_detached(py, "compiled graph", || {
        let refs: Vec<&Tensor> = tensors.iter().collect();
        xlaprof_core::materialize(&refs, &SourceLocation::caller())
    })
}

#[pyclass(name = "Replay", module = "xlaprof", frozen)]
pub(crate) struct PyReplay {
    replay: Replay,
}

#[pymethods]
impl PyReplay {
    /// Captures the graph computing `outputs` from `arguments` (device data) and runs it once:
    /// `(replay, outputs)`.
    #[staticmethod]
    fn capture(
        py: Python<'_>,
        arguments: Vec<PyRef<'_, PyTensor>>,
        outputs: Vec<PyRef<'_, PyTensor>>,
    ) -> PyResult<(PyReplay, Vec<Py<PyTensor>>)> {
        let (arguments, outputs) = (tensors(&arguments), tensors(&outputs));
        let (replay, values) = traced_detached(py, "compiled graph", || {
            let a: Vec<&Tensor> = arguments.iter().collect();
            let o: Vec<&Tensor> = outputs.iter().collect();
            Replay::capture(&a, &o, SourceLocation::caller())
        })?;
        Ok((PyReplay { replay }, wrapped(py, values)?))
    }

    /// Keeps the graph that computes `outputs` (pending) from `arguments` (device data) to
    /// record into the lazy trace at each run, and records it once now: `(replay, outputs)`,
    /// pending; None where it cannot be (an argument split over a mesh: `capture` it).
    #[staticmethod]
    fn recorded(
        py: Python<'_>,
        arguments: Vec<PyRef<'_, PyTensor>>,
        outputs: Vec<PyRef<'_, PyTensor>>,
    ) -> PyResult<Option<(PyReplay, Vec<Py<PyTensor>>)>> {
        let (arguments, outputs) = (tensors(&arguments), tensors(&outputs));
        let recorded = traced_detached(py, "compiled graph", || {
            let a: Vec<&Tensor> = arguments.iter().collect();
            let o: Vec<&Tensor> = outputs.iter().collect();
            Replay::recorded(&a, &o, SourceLocation::caller())
        })?;
        recorded.map(|(replay, values)| Ok((PyReplay { replay }, wrapped(py, values)?))).transpose()
    }

    /// Runs the graph on `arguments` (launched, or recorded into the trace, as it was
    /// captured): its outputs, in the capture's order; None, with nothing run, when the
    /// arguments are split over a mesh otherwise than at the capture. `handed_over`: the
    /// arguments the caller rebinds to their new values and holds nowhere else, whose buffers
    /// the program may take (core's `Replay::run`).
    #[pyo3(signature = (arguments, handed_over = Vec::new()))]
    fn run(
        &self,
        py: Python<'_>,
        arguments: Vec<PyRef<'_, PyTensor>>,
        handed_over: Vec<usize>,
    ) -> PyResult<Option<Vec<Py<PyTensor>>>> {
        let arguments = tensors(&arguments);
        let values = traced_detached(py, "compiled graph", || {
            let a: Vec<&Tensor> = arguments.iter().collect();
            self.replay.run(&a, &handed_over, SourceLocation::caller())
        })?;
        values.map(|v| wrapped(py, v)).transpose()
    }

    /// The graph's structural key (its compiled-graph cache key).
    #[getter]
    fn key(&self) -> u64 {
        self.replay.key()
    }
}
