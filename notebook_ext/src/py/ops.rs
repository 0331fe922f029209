//! The engine's ops as `Tensor` methods and Python operators. Each is recorded (not run) at the
//! caller's Python line; shape errors are raised there, naming both shapes.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use xlaprof_core::{DType, Tensor};

use super::dtype::extract_dtype;
use super::tensor::{from_numpy, PyTensor};
use super::trace::{record, traced};

type EngineResult = xlaprof_core::Result<Tensor>;

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

/// Records `self <op> other`.
pub(crate) fn binary(
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
    round,
    lgamma,
    digamma,
    erfinv,
    erf,
    erfc,
    log1p,
    expm1,
    relu,
    gelu,
    silu,
    logical_not
);

/// `sum` and `mean` over `dim` (None: every dim), as `t.sum(dim=None, keepdim=False, *,
/// dtype=None)`. As in PyTorch, `dtype` casts first, and the sum of integers or bools is int64.
macro_rules! typed_reductions {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    dim: Option<&Bound<'_, PyAny>>,
                    keepdim: bool,
                    dtype: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<PyTensor> {
                    let axes = axes(dim)?;
                    let dtype = optional_dtype(dtype)?.or_else(|| {
                        let d = self.t.dtype();
                        (stringify!($name) == "sum" && !d.is_float() && !d.is_complex())
                            .then_some(DType::S64)
                    });
                    record(py, stringify!($name), || match dtype {
                        Some(d) => self.t.cast(d)?.$name(&axes, keepdim),
                        None => self.t.$name(&axes, keepdim),
                    })
                }
            )*
        }
    };
}

typed_reductions!(sum, mean);

/// A `dtype=` argument: None, or a dtype.
pub(crate) fn optional_dtype(dtype: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DType>> {
    dtype.filter(|d| !d.is_none()).map(extract_dtype).transpose()
}

/// `max`/`min` as PyTorch has them: over everything (`t.max()`), along one dim with the
/// positions (`t.max(1)` is `(values, indices)`), or elementwise with another tensor.
fn extreme<'py>(
    py: Python<'py>,
    t: &Tensor,
    dim: Option<&Bound<'py, PyAny>>,
    keepdim: bool,
    max: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let what = if max { "max" } else { "min" };
    let Some(dim) = dim.filter(|d| !d.is_none()) else {
        let out =
            record(py, what, || if max { t.amax(&[], keepdim) } else { t.amin(&[], keepdim) })?;
        return Ok(Bound::new(py, out)?.into_any());
    };
    if let Ok(other) = dim.cast::<PyTensor>() {
        let other = other.get().t.clone();
        let out = record(py, what, || if max { t.maximum(&other) } else { t.minimum(&other) })?;
        return Ok(Bound::new(py, out)?.into_any());
    }
    let Ok(axis) = dim.extract::<i64>() else {
        return Err(PyTypeError::new_err(format!(
            "{what}(dim) takes one int dim (or a tensor, for the elementwise {what}imum), not {}; \
             a{what} reduces several dims at once",
            dim.repr()?
        )));
    };
    let values =
        record(py, what, || if max { t.amax(&[axis], keepdim) } else { t.amin(&[axis], keepdim) })?;
    let indices =
        record(py, what, || if max { t.argmax(axis, keepdim) } else { t.argmin(axis, keepdim) })?;
    py.import("xlaprof.return_types")?.getattr(what)?.call1((values, indices))
}

