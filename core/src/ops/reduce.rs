//! Reductions over any axes, with keepdim.

use crate::autograd::grad_fn;
use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{Op, ReduceKind};
use crate::location::{scoped, SourceLocation};
use crate::shape::normalize_axis;
use crate::tensor::Tensor;

use super::shape_error;

fn axes_of(
    op: &'static str,
    t: &Tensor,
    axes: &[i64],
    location: &SourceLocation,
) -> Result<Vec<usize>> {
    if axes.is_empty() {
        return Ok((0..t.rank()).collect()); // no axes: reduce everything
    }
    if t.rank() == 0 {
        // A 0-d tensor accepts dim 0 or -1 (PyTorch's convention); there is nothing to reduce.
        return match axes.iter().all(|&a| a == 0 || a == -1) {
            true => Ok(Vec::new()),
            false => Err(shape_error(
                op,
                location,
                format!("axis {axes:?} is out of range for {}", t.shape()),
            )),
        };
    }
    let mut out = Vec::new();
    for &a in axes {
        let n = normalize_axis(a, t.rank()).ok_or_else(|| {
            shape_error(op, location, format!("axis {a} is out of range for {}", t.shape()))
        })?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn kept_dims(t: &Tensor, axes: &[usize]) -> Vec<i64> {
    t.dims().iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect()
}

fn reduce(
    kind: ReduceKind,
    x: &Tensor,
    axes: &[i64],
    keepdim: bool,
    location: SourceLocation,
) -> Result<Tensor> {
    let name = Op::Reduce { kind, axes: vec![] }.name();
    if x.dtype().is_complex() && kind != ReduceKind::Sum {
        return Err(shape_error(
            name,
            &location,
            format!("complex numbers are not ordered ({})", x.shape()),
        ));
    }
    let axes = axes_of(name, x, axes, &location)?;
    let dims: Vec<i64> =
        x.dims().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
    let kept = kept_dims(x, &axes);
    let (xc, kept_c) = (x.clone(), kept.clone());
    let axes_i: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let grad = grad_fn(name, &[x], move |g| {
        let g = g.reshape(&kept_c)?.broadcast_to(xc.dims())?;
        Ok(vec![Some(match kind {
            ReduceKind::Sum => g,
            ReduceKind::Max | ReduceKind::Min => {
                // To the elements equal to the extreme, split evenly among ties.
                let ext = if kind == ReduceKind::Max {
                    xc.amax(&axes_i, true)?
                } else {
                    xc.amin(&axes_i, true)?
                };
                let mask = xc.eq(&ext)?.cast(g.dtype())?;
                let count = mask.sum(&axes_i, true)?;
                g.mul(&mask)?.div(&count)?
            }
        })])
    });
    scoped(&location, || {
        let r = Tensor::op(
            Op::Reduce { kind, axes },
            x.shape().with_dims(dims),
            &[x],
            location.clone(),
            grad,
        );
        if keepdim {
            r.reshape(&kept)
        } else {
            Ok(r)
        }
    })
}

impl Tensor {
    /// Sum over `axes` (all when empty). Integers and bools sum in s64, like PyTorch (so 300 u8
    /// sevens sum to 2100).
    #[track_caller]
    pub fn sum(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dtype = self.dtype();
        if !dtype.is_float() && !dtype.is_complex() && dtype != DType::S64 {
            let wide = self.cast_at(DType::S64, &location)?;
            return reduce(ReduceKind::Sum, &wide, axes, keepdim, location);
        }
        reduce(ReduceKind::Sum, self, axes, keepdim, location)
    }

    /// Maximum over `axes` (all when empty).
    #[track_caller]
    pub fn amax(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        reduce(ReduceKind::Max, self, axes, keepdim, SourceLocation::caller())
    }

    /// Minimum over `axes` (all when empty).
    #[track_caller]
    pub fn amin(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        reduce(ReduceKind::Min, self, axes, keepdim, SourceLocation::caller())
    }

    /// Mean over `axes` (all when empty).
    #[track_caller]
    pub fn mean(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if !self.dtype().is_float() && !self.dtype().is_complex() {
            return Err(shape_error(
                "mean",
                &location,
                format!(
                    "mean needs a float tensor, not {}: cast it first (as in PyTorch)",
                    self.shape()
                ),
            ));
        }
        let ax = axes_of("mean", self, axes, &location)?;
        let n: i64 = ax.iter().map(|&a| self.dims()[a]).product();
        scoped(&location, || self.sum(axes, keepdim)?.div_scalar(n as f64))
    }

    /// Variance over `axes`; `correction` 1 is the unbiased estimate (PyTorch's default).
    #[track_caller]
    pub fn var(&self, axes: &[i64], correction: i64, keepdim: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let ax = axes_of("var", self, axes, &location)?;
        let n: i64 = ax.iter().map(|&a| self.dims()[a]).product();
        scoped(&location, || {
            let centered = self.sub(&self.mean(axes, true)?)?;
            centered.mul(&centered)?.sum(axes, keepdim)?.div_scalar((n - correction).max(0) as f64)
        })
    }

    /// `log(sum(exp(x)))` over `axes`, computed stably.
    #[track_caller]
    pub fn logsumexp(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            // Shift by the maximum for stability, unless it is infinite (then -inf or inf is the
            // answer and the shift would make NaN).
            let m = self.amax(axes, true)?.detach();
            let finite = m.abs()?.lt(&Tensor::scalar(f64::INFINITY, m.dtype()))?;
            let m = Tensor::where_(&finite, &m, &Tensor::scalar(0.0, m.dtype()))?;
            let s = self.sub(&m)?.exp()?.sum(axes, true)?.log()?.add(&m)?;
            if keepdim {
                Ok(s)
            } else {
                let ax = axes_of("logsumexp", self, axes, &location)?;
                let dims: Vec<i64> = self
                    .dims()
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !ax.contains(i))
                    .map(|(_, &d)| d)
                    .collect();
                s.reshape(&dims)
            }
        })
    }

    /// Index of the maximum along `axis` (the first one on ties), as s64.
    #[track_caller]
    pub fn argmax(&self, axis: i64, keepdim: bool) -> Result<Tensor> {
        arg_extreme(self, axis, keepdim, true, SourceLocation::caller())
    }

    /// Index of the minimum along `axis` (the first one on ties), as s64.
    #[track_caller]
    pub fn argmin(&self, axis: i64, keepdim: bool) -> Result<Tensor> {
        arg_extreme(self, axis, keepdim, false, SourceLocation::caller())
    }
}

