//! Shape ops: reshape, permute, broadcast, squeeze, slice, concat, pad, flip, index_select,
//! index_add, one_hot.

use crate::autograd::grad_fn;
use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{Op, ReduceKind};
use crate::location::{scoped, SourceLocation};
use crate::shape::{normalize_axis, Dims, Shape};
use crate::tensor::Tensor;

use super::shape_error;

fn axis(op: &'static str, axis: i64, rank: usize, location: &SourceLocation) -> Result<usize> {
    normalize_axis(axis, rank).ok_or_else(|| {
        shape_error(
            op,
            location,
            format!("axis {axis} is out of range for a tensor of rank {rank}"),
        )
    })
}

impl Tensor {
    /// Broadcasts to `dims` (NumPy rules, aligned right).
    #[track_caller]
    pub fn broadcast_to(&self, dims: &[i64]) -> Result<Tensor> {
        self.broadcast_at(dims, &SourceLocation::caller())
    }

    pub(crate) fn broadcast_at(&self, dims: &[i64], location: &SourceLocation) -> Result<Tensor> {
        if self.dims() == dims {
            return Ok(self.clone());
        }
        let rank = self.rank();
        let ok = rank <= dims.len()
            && self
                .dims()
                .iter()
                .enumerate()
                .all(|(i, &d)| d == 1 || d == dims[dims.len() - rank + i]);
        if !ok {
            return Err(shape_error(
                "broadcast_to",
                location,
                format!("cannot broadcast {} to {:?}", self.shape(), dims),
            ));
        }
        let map: Vec<usize> = (0..rank).map(|i| dims.len() - rank + i).collect();
        let from = self.dims().to_vec();
        let grad = grad_fn("broadcast", &[self], move |g| Ok(vec![Some(g.sum_to(&from)?)]));
        Ok(Tensor::op(
            Op::Broadcast { dims: map },
            self.shape().with_dims(dims.to_vec()),
            &[self],
            location.clone(),
            grad,
        ))
    }

    /// Sums a broadcast gradient back down to `dims`.
    pub(crate) fn sum_to(&self, dims: &[i64]) -> Result<Tensor> {
        if self.dims() == dims {
            return Ok(self.clone());
        }
        let extra = self.rank() - dims.len();
        let axes: Vec<i64> = (0..self.rank())
            .filter(|&i| i < extra || (dims[i - extra] == 1 && self.dims()[i] != 1))
            .map(|i| i as i64)
            .collect();
        self.sum(&axes, false)?.reshape(dims)
    }

