//! Arguments as PyTorch's signatures take them: a tensor or a number beside a tensor, dims and
//! axes given several ways, `dtype=`, a dim counted from the end.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use xlaprof_core::{DType, Tensor};

use super::dtype::extract_dtype;
use super::tensor::{from_numpy, PyTensor};

/// The other operand of a binary op: a tensor, or a host scalar (a graph input: changing it
/// does not recompile).
pub(crate) enum Operand {
    Tensor(Tensor),
    Scalar(f64),
}

impl Operand {
    /// The other operand of the op `what` (named in the error when the value is neither).
    pub(crate) fn extract(
        py: Python<'_>,
        what: &str,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Operand> {
        if let Ok(t) = value.cast::<PyTensor>() {
            return Ok(Operand::Tensor(t.get().t.clone()));
        }
        if let Ok(v) = value.extract::<f64>() {
            return Ok(Operand::Scalar(v));
        }
        if value.hasattr("__array_interface__")? || value.is_instance_of::<pyo3::types::PyList>() {
            return Ok(Operand::Tensor(from_numpy(py, value)?));
        }
        Err(PyTypeError::new_err(format!(
            "{what} needs a tensor, a number or an array, not {}",
            value.get_type().name()?
        )))
    }
}

/// The dtype a host scalar takes next to `t` (PyTorch: a fraction promotes integers to f32).
pub(crate) fn scalar_dtype(t: &Tensor, v: f64) -> DType {
    if !t.dtype().is_float() && !t.dtype().is_complex() && v.fract() != 0.0 {
        DType::F32
    } else {
        t.dtype()
    }
}

/// Axes given as None (all), an int, or a sequence of ints.
pub(crate) fn axes(dim: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<i64>> {
    let Some(d) = dim.filter(|d| !d.is_none()) else {
        return Ok(vec![]);
    };
    if let Ok(one) = d.extract::<i64>() {
        return Ok(vec![one]);
    }
    d.extract::<Vec<i64>>().map_err(|_| {
        PyTypeError::new_err(format!("dim must be None, an int or a sequence of ints, not {d:?}"))
    })
}

/// Dims given either as one sequence or as several ints (`reshape(2, 3)` or `reshape((2, 3))`);
/// `what` is the op, named in the error.
pub(crate) fn dims_arg(what: &str, args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<Vec<i64>> {
    if args.len() == 1 {
        if let Ok(dims) = args.get_item(0)?.extract::<Vec<i64>>() {
            return Ok(dims);
        }
    }
    args.extract::<Vec<i64>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} takes ints or one sequence of ints (`{what}(2, 3)` or `{what}((2, 3))`), \
             not {args:?}"
        ))
    })
}

/// A `dtype=` argument: None, or a dtype.
pub(crate) fn optional_dtype(dtype: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DType>> {
    dtype.filter(|d| !d.is_none()).map(extract_dtype).transpose()
}

/// A dim given to an op on a tensor of `rank` dims, made non-negative (IndexError outside).
pub(crate) fn wrap_dim(what: &str, dim: i64, rank: usize) -> PyResult<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "{what}: dim {dim} is out of range for a tensor of rank {rank}"
        )));
    }
    Ok(d as usize)
}