fn arg_extreme(
    x: &Tensor,
    axis: i64,
    keepdim: bool,
    max: bool,
    location: SourceLocation,
) -> Result<Tensor> {
    let Some(&a) = axes_of("argmax", x, &[axis], &location)?.first() else {
        // The only index of a 0-d tensor.
        return Ok(scoped(&location, || Tensor::scalar(0.0, DType::S64)));
    };
    scoped(&location, || {
        let x = x.detach();
        let ext = if max { x.amax(&[a as i64], true)? } else { x.amin(&[a as i64], true)? };
        // NaN wins, like PyTorch: a row with a NaN points at its first NaN.
        let hit = x.eq(&ext)?.logical_or(&x.ne(&x)?)?;
        let idx = Tensor::op(
            Op::Iota { axis: a },
            x.shape().with_dtype(DType::S64),
            &[],
            location.clone(),
            None,
        );
        let big = Tensor::scalar(i64::MAX as f64, DType::S64);
        Tensor::where_(&hit, &idx, &big)?.amin(&[a as i64], keepdim)
    })
}

impl Tensor {
    /// A stable sort along `axis`: the sorted values and the s64 positions they came from
    /// (`torch.sort`). NaN sorts last ascending, first descending. The values' gradient goes
    /// back to the positions they came from.
    #[track_caller]
    pub fn sort(&self, axis: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        let location = SourceLocation::caller();
        let Some(&a) = axes_of("sort", self, &[axis], &location)?.first() else {
            // A 0-d tensor is sorted; its one position is 0.
            return Ok((self.clone(), scoped(&location, || Tensor::scalar(0.0, DType::S64))));
        };
        let x = self.detach();
        let indices = Tensor::op(
            Op::Sort { axis: a, descending, indices: true },
            self.shape().with_dtype(DType::S64),
            &[&x],
            location.clone(),
            None,
        );
        let (xs, idx) = (self.clone(), indices.clone());
        let grad =
            grad_fn("sort", &[self], move |g| Ok(vec![Some(unsort(g, &idx, a, xs.dims())?)]));
        let values = Tensor::op(
            Op::Sort { axis: a, descending, indices: false },
            self.shape().clone(),
            &[self],
            location,
            grad,
        );
        Ok((values, indices))
    }
}

/// `g` (laid out as the sorted values) put back where each value came from: a flat index_add of
/// each element at its row's offset plus its position.
fn unsort(g: &Tensor, indices: &Tensor, axis: usize, dims: &[i64]) -> Result<Tensor> {
    let rank = dims.len();
    let last = rank as i64 - 1;
    let (g, idx) = (g.transpose(axis as i64, last)?, indices.transpose(axis as i64, last)?);
    let moved = g.dims().to_vec();
    let n = moved[rank - 1];
    let rows: i64 = moved[..rank - 1].iter().product();
    let base = Tensor::arange(0.0, (rows * n) as f64, n as f64, DType::S64)?.reshape(&[rows, 1])?;
    let flat = idx.reshape(&[rows, n])?.add(&base)?.reshape(&[rows * n])?;
    let placed =
        Tensor::zeros(&[rows * n], g.dtype()).index_add(0, &flat, &g.reshape(&[rows * n])?)?;
    placed.reshape(&moved)?.transpose(axis as i64, last)
}