/// `argmax`/`argmin` along `dim`, or over the flattened tensor when `dim` is None.
fn arg_extreme(
    py: Python<'_>,
    what: &str,
    t: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    f: fn(&Tensor, i64, bool) -> EngineResult,
) -> PyResult<PyTensor> {
    record(py, what, || match dim {
        Some(d) => f(t, d, keepdim),
        None => {
            let index = f(&t.reshape(&[-1])?, 0, false)?;
            if keepdim {
                index.reshape(&vec![1; t.rank()])
            } else {
                Ok(index)
            }
        }
    })
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

#[pymethods]
impl PyTensor {
    /// The largest value (`t.max()`), the largest values along `dim` and where they are
    /// (`t.max(1)` is `(values, indices)`), or the elementwise maximum (`t.max(other)`).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn max<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        extreme(py, &self.t, dim, keepdim, true)
    }

    /// Like `max`, for the smallest.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn min<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        extreme(py, &self.t, dim, keepdim, false)
    }

    /// The largest values over `dim` (an int or a tuple; every dim when empty).
    #[pyo3(signature = (dim=None, keepdim=false), text_signature = "($self, dim=(), keepdim=False)")]
    fn amax(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        record(py, "amax", || self.t.amax(&axes, keepdim))
    }

    /// The smallest values over `dim` (an int or a tuple; every dim when empty).
    #[pyo3(signature = (dim=None, keepdim=false), text_signature = "($self, dim=(), keepdim=False)")]
    fn amin(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        record(py, "amin", || self.t.amin(&axes, keepdim))
    }

    #[pyo3(signature = (dim, keepdim=false))]
    fn logsumexp(
        &self,
        py: Python<'_>,
        dim: &Bound<'_, PyAny>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(Some(dim))?;
        record(py, "logsumexp", || self.t.logsumexp(&axes, keepdim))
    }
}

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
    mul => mul, mul_scalar; maximum => maximum, maximum_scalar;
    minimum => minimum, minimum_scalar; fmod => fmod, fmod_scalar;
    atan2 => atan2, atan2_scalar;
    remainder => remainder, remainder_scalar;
    nextafter => nextafter, nextafter_scalar;
    _zeta => zeta, zeta_scalar;
}

/// `self + alpha * other` (or `-`), as PyTorch's `add(other, *, alpha=1)`.
pub(crate) fn with_alpha(
    py: Python<'_>,
    what: &str,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    alpha: f64,
    tensor_op: fn(&Tensor, &Tensor) -> EngineResult,
    scalar_op: fn(&Tensor, f64) -> EngineResult,
) -> PyResult<PyTensor> {
    if alpha == 1.0 {
        return binary(py, what, a, other, tensor_op, scalar_op);
    }
    let other = Operand::extract(py, what, other)?;
    record(py, what, || match &other {
        Operand::Tensor(b) => tensor_op(a, &b.mul_scalar(alpha)?),
        Operand::Scalar(v) => scalar_op(a, v * alpha),
    })
}

/// `a / b` rounded as PyTorch's `div(..., rounding_mode=)`: None (true division), "trunc" or
/// "floor"; a rounded quotient of integers stays an integer.
pub(crate) fn divide(
    py: Python<'_>,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    rounding_mode: Option<&str>,
    reflected: bool,
) -> PyResult<PyTensor> {
    let floor = match rounding_mode {
        None => None,
        Some("floor") => Some(true),
        Some("trunc") => Some(false),
        Some(m) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "div expected rounding_mode to be one of None, 'trunc' or 'floor', not {m:?}"
            )))
        }
    };
    let other = Operand::extract(py, "div", other)?;
    record(py, "div", || {
        let b = match &other {
            Operand::Tensor(b) => b.clone(),
            Operand::Scalar(v) => Tensor::scalar(*v, scalar_dtype(a, *v)),
        };
        let (x, y) = if reflected { (&b, a) } else { (a, &b) };
        let q = x.div(y)?;
        let Some(floor) = floor else { return Ok(q) };
        let q = if floor { q.floor()? } else { q.abs()?.floor()?.mul(&q.sign()?)? };
        if !x.dtype().is_float() && !y.dtype().is_float() {
            q.cast(x.dtype())
        } else {
            Ok(q)
        }
    })
}

#[pymethods]
impl PyTensor {
    /// The n-th derivative of the digamma function at each value (PyTorch's `polygamma(n)`).
    fn polygamma(&self, py: Python<'_>, n: u32) -> PyResult<PyTensor> {
        record(py, "polygamma", || self.t.polygamma(n))
    }

    #[pyo3(signature = (other, *, alpha=1.0))]
    fn add(&self, py: Python<'_>, other: &Bound<'_, PyAny>, alpha: f64) -> PyResult<PyTensor> {
        with_alpha(py, "add", &self.t, other, alpha, Tensor::add, Tensor::add_scalar)
    }

    #[pyo3(signature = (other, *, alpha=1.0))]
    fn sub(&self, py: Python<'_>, other: &Bound<'_, PyAny>, alpha: f64) -> PyResult<PyTensor> {
        with_alpha(py, "sub", &self.t, other, alpha, Tensor::sub, Tensor::sub_scalar)
    }

    #[pyo3(signature = (other, *, rounding_mode=None))]
    fn div(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<PyTensor> {
        divide(py, &self.t, other, rounding_mode, false)
    }

    fn pow(&self, py: Python<'_>, exponent: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "pow", &self.t, exponent, Tensor::pow, Tensor::pow_scalar)
    }

    fn __floordiv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        divide(py, &self.t, other, Some("floor"), false)
    }