    /// Same elements, new dims; one dim may be -1 (inferred).
    #[track_caller]
    pub fn reshape(&self, dims: &[i64]) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let n = self.element_count() as i64;
        let Some(out) = crate::shape::infer_dims(n, dims) else {
            return Err(shape_error(
                "reshape",
                &location,
                format!("cannot reshape {} ({n} elements) to {:?}", self.shape(), dims),
            ));
        };
        if out == self.dims() {
            return Ok(self.clone());
        }
        let from = self.dims().to_vec();
        let grad = grad_fn("reshape", &[self], move |g| Ok(vec![Some(g.reshape(&from)?)]));
        Ok(Tensor::op(Op::Reshape, self.shape().with_dims(out), &[self], location, grad))
    }

    /// Flattens to one dimension.
    #[track_caller]
    pub fn flatten(&self) -> Result<Tensor> {
        self.reshape(&[-1])
    }

    /// Reorders dims: output dim `i` is input dim `perm[i]`.
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let mut seen = perm.to_vec();
        seen.sort_unstable();
        if seen != (0..self.rank()).collect::<Vec<_>>() {
            return Err(shape_error(
                "permute",
                &location,
                format!(
                    "{perm:?} is not a permutation of the {} dims of {}",
                    self.rank(),
                    self.shape()
                ),
            ));
        }
        let dims: Dims = perm.iter().map(|&p| self.dims()[p]).collect();
        let mut inverse = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        let grad = grad_fn("transpose", &[self], move |g| Ok(vec![Some(g.permute(&inverse)?)]));
        Ok(Tensor::op(
            Op::Transpose { perm: perm.to_vec() },
            self.shape().with_dims(dims),
            &[self],
            location,
            grad,
        ))
    }

    /// Swaps two dims.
    #[track_caller]
    pub fn transpose(&self, a: i64, b: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let (a, b) = (
            axis("transpose", a, self.rank(), &location)?,
            axis("transpose", b, self.rank(), &location)?,
        );
        let mut perm: Vec<usize> = (0..self.rank()).collect();
        perm.swap(a, b);
        scoped(&location, || self.permute(&perm))
    }

    /// Inserts a dim of size 1 at `axis`.
    #[track_caller]
    pub fn unsqueeze(&self, axis_: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = axis("unsqueeze", axis_, self.rank() + 1, &location)?;
        let mut dims = self.dims().to_vec();
        dims.insert(a, 1);
        scoped(&location, || self.reshape(&dims))
    }

    /// Removes the size-1 dim at `axis`.
    #[track_caller]
    pub fn squeeze(&self, axis_: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = axis("squeeze", axis_, self.rank(), &location)?;
        if self.dims()[a] != 1 {
            return Err(shape_error(
                "squeeze",
                &location,
                format!("dim {a} of {} is not 1", self.shape()),
            ));
        }
        let mut dims = self.dims().to_vec();
        dims.remove(a);
        scoped(&location, || self.reshape(&dims))
    }

    /// `x[start:end:step]` along `axis` (negative start/end count from the end).
    #[track_caller]
    pub fn slice(&self, axis_: i64, start: i64, end: i64, step: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = axis("slice", axis_, self.rank(), &location)?;
        let size = self.dims()[a];
        let fix = |i: i64| {
            if i < 0 {
                (i + size).max(0)
            } else {
                i.min(size)
            }
        };
        let (s, e) = (fix(start), fix(end));
        if step <= 0 {
            return Err(shape_error(
                "slice",
                &location,
                format!("step must be positive, not {step}"),
            ));
        }
        let n = if e > s { (e - s + step - 1) / step } else { 0 };
        let mut start_v = vec![0; self.rank()];
        let mut limit_v = self.dims().to_vec();
        let mut stride_v = vec![1; self.rank()];
        start_v[a] = s;
        limit_v[a] = if n > 0 { s + (n - 1) * step + 1 } else { s };
        stride_v[a] = step;
        let mut dims = self.dims().to_vec();
        dims[a] = n;
        let (rank, limit_a) = (self.rank(), limit_v[a]);
        let grad = grad_fn("slice", &[self], move |g| {
            let mut low = vec![0; rank];
            let mut high = vec![0; rank];
            let mut interior = vec![0; rank];
            low[a] = s;
            high[a] = size - limit_a;
            interior[a] = step - 1;
            Ok(vec![Some(g.pad_general(&low, &high, &interior, 0.0)?)])
        });
        let op = Op::Slice { start: start_v, limit: limit_v, stride: stride_v };
        Ok(Tensor::op(op, self.shape().with_dims(dims), &[self], location, grad))
    }

    /// Joins tensors along `axis`.
    #[track_caller]
    pub fn concat(tensors: &[&Tensor], axis_: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let Some(first) = tensors.first() else {
            return Err(shape_error("concat", &location, "needs at least one tensor".into()));
        };
        let a = axis("concat", axis_, first.rank(), &location)?;
        // Mixed dtypes join in their promoted dtype, like torch.cat.
        let dtype = tensors.iter().map(|t| t.dtype()).fold(first.dtype(), crate::shape::promote);
        if tensors.iter().any(|t| t.dtype() != dtype) {
            let cast: Vec<Tensor> =
                tensors.iter().map(|t| t.cast_at(dtype, &location)).collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = cast.iter().collect();
            return scoped(&location, || Tensor::concat(&refs, axis_));
        }
        for t in tensors {
            let same = t.rank() == first.rank()
                && t.dims()
                    .iter()
                    .zip(first.dims())
                    .enumerate()
                    .all(|(i, (x, y))| i == a || x == y);
            if !same {
                return Err(shape_error(
                    "concat",
                    &location,
                    format!("{} and {} differ outside axis {a}", first.shape(), t.shape()),
                ));
            }
        }
        let mut dims = first.dims().to_vec();
        dims[a] = tensors.iter().map(|t| t.dims()[a]).sum();
        let sizes: Vec<i64> = tensors.iter().map(|t| t.dims()[a]).collect();
        let grad = grad_fn("concatenate", tensors, move |g| {
            let mut offset = 0;
            sizes
                .iter()
                .map(|&n| {
                    let part = g.slice(a as i64, offset, offset + n, 1)?;
                    offset += n;
                    Ok(Some(part))
                })
                .collect()
        });
        Ok(Tensor::op(
            Op::Concat { axis: a },
            first.shape().with_dims(dims),
            tensors,
            location,
            grad,
        ))
    }

    /// Stacks equal-shaped tensors along a new `axis`.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], axis_: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let expanded: Vec<Tensor> =
                tensors.iter().map(|t| t.unsqueeze(axis_)).collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = expanded.iter().collect();
            Tensor::concat(&refs, axis_)
        })
    }

    /// Pads each dim by `(low, high)` with `value`.
    #[track_caller]
    pub fn pad(&self, pads: &[(i64, i64)], value: f64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if pads.len() != self.rank() {
            return Err(shape_error(
                "pad",
                &location,
                format!("{} pads given for {}", pads.len(), self.shape()),
            ));
        }
        let low: Vec<i64> = pads.iter().map(|p| p.0).collect();
        let high: Vec<i64> = pads.iter().map(|p| p.1).collect();
        scoped(&location, || self.pad_general(&low, &high, &vec![0; pads.len()], value))
    }

    /// Pads each dim `i` by `low[i]` before, `high[i]` after and `interior[i]` between its
    /// elements (StableHLO's pad; interior padding spreads a transposed convolution's input).
    #[track_caller]
    pub fn pad_general(
        &self,
        low: &[i64],
        high: &[i64],
        interior: &[i64],
        value: f64,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let rank = self.rank();
        if low.len() != rank || high.len() != rank || interior.len() != rank {
            return Err(shape_error(
                "pad",
                &location,
                format!(
                    "{}, {} and {} pads (before, after, interior) given for {}",
                    low.len(),
                    high.len(),
                    interior.len(),
                    self.shape()
                ),
            ));
        }
        let dims: Vec<i64> = (0..rank)
            .map(|i| {
                let d = self.dims()[i];
                low[i] + high[i] + d + (d - 1).max(0) * interior[i]
            })
            .collect();
        if dims.iter().any(|&d| d < 0) || low.iter().chain(high).any(|&p| p < 0) {
            return Err(shape_error(
                "pad",
                &location,
                format!("negative padding of {}", self.shape()),
            ));
        }
        let v = Tensor::scalar(value, self.dtype());
        let (lo, din) = (low.to_vec(), self.dims().to_vec());
        let inter = interior.to_vec();
        let grad = grad_fn("pad", &[self], move |g| {
            let mut x = g.clone();
            for (i, &d) in din.iter().enumerate() {
                let step = inter[i] + 1;
                x = x.slice(i as i64, lo[i], lo[i] + (d - 1).max(0) * step + 1, step)?;
            }
            Ok(vec![Some(x), None])
        });
        let op = Op::Pad { low: low.to_vec(), high: high.to_vec(), interior: interior.to_vec() };
        Ok(Tensor::op(op, self.shape().with_dims(dims), &[self, &v], location, grad))
    }

    /// Reverses the order of elements along `axes`.
    #[track_caller]
    pub fn flip(&self, axes: &[i64]) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let axes: Vec<usize> =
            axes.iter().map(|&a| axis("flip", a, self.rank(), &location)).collect::<Result<_>>()?;
        let mut unique = axes.clone();
        unique.sort_unstable();
        unique.dedup();
        if unique.len() != axes.len() {
            return Err(shape_error(
                "flip",
                &location,
                format!("axes {axes:?} repeat a dimension of {}", self.shape()),
            ));
        }
        let back: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
        let grad = grad_fn("reverse", &[self], move |g| Ok(vec![Some(g.flip(&back)?)]));
        Ok(Tensor::op(Op::Reverse { axes }, self.shape().clone(), &[self], location, grad))
    }

    /// Picks slices along `axis` by 1-D integer `indices` (`torch.index_select`).
    #[track_caller]
    pub fn index_select(&self, axis_: i64, indices: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = axis("index_select", axis_, self.rank(), &location)?;
        if indices.rank() != 1 || !matches!(indices.dtype(), DType::S32 | DType::S64) {
            return Err(shape_error(
                "index_select",
                &location,
                format!("indices must be 1-D s32/s64, not {}", indices.shape()),
            ));
        }
        let mut dims = self.dims().to_vec();
        dims[a] = indices.dims()[0];
        let (idx, from) = (indices.clone(), self.dims().to_vec());
        let dtype = self.dtype();
        let grad = grad_fn("index_select", &[self, indices], move |g| {
            let zeros = Tensor::zeros(&from, dtype);
            Ok(vec![Some(zeros.index_add(a as i64, &idx, g)?), None])
        });
        Ok(Tensor::op(
            Op::IndexSelect { axis: a },
            self.shape().with_dims(dims),
            &[self, indices],
            location,
            grad,
        ))
    }

    /// Adds the slices of `source` into a copy of this tensor at `indices` along `axis`
    /// (`torch.index_add`, the scatter-add of embedding gradients).
    #[track_caller]
    pub fn index_add(&self, axis_: i64, indices: &Tensor, source: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = self.index_rows("index_add", axis_, indices, source, &location)?;
        let idx = indices.clone();
        let grad = grad_fn("index_add", &[self, indices, source], move |g| {
            Ok(vec![Some(g.clone()), None, Some(g.index_select(a as i64, &idx)?)])
        });
        Ok(Tensor::op(
            Op::IndexAdd { axis: a },
            self.shape().clone(),
            &[self, indices, source],
            location,
            grad,
        ))
    }

    /// The axis rows `source` sends into `self` by `indices` (one row per index), or an error
    /// naming the three shapes.
    fn index_rows(
        &self,
        op: &'static str,
        axis_: i64,
        indices: &Tensor,
        source: &Tensor,
        location: &SourceLocation,
    ) -> Result<usize> {
        let a = axis(op, axis_, self.rank(), location)?;
        let mut want = self.dims().to_vec();
        if let Some(d) = want.get_mut(a) {
            *d = indices.dims().first().copied().unwrap_or(0);
        }
        if indices.rank() != 1 || source.dims() != want.as_slice() || source.dtype() != self.dtype()
        {
            return Err(shape_error(
                op,
                location,
                format!(
                    "source {} must be {} for indices {} into {}",
                    source.shape(),
                    Shape::new(self.dtype(), want),
                    indices.shape(),
                    self.shape()
                ),
            ));
        }
        Ok(a)
    }

    /// `index_add` that keeps the larger (`kind` max) or smaller (min) of each value and the rows
    /// of `source` sent to it (PyTorch's `index_reduce` with `amax`/`amin`, self included). The
    /// gradient goes to every value equal to the result, split evenly among ties, as PyTorch's.
    #[track_caller]
    pub fn index_reduce(
        &self,
        axis_: i64,
        indices: &Tensor,
        source: &Tensor,
        kind: ReduceKind,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if kind == ReduceKind::Sum {
            return scoped(&location, || self.index_add(axis_, indices, source));
        }
        let a = self.index_rows("index_reduce", axis_, indices, source, &location)?;
        let op = Op::IndexReduce { axis: a, kind };
        let (x, idx, src) = (self.clone(), indices.clone(), source.clone());
        let (grad_op, at) = (op.clone(), location.clone());
        let grad = grad_fn("index_reduce", &[self, indices, source], move |g| {
            // The result again (the same node structure: XLA computes it once).
            let out =
                Tensor::op(grad_op.clone(), x.shape().clone(), &[&x, &idx, &src], at.clone(), None);
            let dt = g.dtype();
            let self_hit = x.eq(&out)?.cast(dt)?;
            let src_hit = src.eq(&out.index_select(a as i64, &idx)?)?.cast(dt)?;
            let ties = self_hit.index_add(a as i64, &idx, &src_hit)?.maximum_scalar(1.0)?;
            let share = g.div(&ties)?;
            Ok(vec![
                Some(share.mul(&self_hit)?),
                None,
                Some(share.index_select(a as i64, &idx)?.mul(&src_hit)?),
            ])
        });
        Ok(Tensor::op(op, self.shape().clone(), &[self, indices, source], location, grad))
    }

    /// PyTorch's `index_reduce(dim, index, source, reduce, include_self)` for `reduce` `amax`,
    /// `amin` or `mean`: each value combined with the rows of `source` sent to it, itself left
    /// out when `include_self` is false (a value no row reaches stays as it is).
    #[track_caller]
    pub fn index_reduce_rows(
        &self,
        axis_: i64,
        indices: &Tensor,
        source: &Tensor,
        reduce: &str,
        include_self: bool,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = self.index_rows("index_reduce", axis_, indices, source, &location)?;
        scoped(&location, || {
            // How many rows reach each position along the axis, shaped to broadcast.
            let mut shape = vec![1; self.rank()];
            shape[a] = self.dims()[a];
            let ones = Tensor::full(&[indices.dims()[0]], 1.0, self.dtype());
            let hits = Tensor::full(&[self.dims()[a]], 0.0, self.dtype())
                .index_add(0, indices, &ones)?
                .reshape(&shape)?
                .broadcast_to(self.dims())?;
            let reached = hits.gt(&Tensor::scalar(0.0, self.dtype()))?;
            let kind = match reduce {
                "amax" => ReduceKind::Max,
                "amin" => ReduceKind::Min,
                "mean" => ReduceKind::Sum,
                other => {
                    return Err(shape_error(
                        "index_reduce",
                        &location,
                        format!("reduce must be 'amax', 'amin' or 'mean', not {other:?}"),
                    ))
                }
            };
            let identity = kind.identity(self.dtype());
            let base = if include_self {
                self.clone()
            } else {
                Tensor::where_(&reached, &Tensor::scalar(identity, self.dtype()), self)?
            };
            let combined = base.index_reduce(a as i64, indices, source, kind)?;
            if kind != ReduceKind::Sum {
                return Ok(combined);
            }
            let count =
                if include_self { hits.add_scalar(1.0)? } else { hits.maximum_scalar(1.0)? };
            let mean = combined.div(&count)?;
            if self.dtype().is_float() {
                Ok(mean)
            } else {
                mean.floor()?.cast(self.dtype())
            }
        })
    }

    /// One-hot encoding of integer labels: `[..] -> [.., classes]` of `dtype`.
    #[track_caller]
    pub fn one_hot(&self, classes: i64, dtype: DType) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if !matches!(self.dtype(), DType::S32 | DType::S64 | DType::U8 | DType::S8 | DType::S16) {
            return Err(shape_error(
                "one_hot",
                &location,
                format!("labels must be integers, not {}", self.shape()),
            ));
        }
        scoped(&location, || {
            let mut dims = self.dims().to_vec();
            dims.push(classes);
            let iota = Tensor::op(
                Op::Iota { axis: dims.len() - 1 },
                Shape::new(self.dtype(), dims.clone()),
                &[],
                location.clone(),
                None,
            );
            let labels = self.unsqueeze(-1)?.broadcast_to(&dims)?;
            iota.eq(&labels)?.cast(dtype)
        })
    }
}
