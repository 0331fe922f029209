//! Elementwise ops and Python's operators on `Tensor`: unary functions, binary ops with a
//! tensor or a number, `alpha=` and rounding modes, comparisons, matrix products. Each is recorded
//! (not run) at the caller's Python line.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use xlaprof_core::{DType, Tensor};

use super::args::*;
use super::tensor::PyTensor;
use super::trace::record;

type EngineResult = xlaprof_core::Result<Tensor>;

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

fn is_integer(t: &Tensor) -> bool {
    !(t.dtype() == DType::Pred || t.dtype().is_float() || t.dtype().is_complex())
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
        // Half precision as torch computes it, `a + alpha * b` in float32 rounded once.
        Operand::Tensor(b) if a.dtype() == b.dtype() && a.dtype().is_half() => {
            tensor_op(&a.cast(DType::F32)?, &b.cast(DType::F32)?.mul_scalar(alpha)?)?
                .cast(a.dtype())
        }
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
        self.__add__(py, other) // commutative
    }
    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "sub", &self.t, other, Tensor::sub, Tensor::sub_scalar)
    }
    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "mul", &self.t, other, Tensor::mul, Tensor::mul_scalar)
    }
    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.__mul__(py, other) // commutative
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
    // `~`, `&`, `|`, `^` are bitwise on integers, as in PyTorch and NumPy; `~`, `&`, `|` logical
    // on anything else, `^` an error on floats (as in both).
    fn __invert__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        if is_integer(&self.t) {
            return record(py, "bitwise_not", || self.t.bitwise_not());
        }
        self.logical_not(py)
    }
    fn __and__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        if is_integer(&self.t) {
            return binary(py, "and", &self.t, other, Tensor::bitwise_and, |t, v| {
                t.bitwise_and(&Tensor::scalar(v, t.dtype()))
            });
        }
        binary(py, "and", &self.t, other, Tensor::logical_and, |t, v| {
            t.logical_and(&Tensor::scalar(v, DType::Pred))
        })
    }
    fn __or__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        if is_integer(&self.t) {
            return binary(py, "or", &self.t, other, Tensor::bitwise_or, |t, v| {
                t.bitwise_or(&Tensor::scalar(v, t.dtype()))
            });
        }
        binary(py, "or", &self.t, other, Tensor::logical_or, |t, v| {
            t.logical_or(&Tensor::scalar(v, DType::Pred))
        })
    }
    fn __xor__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary(py, "xor", &self.t, other, Tensor::bitwise_xor, |t, v| {
            t.bitwise_xor(&Tensor::scalar(v, t.dtype()))
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
}