    fn __rfloordiv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        divide(py, &self.t, other, Some("floor"), true)
    }
}

/// Named comparisons (`t.eq(other)`, ...), the methods behind `==`, `<`, ...
macro_rules! compare_methods {
    ($($name:ident => $what:literal),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                    compare(py, $what, &self.t, other, Tensor::$name)
                }
            )*
        }
    };
}

compare_methods!(eq => "==", ne => "!=", lt => "<", le => "<=", gt => ">", ge => ">=");

/// Records `a <cmp> other`, a scalar `other` taking `a`'s dtype.
fn compare(
    py: Python<'_>,
    what: &str,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    f: fn(&Tensor, &Tensor) -> EngineResult,
) -> PyResult<PyTensor> {
    let other = Operand::extract(py, what, other)?;
    record(py, what, || match &other {
        Operand::Tensor(b) => f(a, b),
        Operand::Scalar(v) => compare_scalar(f)(a, *v),
    })
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
        compare(py, what, &self.t, other, f)
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

    fn transpose(&self, py: Python<'_>, dim0: i64, dim1: i64) -> PyResult<PyTensor> {
        record(py, "transpose", || self.t.transpose(dim0, dim1))
    }

    /// The transpose of a matrix; a tensor of fewer than two dims as it is (PyTorch's `t()`).
    #[pyo3(name = "t")]
    fn t_method(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        match this.t.rank() {
            0 | 1 => Ok(slf.clone().into_any().unbind()),
            2 => Ok(Bound::new(slf.py(), record(slf.py(), "t", || this.t.transpose(0, 1))?)?
                .into_any()
                .unbind()),
            r => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "t() expects a tensor of at most 2 dims, not {r}; use transpose(dim0, dim1)"
            ))),
        }
    }

    /// Flattens the dims from `start_dim` to `end_dim` into one.
    #[pyo3(signature = (start_dim=0, end_dim=-1), text_signature = "($self, start_dim=0, end_dim=-1)")]
    fn flatten(&self, py: Python<'_>, start_dim: i64, end_dim: i64) -> PyResult<PyTensor> {
        let dims = self.t.dims();
        if dims.is_empty() {
            return record(py, "flatten", || self.t.reshape(&[1]));
        }
        let (s, e) = (
            wrap_dim("flatten", start_dim, dims.len())?,
            wrap_dim("flatten", end_dim, dims.len())?,
        );
        if s > e {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "flatten: start_dim {start_dim} comes after end_dim {end_dim}"
            )));
        }
        let mut out: Vec<i64> = dims[..s].to_vec();
        out.push(dims[s..=e].iter().product());
        out.extend_from_slice(&dims[e + 1..]);
        record(py, "flatten", || self.t.reshape(&out))
    }

    /// The dims reversed, as NumPy's and PyTorch's `T` (a matrix's transpose).
    #[getter(T)]
    fn t_(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let reversed: Vec<usize> = (0..self.t.rank()).rev().collect();
        record(py, "T", || self.t.permute(&reversed))
    }

    fn unsqueeze(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        record(py, "unsqueeze", || self.t.unsqueeze(dim))
    }

    /// Removes the dims of size 1: all of them, or those of `dim` (an int or a tuple) that are 1.
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let dims = self.t.dims();
        let chosen: Vec<usize> = match dim.filter(|d| !d.is_none()) {
            None => (0..dims.len()).collect(),
            Some(d) => axes(Some(d))?
                .into_iter()
                .map(|a| wrap_dim("squeeze", a, dims.len()))
                .collect::<PyResult<_>>()?,
        };
        squeezed(py, &self.t, &chosen)
    }

    #[pyo3(signature = (*sizes))]
    fn expand(
        &self,
        py: Python<'_>,
        sizes: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let mut dims = dims_arg("expand", sizes)?;
        // -1 keeps a dim's size, as in PyTorch.
        let offset = dims.len().saturating_sub(self.t.rank());
        for (i, d) in dims.iter_mut().enumerate().skip(offset) {
            if *d == -1 {
                *d = self.t.dims()[i - offset];
            }
        }
        record(py, "expand", || self.t.broadcast_to(&dims))
    }

    fn expand_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "expand_as", || self.t.broadcast_to(other.t.dims()))
    }

    fn reshape_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "reshape_as", || self.t.reshape(other.t.dims()))
    }

    fn view_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "view_as", || self.t.reshape(other.t.dims()))
    }

    /// The tensor itself: every tensor is contiguous here.
    #[pyo3(signature = (memory_format=None))]
    fn contiguous(slf: Py<Self>, memory_format: Option<&Bound<'_, PyAny>>) -> Py<Self> {
        let _ = memory_format;
        slf
    }

    /// A copy that later in-place changes of this tensor do not reach; gradients flow through it.
    #[pyo3(signature = (*, memory_format=None))]
    fn clone(
        &self,
        py: Python<'_>,
        memory_format: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let _ = memory_format;
        clone_tensor(py, &self.t)
    }

    /// Fills the positions where `mask` is true with `value` (a number or a one-element tensor);
    /// `mask` is bool and broadcasts to this tensor's shape.
    fn masked_fill(
        &self,
        py: Python<'_>,
        mask: &PyTensor,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<PyTensor> {
        masked_fill(py, &self.t, &mask.t, value)
    }

    fn broadcast_to(&self, py: Python<'_>, shape: Vec<i64>) -> PyResult<PyTensor> {
        record(py, "broadcast_to", || self.t.broadcast_to(&shape))
    }

    fn flip(&self, py: Python<'_>, dims: Vec<i64>) -> PyResult<PyTensor> {
        record(py, "flip", || self.t.flip(&dims))
    }

    /// Pads with `(before, after)` pairs, one per dim, with a constant; `interior`, one per
    /// dim, puts that many values between neighbouring elements too.
    #[pyo3(signature = (pads, value=0.0, interior=None))]
    fn pad(
        &self,
        py: Python<'_>,
        pads: Vec<(i64, i64)>,
        value: f64,
        interior: Option<Vec<i64>>,
    ) -> PyResult<PyTensor> {
        record(py, "pad", || match &interior {
            None => self.t.pad(&pads, value),
            Some(interior) => {
                let low: Vec<i64> = pads.iter().map(|p| p.0).collect();
                let high: Vec<i64> = pads.iter().map(|p| p.1).collect();
                self.t.pad_general(&low, &high, interior, value)
            }
        })
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

    #[pyo3(signature = (dim, index, source, reduce, *, include_self=true))]
    fn index_reduce(
        &self,
        py: Python<'_>,
        dim: i64,
        index: &PyTensor,
        source: &PyTensor,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<PyTensor> {
        record(py, "index_reduce", || {
            self.t.index_reduce_rows(dim, &index.t, &source.t, reduce, include_self)
        })
    }

    // ---- dtypes ----

    /// The same values in another dtype (`t.astype("float64")`, `t.astype(numpy.int32)`).
    fn astype(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let dtype = extract_dtype(dtype)?;
        record(py, "astype", || self.t.cast(dtype))
    }

    /// The values in the dtype of `other`.
    fn type_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "type_as", || self.t.cast(other.t.dtype()))
    }

    fn is_floating_point(&self) -> bool {
        self.t.dtype().is_float()
    }

    // ---- reductions (besides those above) ----

    /// The variance over `dim` (None: every dim) with Bessel's `correction`; the legacy
    /// `unbiased=False` is `correction=0`.
    #[pyo3(signature = (dim=None, *, correction=1, keepdim=false, unbiased=None))]
    fn var(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        correction: i64,
        keepdim: bool,
        unbiased: Option<bool>,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        let correction = unbiased.map_or(correction, i64::from);
        record(py, "var", || self.t.var(&axes, correction, keepdim))
    }

    /// The standard deviation: the square root of `var` with the same arguments.
    #[pyo3(signature = (dim=None, *, correction=1, keepdim=false, unbiased=None))]
    fn std(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        correction: i64,
        keepdim: bool,
        unbiased: Option<bool>,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        let correction = unbiased.map_or(correction, i64::from);
        record(py, "std", || self.t.var(&axes, correction, keepdim)?.sqrt())
    }

    /// Where the largest value is along `dim`, or in the flattened tensor when `dim` is None.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(&self, py: Python<'_>, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        arg_extreme(py, "argmax", &self.t, dim, keepdim, Tensor::argmax)
    }

    /// Where the smallest value is along `dim`, or in the flattened tensor when `dim` is None.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(&self, py: Python<'_>, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        arg_extreme(py, "argmin", &self.t, dim, keepdim, Tensor::argmin)
    }

    /// A stable sort along `dim`: `(values, indices)`, as `torch.sort` (NaN sorts last).
    #[pyo3(signature = (dim=-1, descending=false), text_signature = "($self, dim=-1, descending=False)")]
    fn sort<'py>(
        &self,
        py: Python<'py>,
        dim: i64,
        descending: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (values, indices) = traced(py, "sort", || self.t.sort(dim, descending))?;
        let (values, indices) = (PyTensor::new(values), PyTensor::new(indices));
        py.import("xlaprof.return_types")?.getattr("sort")?.call1((values, indices))
    }

    // ---- factorizations (`xlaprof.linalg` and the torch bridge build on these) ----

    /// The Cholesky factor: lower triangular, or upper if `upper`.
    fn _cholesky(&self, py: Python<'_>, upper: bool) -> PyResult<PyTensor> {
        record(py, "cholesky", || self.t.cholesky(upper))
    }

    /// Solves `op(self) X = b` (`left`) or `X op(self) = b` for triangular self.
    fn _triangular_solve(
        &self,
        py: Python<'_>,
        b: &PyTensor,
        left: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose: bool,
    ) -> PyResult<PyTensor> {
        record(py, "triangular_solve", || {
            self.t.triangular_solve(&b.t, left, lower, unit_diagonal, transpose)
        })
    }

    /// Householder QR in LAPACK's compact form: `(a, tau)`.
    fn _geqrf(&self, py: Python<'_>) -> PyResult<(PyTensor, PyTensor)> {
        let (a, tau) = traced(py, "geqrf", || self.t.geqrf())?;
        Ok((PyTensor::new(a), PyTensor::new(tau)))
    }

    /// Q's first columns from Householder reflectors and their scales.
    fn _householder_product(&self, py: Python<'_>, tau: &PyTensor) -> PyResult<PyTensor> {
        record(py, "householder_product", || self.t.householder_product(&tau.t))
    }

    /// `(eigenvalues, eigenvectors)` of symmetric matrices, from the lower (or upper) triangle.
    fn _eigh(&self, py: Python<'_>, upper: bool) -> PyResult<(PyTensor, PyTensor)> {
        let (w, v) = traced(py, "eigh", || self.t.eigh(upper))?;
        Ok((PyTensor::new(w), PyTensor::new(v)))
    }

    /// LU with partial pivoting: `(lu, pivots, permutation)`, pivots 1-based (int32).
    fn _lu(&self, py: Python<'_>) -> PyResult<(PyTensor, PyTensor, PyTensor)> {
        let (lu, pivots, perm) = traced(py, "lu", || self.t.lu())?;
        Ok((PyTensor::new(lu), PyTensor::new(pivots), PyTensor::new(perm)))
    }

    /// The permutation of `rows` rows that 1-based LAPACK pivots make.
    fn _lu_pivots_to_permutation(&self, py: Python<'_>, rows: usize) -> PyResult<PyTensor> {
        record(py, "lu_pivots_to_permutation", || self.t.lu_pivots_to_permutation(rows))
    }

    // ---- complex numbers (the torch bridge's `real`, `imag`, `complex` and FFTs) ----

    /// The real part (a real number is its own).
    fn _real(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "real", || self.t.real())
    }

    /// The imaginary part (zero for a real number).
    fn _imag(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "imag", || self.t.imag())
    }

    /// `self + other i`.
    fn _complex(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "complex", || self.t.complex(&other.t))
    }

    /// XLA's FFT over the last `lengths.len()` dims: kind "FFT", "IFFT", "RFFT" or "IRFFT".
    fn _fft(&self, py: Python<'_>, kind: &str, lengths: Vec<i64>) -> PyResult<PyTensor> {
        use xlaprof_core::ir::FftKind;
        let kind = match kind {
            "FFT" => FftKind::Fft,
            "IFFT" => FftKind::Ifft,
            "RFFT" => FftKind::Rfft,
            "IRFFT" => FftKind::Irfft,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown FFT kind {other:?}; the kinds are FFT, IFFT, RFFT, IRFFT"
                )))
            }
        };
        record(py, "fft", || self.t.fft(kind, &lengths))
    }

    // ---- neural-network ops ----

    /// Softmax along `dim`, computed in `dtype` when given.
    #[pyo3(signature = (dim, dtype=None))]
    fn softmax(
        &self,
        py: Python<'_>,
        dim: i64,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dtype = optional_dtype(dtype)?;
        record(py, "softmax", || match dtype {
            Some(d) => self.t.cast(d)?.softmax(dim),
            None => self.t.softmax(dim),
        })
    }

    /// Log-softmax along `dim`, computed in `dtype` when given.
    #[pyo3(signature = (dim, dtype=None))]
    fn log_softmax(
        &self,
        py: Python<'_>,
        dim: i64,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dtype = optional_dtype(dtype)?;
        record(py, "log_softmax", || match dtype {
            Some(d) => self.t.cast(d)?.log_softmax(dim),
            None => self.t.log_softmax(dim),
        })
    }

    #[pyo3(signature = (min=None, max=None))]
    fn clamp(&self, py: Python<'_>, min: Option<f64>, max: Option<f64>) -> PyResult<PyTensor> {
        let (lo, hi) = (min.unwrap_or(f64::NEG_INFINITY), max.unwrap_or(f64::INFINITY));
        record(py, "clamp", || self.t.clamp(lo, hi))
    }

    /// `clamp` under its NumPy name.
    #[pyo3(signature = (min=None, max=None))]
    fn clip(&self, py: Python<'_>, min: Option<f64>, max: Option<f64>) -> PyResult<PyTensor> {
        self.clamp(py, min, max)
    }

    fn logical_and(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "logical_and", || self.t.logical_and(&other.t))
    }

    fn logical_or(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "logical_or", || self.t.logical_or(&other.t))
    }

    fn one_hot(&self, py: Python<'_>, num_classes: i64) -> PyResult<PyTensor> {
        record(py, "one_hot", || self.t.one_hot(num_classes, DType::F32))
    }
}

