//! In-place ops, PyTorch's `t.add_(x)`, `t += x`, `t.copy_(src)`, ...: the new value is
//! recorded, then the tensor is rebound to it, so every holder of the tensor sees it (as an
//! optimizer updates parameters). The autograd graph records no in-place change; so, as PyTorch
//! refuses one on a leaf that requires grad, they run on a tensor that requires grad only under
//! `no_grad` (where `with torch.no_grad(): w -= lr * w.grad` runs in PyTorch too).

use pyo3::prelude::*;
use xlaprof_core::{DType, Tensor};

use super::args::Operand;
use super::arith::{binary, divide, with_alpha};
use super::errors::Class;
use super::ops::masked_fill;
use super::tensor::PyTensor;
use super::trace::{grad_enabled, record, traced};

/// bool < integers < floats < complex numbers: an in-place result may not climb this order (PyTorch's rule).
fn category(d: DType) -> u8 {
    match d {
        DType::Pred => 0,
        d if d.is_complex() => 3,
        d if d.is_float() => 2,
        _ => 1,
    }
}

/// Records `compute`'s value and rebinds `t` to it, cast to `t`'s dtype.
fn assign(
    py: Python<'_>,
    what: &str,
    t: &Tensor,
    compute: impl FnOnce() -> PyResult<PyTensor>,
) -> PyResult<()> {
    let refuse = |whose: &str| {
        Class::Autograd.err(format!(
            "{what}: {whose} requires grad, and in-place ops are not recorded by autograd; run \
             it under `with xp.no_grad():` (as PyTorch requires for a leaf that requires grad), \
             or use the out-of-place op"
        ))
    };
    if grad_enabled() && t.requires_grad() {
        return Err(refuse("the tensor"));
    }
    let new = compute()?.t;
    if grad_enabled() && new.requires_grad() {
        return Err(refuse("the value assigned"));
    }
    if category(new.dtype()) > category(t.dtype()) {
        return Err(Class::Shape.err(format!(
            "{what}: the result type {} cannot be cast to the tensor's {} in place",
            new.dtype(),
            t.dtype()
        )));
    }
    if new.dims() != t.dims() {
        return Err(Class::Shape.err(format!(
            "{what}: the result {} does not fit the tensor {} in place",
            new.shape(),
            t.shape()
        )));
    }
    let dtype = t.dtype();
    traced(py, what, || t.set_value(&new.cast(dtype)?))
}

#[pymethods]
impl PyTensor {
    /// Copies `src` (a tensor, an array or a number, broadcast and cast) into this tensor.
    #[pyo3(signature = (src, non_blocking=false))]
    fn copy_<'py>(
        slf: Bound<'py, Self>,
        src: &Bound<'py, PyAny>,
        non_blocking: bool,
    ) -> PyResult<Bound<'py, Self>> {
        let _ = non_blocking;
        let py = slf.py();
        let t = &slf.get().t;
        let src = Operand::extract(py, "copy_", src)?;
        assign(py, "copy_", t, || {
            record(py, "copy_", || match &src {
                Operand::Tensor(s) => s.cast(t.dtype())?.broadcast_to(t.dims()),
                Operand::Scalar(v) => Ok(Tensor::full(t.dims(), *v, t.dtype())),
            })
        })?;
        Ok(slf)
    }

    /// Fills the tensor with `value` (a number or a one-element tensor).
    fn fill_<'py>(slf: Bound<'py, Self>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let py = slf.py();
        let t = &slf.get().t;
        let value = Operand::extract(py, "fill_", value)?;
        assign(py, "fill_", t, || {
            record(py, "fill_", || match &value {
                Operand::Tensor(v) => v.cast(t.dtype())?.reshape(&[])?.broadcast_to(t.dims()),
                Operand::Scalar(v) => Ok(Tensor::full(t.dims(), *v, t.dtype())),
            })
        })?;
        Ok(slf)
    }

    fn zero_(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        let t = &slf.get().t;
        assign(py, "zero_", t, || record(py, "zero_", || Ok(Tensor::zeros(t.dims(), t.dtype()))))?;
        Ok(slf)
    }

    #[pyo3(signature = (other, *, alpha=1.0))]
    fn add_<'py>(
        slf: Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        alpha: f64,
    ) -> PyResult<Bound<'py, Self>> {
        let (py, t) = (slf.py(), &slf.get().t);
        assign(py, "add_", t, || {
            with_alpha(py, "add_", t, other, alpha, Tensor::add, Tensor::add_scalar)
        })?;
        Ok(slf)
    }

    #[pyo3(signature = (other, *, alpha=1.0))]
    fn sub_<'py>(
        slf: Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        alpha: f64,
    ) -> PyResult<Bound<'py, Self>> {
        let (py, t) = (slf.py(), &slf.get().t);
        assign(py, "sub_", t, || {
            with_alpha(py, "sub_", t, other, alpha, Tensor::sub, Tensor::sub_scalar)
        })?;
        Ok(slf)
    }

    fn mul_<'py>(slf: Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let (py, t) = (slf.py(), &slf.get().t);
        assign(py, "mul_", t, || binary(py, "mul_", t, other, Tensor::mul, Tensor::mul_scalar))?;
        Ok(slf)
    }

    #[pyo3(signature = (other, *, rounding_mode=None))]
    fn div_<'py>(
        slf: Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<Bound<'py, Self>> {
        let (py, t) = (slf.py(), &slf.get().t);
        assign(py, "div_", t, || divide(py, t, other, rounding_mode, false))?;
        Ok(slf)
    }

    fn masked_fill_<'py>(
        slf: Bound<'py, Self>,
        mask: &PyTensor,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        let (py, t) = (slf.py(), &slf.get().t);
        assign(py, "masked_fill_", t, || masked_fill(py, t, &mask.t, value))?;
        Ok(slf)
    }

    #[pyo3(signature = (min=None, max=None))]
    fn clamp_(
        slf: Bound<'_, Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> PyResult<Bound<'_, Self>> {
        let (py, t) = (slf.py(), &slf.get().t);
        let (lo, hi) = (min.unwrap_or(f64::NEG_INFINITY), max.unwrap_or(f64::INFINITY));
        assign(py, "clamp_", t, || record(py, "clamp_", || t.clamp(lo, hi)))?;
        Ok(slf)
    }

    fn __iadd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = &self.t;
        assign(py, "+=", t, || binary(py, "+=", t, other, Tensor::add, Tensor::add_scalar))
    }

    fn __isub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = &self.t;
        assign(py, "-=", t, || binary(py, "-=", t, other, Tensor::sub, Tensor::sub_scalar))
    }

    fn __imul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = &self.t;
        assign(py, "*=", t, || binary(py, "*=", t, other, Tensor::mul, Tensor::mul_scalar))
    }

    fn __itruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = &self.t;
        assign(py, "/=", t, || divide(py, t, other, None, false))
    }
}
