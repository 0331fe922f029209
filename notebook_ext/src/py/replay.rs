//! `_native.Replay`: a graph captured once and run again with nothing recorded (core's
//! `exec::replay`), for torch.compile's graphs (`xlaprof/torch/_compile.py`).

use pyo3::intern;
use pyo3::prelude::*;
use xlaprof_core::{Replay, SourceLocation, Tensor};

use super::tensor::PyTensor;
use super::torch_dispatch::{attributes, owns_its_value, rebind_owner};
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

    /// Runs the graph on lazy tensors (`LazyTensor`s, torch.compile's arguments: `_compile`'s
    /// `Capture.run`) and writes their new values: one call, where the same in Python took a few
    /// statements per argument, and a compiled AdamW step has four per parameter. The arguments
    /// are `tensors`' values, then `fed`'s. Each written argument (`written_at`: the arguments
    /// whose new values are the results after the graph's outputs, in order) is handed over
    /// where its tensor owns its value and alone holds it (see `run`), and its tensor then takes
    /// its new value. The graph's outputs; None, with nothing run or written, as `run` says.
    /// `value_of` and `rebind` are `_tensor`'s `value` and `rebind`, for a view among `tensors`: its value is its
    /// root's, and a write through it rebuilds the root.
    fn run_on_tensors(
        &self,
        py: Python<'_>,
        tensors: Vec<Bound<'_, PyAny>>,
        fed: Vec<PyRef<'_, PyTensor>>,
        written_at: Vec<usize>,
        value_of: Bound<'_, PyAny>,
        rebind: Bound<'_, PyAny>,
    ) -> PyResult<Option<Vec<Py<PyTensor>>>> {
        let mut own = Vec::with_capacity(tensors.len());
        let mut values = Vec::with_capacity(tensors.len());
        for t in &tensors {
            let attributes = attributes(t)?;
            let owns = owns_its_value(&attributes)?;
            let value = match attributes.get_item(intern!(py, "_xp"))? {
                Some(x) if owns => x,
                _ => value_of.call1((t,))?,
            };
            values.push(value.cast_into::<PyTensor>()?);
            own.push(owns.then_some(attributes));
        }
        // Held by its tensor's attribute and by `values` alone: nothing else can read the old
        // value once the tensor takes its new one.
        let handed_over: Vec<usize> = written_at
            .iter()
            .copied()
            .filter(|&i| i < values.len() && own[i].is_some() && values[i].get_refcnt() == 2)
            .collect();
        let arguments: Vec<Tensor> = values
            .iter()
            .map(|v| v.get().t.clone())
            .chain(fed.iter().map(|f| f.t.clone()))
            .collect();
        let results = traced_detached(py, "compiled graph", || {
            let a: Vec<&Tensor> = arguments.iter().collect();
            self.replay.run(&a, &handed_over, SourceLocation::caller())
        })?;
        let Some(mut results) = results else { return Ok(None) };
        let outputs = results.len().saturating_sub(written_at.len());
        for (new, &i) in results.drain(outputs..).zip(&written_at) {
            let new = Bound::new(py, PyTensor::new(new))?;
            match &own[i] {
                Some(attributes) => rebind_owner(attributes, values[i].get(), &new)?,
                None => {
                    rebind.call1((&tensors[i], &new))?;
                }
            }
        }
        wrapped(py, results).map(Some)
    }

    /// The graph's structural key (its compiled-graph cache key).
    #[getter]
    fn key(&self) -> u64 {
        self.replay.key()
    }
}