/// The dtype conversions PyTorch names by method (`t.double()`, `t.long()`, ...).
macro_rules! conversions {
    ($($name:ident => $dtype:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[pyo3(signature = (memory_format=None))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    memory_format: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<PyTensor> {
                    let _ = memory_format;
                    record(py, stringify!($name), || self.t.cast(DType::$dtype))
                }
            )*
        }
    };
}

conversions!(
    float => F32, double => F64, half => F16, bfloat16 => BF16, long => S64, int => S32,
    bool => Pred, byte => U8, char => S8,
);

/// `t` with `value` where `mask` is true (`mask` must broadcast to `t`'s shape, not beyond).
/// `t` without those of the dims `chosen` that have size 1 (`Tensor.squeeze`; the way back of the
/// torch bridge's native `unsqueeze` views).
pub(crate) fn squeezed(py: Python<'_>, t: &Tensor, chosen: &[usize]) -> PyResult<PyTensor> {
    let kept = t.dims().iter().enumerate().filter(|&(i, &n)| !(n == 1 && chosen.contains(&i)));
    let out: Vec<i64> = kept.map(|(_, &n)| n).collect();
    record(py, "squeeze", || t.reshape(&out))
}

pub(crate) fn masked_fill(
    py: Python<'_>,
    t: &Tensor,
    mask: &Tensor,
    value: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let value = Operand::extract(py, "masked_fill", value)?;
    if let Operand::Tensor(v) = &value {
        if v.rank() != 0 {
            return Err(super::errors::Class::Shape.err(format!(
                "masked_fill only supports a 0-dimension value tensor, not {}",
                v.shape()
            )));
        }
    }
    let fits = mask.rank() <= t.rank()
        && mask.dims().iter().rev().zip(t.dims().iter().rev()).all(|(&m, &d)| m == d || m == 1);
    if !fits {
        return Err(super::errors::Class::Shape.err(format!(
            "masked_fill: the mask {} does not broadcast to the tensor's shape {}",
            mask.shape(),
            t.shape()
        )));
    }
    record(py, "masked_fill", || {
        let fill = match &value {
            Operand::Scalar(v) => Tensor::scalar(*v, t.dtype()),
            Operand::Tensor(v) => v.cast(t.dtype())?,
        };
        Tensor::where_(mask, &fill, t)
    })
}

/// A new tensor with `t`'s value, which later in-place changes of `t` do not reach; it is in the
/// autograd graph when `t` is (then it is two reshapes, which XLA removes).
pub(crate) fn clone_tensor(py: Python<'_>, t: &Tensor) -> PyResult<PyTensor> {
    if t.requires_grad() && super::trace::grad_enabled() {
        record(py, "clone", || t.unsqueeze(0)?.squeeze(0))
    } else {
        Ok(PyTensor::new(t.detach()))
    }
}
