//! Neural-network ops, composed from primitives (so autograd and lowering come for free).

use crate::dtype::DType;
use crate::error::Result;
use crate::location::{scoped, SourceLocation};
use crate::tensor::Tensor;

use super::shape_error;

impl Tensor {
    #[track_caller]
    pub fn softmax(&self, axis: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let shifted = self.sub(&self.amax(&[axis], true)?.detach())?;
            let e = shifted.exp()?;
            e.div(&e.sum(&[axis], true)?)
        })
    }

    #[track_caller]
    pub fn log_softmax(&self, axis: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || self.sub(&self.logsumexp(&[axis], true)?))
    }

    /// Mean cross entropy of `[N, C]` logits against `[N]` integer class labels.
    #[track_caller]
    pub fn cross_entropy(&self, labels: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() != 2 || labels.rank() != 1 || labels.dims()[0] != self.dims()[0] {
            return Err(shape_error(
                "cross_entropy",
                &location,
                format!(
                    "needs [N, C] logits and [N] labels, got {} and {}",
                    self.shape(),
                    labels.shape()
                ),
            ));
        }
        scoped(&location, || {
            let logp = self.log_softmax(-1)?;
            let target = labels.one_hot(self.dims()[1], self.dtype())?;
            logp.mul(&target)?.sum(&[-1], false)?.mean(&[], false)?.neg()
        })
    }

    /// Layer normalization over the last `normalized.len()` dims, then `* weight + bias`.
    #[track_caller]
    pub fn layer_norm(
        &self,
        normalized: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let k = normalized.len();
        if k > self.rank() || self.dims()[self.rank() - k..] != *normalized {
            return Err(shape_error(
                "layer_norm",
                &location,
                format!("{normalized:?} are not the last dims of {}", self.shape()),
            ));
        }
        scoped(&location, || {
            let axes: Vec<i64> = (self.rank() - k..self.rank()).map(|a| a as i64).collect();
            let mean = self.mean(&axes, true)?;
            let centered = self.sub(&mean)?;
            let var = centered.mul(&centered)?.mean(&axes, true)?;
            let mut y = centered.mul(&var.add_scalar(eps)?.rsqrt()?)?;
            if let Some(w) = weight {
                y = y.mul(w)?;
            }
            if let Some(b) = bias {
                y = y.add(b)?;
            }
            Ok(y)
        })
    }

    /// Rows of this `[V, D]` table at integer `indices` of any shape: `[.., D]`.
    #[track_caller]
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() != 2 {
            return Err(shape_error(
                "embedding",
                &location,
                format!("the table must be [V, D], not {}", self.shape()),
            ));
        }
        scoped(&location, || {
            let rows = self.index_select(0, &indices.flatten()?)?;
            let mut dims = indices.dims().to_vec();
            dims.push(self.dims()[1]);
            rows.reshape(&dims)
        })
    }

    /// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)`;
    /// the mask comes from XLA's RNG with `seed`.
    #[track_caller]
    pub fn dropout(&self, p: f64, seed: i64, training: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if !(0.0..1.0).contains(&p) {
            return Err(shape_error("dropout", &location, format!("p must be in [0, 1), not {p}")));
        }
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        scoped(&location, || {
            let keep = Tensor::rand(self.dims(), seed, DType::F32)?.gt_scalar(p)?;
            let zero = Tensor::scalar(0.0, self.dtype());
            Tensor::where_(&keep, &self.mul_scalar(1.0 / (1.0 - p))?, &zero)
        })
    }
}

impl Tensor {
    /// The CTC loss's alpha recursion over time, in one loop ([`crate::ir::Op::CtcAlphas`]):
    /// `self` is the log-probability of each place at each step, `[batch, time, places]`;
    /// `skip` (bool, `[batch, places]`) where an alpha may come from two places back, `first`
    /// (integer, `[batch]`) each sequence's first step, `start` (bool, `[batch, places]`) the
    /// places it starts in. Not differentiable: the loss's gradient is the beta recursion (this
    /// one on time and places reversed) and the alphas, as torch's backward computes it.
    #[track_caller]
    pub fn ctc_alphas(&self, skip: &Tensor, first: &Tensor, start: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let d = self.dims();
        let fits = self.rank() == 3
            && matches!(self.dtype(), DType::F32 | DType::F64)
            && skip.dtype() == DType::Pred
            && start.dtype() == DType::Pred
            && skip.dims() == [d[0], d[2]]
            && start.dims() == [d[0], d[2]]
            && matches!(first.dtype(), DType::S32 | DType::S64)
            && first.dims() == [d[0]];
        if !fits {
            return Err(shape_error(
                "ctc_alphas",
                &location,
                format!(
                    "needs float log-probabilities [batch, time, places], bool [batch, places] skips and starts, and integer [batch] first steps, got {}, {}, {} and {}",
                    self.shape(),
                    skip.shape(),
                    start.shape(),
                    first.shape()
                ),
            ));
        }
        if self.requires_grad() {
            return Err(crate::error::Error::Autograd {
                message: format!(
                    "ctc_alphas is not differentiable by xlaprof's autograd (its input {} requires a gradient)",
                    self.shape()
                ),
                location,
            });
        }
        let first = scoped(&location, || first.cast(DType::S32))?;
        let op = crate::ir::Op::CtcAlphas;
        Ok(Tensor::op(op, self.shape().clone(), &[self, skip, &first, start], location, None))
    }
}
