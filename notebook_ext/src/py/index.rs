//! `tensor[...]`: ints, slices (positive steps), `None`, `...` and integer index tensors, as
//! slices, squeezes, unsqueezes and `index_select` in the IR.

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};
use xlaprof_core::Tensor;

use super::tensor::PyTensor;
use super::trace::record;

enum Index {
    At(i64),
    Range { start: i64, stop: i64, step: i64 },
    NewAxis,
    Rest,
    Select(Tensor),
}

fn parse(key: &Bound<'_, PyAny>, dims: &[i64], axis: usize) -> PyResult<Index> {
    if key.is_none() {
        return Ok(Index::NewAxis);
    }
    if key.is_instance_of::<PyEllipsis>() {
        return Ok(Index::Rest);
    }
    if let Ok(t) = key.cast::<PyTensor>() {
        return Ok(Index::Select(t.get().t.clone()));
    }
    let size = *dims.get(axis).ok_or_else(|| {
        PyIndexError::new_err(format!("too many indices for a tensor of rank {}", dims.len()))
    })?;
    if let Ok(slice) = key.cast::<PySlice>() {
        let s = slice.indices(size as isize)?;
        if s.step <= 0 {
            return Err(PyIndexError::new_err("slices need a positive step (use flip to reverse)"));
        }
        return Ok(Index::Range {
            start: s.start as i64,
            stop: s.stop as i64,
            step: s.step as i64,
        });
    }
    if let Ok(i) = key.extract::<i64>() {
        let at = if i < 0 { i + size } else { i };
        if at < 0 || at >= size {
            return Err(PyIndexError::new_err(format!(
                "index {i} is out of range for dim {axis} of size {size}"
            )));
        }
        return Ok(Index::At(at));
    }
    Err(PyTypeError::new_err(format!(
        "tensors are indexed by ints, slices, None, ... or integer tensors, not {}",
        key.get_type().name()?
    )))
}

pub(crate) fn get(py: Python<'_>, t: &Tensor, key: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let keys: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter().collect(),
        Err(_) => vec![key.clone()],
    };
    let dims = t.dims().to_vec();
    // Parse against the input's dims: `axis` walks the input, skipping what `...` covers.
    let consumed =
        keys.iter().filter(|k| !k.is_none() && !k.is_instance_of::<PyEllipsis>()).count();
    let mut parsed = Vec::with_capacity(keys.len());
    let mut axis = 0usize;
    for k in &keys {
        let index = parse(k, &dims, axis)?;
        match index {
            Index::Rest => axis += dims.len().saturating_sub(consumed),
            Index::NewAxis => {}
            _ => axis += 1,
        }
        parsed.push(index);
    }
    record(py, "getitem", || {
        let mut out = t.clone();
        // `at` walks the output's dims as the indices apply.
        let mut at = 0i64;
        let rank_in = dims.len();
        for index in &parsed {
            match index {
                Index::At(i) => {
                    out = out.slice(at, *i, i + 1, 1)?.squeeze(at)?;
                }
                Index::Range { start, stop, step } => {
                    let stop = (*stop).max(*start);
                    // A whole dim (`:`) is no op: the graph is the one a single slice makes.
                    if (*start, stop, *step) != (0, out.dims()[at as usize], 1) {
                        out = out.slice(at, *start, stop, *step)?;
                    }
                    at += 1;
                }
                Index::NewAxis => {
                    out = out.unsqueeze(at)?;
                    at += 1;
                }
                Index::Rest => at += rank_in.saturating_sub(consumed) as i64,
                Index::Select(ix) => {
                    out = out.index_select(at, ix)?;
                    at += 1;
                }
            }
        }
        Ok(out)
    })
}

#[pymethods]
impl PyTensor {
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        get(py, &self.t, key)
    }
}
