//! The engine's ops as `Tensor` methods and Python operators. Each is recorded (not run) at the
//! caller's Python line; shape errors are raised there, naming both shapes.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use xlaprof_core::{DType, Tensor};

use super::dtype::extract_dtype;
use super::tensor::{from_numpy, PyTensor};
use super::trace::record;

type EngineResult = xlaprof_core::Result<Tensor>;

/// The other operand of a binary op: a tensor, or a host scalar (a graph input: changing it
/// does not recompile).
enum Operand {
    Tensor(Tensor),
    Scalar(f64),
}

impl Operand {
    /// The other operand of the op `what` (named in the error when the value is neither).
    fn extract(py: Python<'_>, what: &str, value: &Bound<'_, PyAny>) -> PyResult<Operand> {
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
fn scalar_dtype(t: &Tensor, v: f64) -> DType {
    if !t.dtype().is_float() && v.fract() != 0.0 {
        DType::F32
    } else {
        t.dtype()
    }
}

/// Records `self <op> other`.
fn binary(
    py: Python<'_>,
    what: &str,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    tensor_op: fn(&Tensor, &Tensor) -> EngineResult,
    scalar_op: fn(&Tensor, f64) -> EngineResult,
) -> PyResult<PyTensor> {
    let other = Operand::extract(py, what, other)?;
    record(py, what, || match &other {
        Operand::Tensor(b) => tensor_op(a, b),
        Operand::Scalar(v) => scalar_op(a, *v),
    })
}

/// The other operand of a matrix product: a tensor or an array, not a number.
fn matmul_operand(py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    match Operand::extract(py, "matmul", other)? {
        Operand::Tensor(t) => Ok(t),
        Operand::Scalar(_) => Err(PyTypeError::new_err("matmul needs a tensor, not a number")),
    }
}

/// `pow(a, b, modulo)`: the engine has no modular power.
fn no_modulo(modulo: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match modulo {
        Some(m) if !m.is_none() => {
            Err(PyTypeError::new_err("pow() with a modulo is not supported"))
        }
        _ => Ok(()),
    }
}

/// Records `other <op> self` (the reflected operators).
fn reflected(
    py: Python<'_>,
    what: &str,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    tensor_op: fn(&Tensor, &Tensor) -> EngineResult,
) -> PyResult<PyTensor> {
    let other = Operand::extract(py, what, other)?;
    record(py, what, || match &other {
        Operand::Tensor(b) => tensor_op(b, a),
        Operand::Scalar(v) => tensor_op(&Tensor::scalar(*v, scalar_dtype(a, *v)), a),
    })
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

macro_rules! unary {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>) -> PyResult<PyTensor> {
                    record(py, stringify!($name), || self.t.$name())
                }
            )*
        }
    };
}

unary!(
    neg,
    abs,
    exp,
    log,
    sqrt,
    rsqrt,
    sin,
    cos,
    tanh,
    sigmoid,
    sign,
    floor,
    relu,
    gelu,
    silu,
    flatten,
    logical_not
);

/// Reductions over `dim` (None: every dim), as `t.sum(dim=None, keepdim=False)`.
macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                $(#[$doc])*
                #[pyo3(signature = (dim=None, keepdim=false))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    dim: Option<&Bound<'_, PyAny>>,
                    keepdim: bool,
                ) -> PyResult<PyTensor> {
                    let axes = axes(dim)?;
                    record(py, stringify!($name), || self.t.$op(&axes, keepdim))
                }
            )*
        }
    };
}

reductions!(
    sum => sum,
    mean => mean,
    /// The largest values over `dim` (all dims when None); use `argmax` for the positions.
    max => amax,
    min => amin,
    amax => amax,
    amin => amin,
    logsumexp => logsumexp,
);

macro_rules! binary_methods {
    ($($name:ident => $t:ident, $s:ident);* $(;)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                    binary(py, stringify!($name), &self.t, other, Tensor::$t, Tensor::$s)
                }
            )*
        }
    };
}

binary_methods! {
    add => add, add_scalar; sub => sub, sub_scalar; mul => mul, mul_scalar;
    div => div, div_scalar; pow => pow, pow_scalar; maximum => maximum, maximum_scalar;
    minimum => minimum, minimum_scalar; fmod => fmod, fmod_scalar;
    remainder => remainder, remainder_scalar;
}

fn compare_scalar(
    op: fn(&Tensor, &Tensor) -> EngineResult,
) -> impl Fn(&Tensor, f64) -> EngineResult {
    move |t, v| op(t, &Tensor::scalar(v, scalar_dtype(t, v)))
}

// The operators are written out: pyo3's slot wrappers trip the `unsafe_op_in_unsafe_fn` lint
// when they come out of a `macro_rules!` expansion.
#[pymethods]
impl PyTensor {
    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "add", &self.t, other, Tensor::add, Tensor::add_scalar)
    }
    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "add", &self.t, other, Tensor::add, Tensor::add_scalar)
    }
    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "sub", &self.t, other, Tensor::sub, Tensor::sub_scalar)
    }
    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "mul", &self.t, other, Tensor::mul, Tensor::mul_scalar)
    }
    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "mul", &self.t, other, Tensor::mul, Tensor::mul_scalar)
    }
    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "div", &self.t, other, Tensor::div, Tensor::div_scalar)
    }
    fn __mod__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "remainder", &self.t, other, Tensor::remainder, Tensor::remainder_scalar)
    }
    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        reflected(py, "sub", &self.t, other, Tensor::sub)
    }
    fn __rtruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        reflected(py, "div", &self.t, other, Tensor::div)
    }
    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        no_modulo(modulo)?;
        binary(py, "pow", &self.t, other, Tensor::pow, Tensor::pow_scalar)
    }
    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        no_modulo(modulo)?;
        reflected(py, "pow", &self.t, other, Tensor::pow)
    }
    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let other = matmul_operand(py, other)?;
        record(py, "matmul", || self.t.matmul(&other))
    }
    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let other = matmul_operand(py, other)?;
        record(py, "matmul", || other.matmul(&self.t))
    }
    fn matmul(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.__matmul__(py, other)
    }
    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.neg(py)
    }
    fn __abs__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.abs(py)
    }
    fn __invert__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.logical_not(py)
    }
    fn __and__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "and", &self.t, other, Tensor::logical_and, |t, v| {
            t.logical_and(&Tensor::scalar(v, DType::Pred))
        })
    }
    fn __or__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "or", &self.t, other, Tensor::logical_or, |t, v| {
            t.logical_or(&Tensor::scalar(v, DType::Pred))
        })
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<PyTensor> {
        let (what, f): (&str, fn(&Tensor, &Tensor) -> EngineResult) = match op {
            CompareOp::Eq => ("==", Tensor::eq),
            CompareOp::Ne => ("!=", Tensor::ne),
            CompareOp::Lt => ("<", Tensor::lt),
            CompareOp::Le => ("<=", Tensor::le),
            CompareOp::Gt => (">", Tensor::gt),
            CompareOp::Ge => (">=", Tensor::ge),
        };
        let other = Operand::extract(py, what, other)?;
        record(py, what, || match &other {
            Operand::Tensor(b) => f(&self.t, b),
            Operand::Scalar(v) => compare_scalar(f)(&self.t, *v),
        })
    }

    // ---- shape and movement ----

    #[pyo3(signature = (*shape))]
    fn reshape(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let dims = dims_arg("reshape", shape)?;
        record(py, "reshape", || self.t.reshape(&dims))
    }

    #[pyo3(signature = (*shape))]
    fn view(&self, py: Python<'_>, shape: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<PyTensor> {
        self.reshape(py, shape)
    }

    #[pyo3(signature = (*dims))]
    fn permute(
        &self,
        py: Python<'_>,
        dims: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let rank = self.t.rank() as i64;
        let perm = dims_arg("permute", dims)?
            .into_iter()
            .map(|d| if d < 0 { d + rank } else { d }.max(0) as usize)
            .collect::<Vec<_>>();
        record(py, "permute", || self.t.permute(&perm))
    }

    #[pyo3(signature = (dim0=0, dim1=1))]
    fn transpose(&self, py: Python<'_>, dim0: i64, dim1: i64) -> PyResult<PyTensor> {
        record(py, "transpose", || self.t.transpose(dim0, dim1))
    }

    /// The transpose of a matrix (the last two dims reversed).
    #[getter(T)]
    fn t_(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "T", || self.t.transpose(-2, -1))
    }

    fn unsqueeze(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        record(py, "unsqueeze", || self.t.unsqueeze(dim))
    }

    fn squeeze(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        record(py, "squeeze", || self.t.squeeze(dim))
    }

    #[pyo3(signature = (*shape))]
    fn expand(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let dims = dims_arg("expand", shape)?;
        record(py, "expand", || self.t.broadcast_to(&dims))
    }

    fn broadcast_to(&self, py: Python<'_>, shape: Vec<i64>) -> PyResult<PyTensor> {
        record(py, "broadcast_to", || self.t.broadcast_to(&shape))
    }

    fn flip(&self, py: Python<'_>, dims: Vec<i64>) -> PyResult<PyTensor> {
        record(py, "flip", || self.t.flip(&dims))
    }

    /// Pads with `(before, after)` pairs, one per dim, with a constant.
    #[pyo3(signature = (pads, value=0.0))]
    fn pad(&self, py: Python<'_>, pads: Vec<(i64, i64)>, value: f64) -> PyResult<PyTensor> {
        record(py, "pad", || self.t.pad(&pads, value))
    }

    fn index_select(&self, py: Python<'_>, dim: i64, index: &PyTensor) -> PyResult<PyTensor> {
        record(py, "index_select", || self.t.index_select(dim, &index.t))
    }

    fn index_add(
        &self,
        py: Python<'_>,
        dim: i64,
        index: &PyTensor,
        source: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "index_add", || self.t.index_add(dim, &index.t, &source.t))
    }

    // ---- dtypes ----

    /// The same values in another dtype (`t.to("float64")`, `t.to(numpy.int32)`).
    fn to(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let dtype = extract_dtype(dtype)?;
        record(py, "to", || self.t.cast(dtype))
    }

    fn astype(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.to(py, dtype)
    }

    fn float(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "float", || self.t.cast(DType::F32))
    }

    fn long(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "long", || self.t.cast(DType::S64))
    }

    // ---- reductions (besides those of `reductions!`) ----

    #[pyo3(signature = (dim=None, correction=1, keepdim=false))]
    fn var(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        correction: i64,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        record(py, "var", || self.t.var(&axes, correction, keepdim))
    }

    #[pyo3(signature = (dim, keepdim=false))]
    fn argmax(&self, py: Python<'_>, dim: i64, keepdim: bool) -> PyResult<PyTensor> {
        record(py, "argmax", || self.t.argmax(dim, keepdim))
    }

    #[pyo3(signature = (dim, keepdim=false))]
    fn argmin(&self, py: Python<'_>, dim: i64, keepdim: bool) -> PyResult<PyTensor> {
        record(py, "argmin", || self.t.argmin(dim, keepdim))
    }

    // ---- neural-network ops ----

    #[pyo3(signature = (dim=-1))]
    fn softmax(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        record(py, "softmax", || self.t.softmax(dim))
    }

    #[pyo3(signature = (dim=-1))]
    fn log_softmax(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        record(py, "log_softmax", || self.t.log_softmax(dim))
    }

    #[pyo3(signature = (min=None, max=None))]
    fn clamp(&self, py: Python<'_>, min: Option<f64>, max: Option<f64>) -> PyResult<PyTensor> {
        let (lo, hi) = (min.unwrap_or(f64::NEG_INFINITY), max.unwrap_or(f64::INFINITY));
        record(py, "clamp", || self.t.clamp(lo, hi))
    }

    fn one_hot(&self, py: Python<'_>, num_classes: i64) -> PyResult<PyTensor> {
        record(py, "one_hot", || self.t.one_hot(num_classes, DType::F32))
    }
}
