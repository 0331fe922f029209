//! Neural-network ops, composed from primitives (so autograd and lowering come for free), plus
//! the windowed primitives convolution and pooling.

use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{Op, ReduceKind};
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

    /// 2-D convolution of an `[N, C, H, W]` input with an `[O, C / groups, KH, KW]` kernel.
    #[track_caller]
    pub fn conv2d(
        &self,
        kernel: &Tensor,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
        groups: i64,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let (x, k) = (self, kernel);
        let ok = x.rank() == 4
            && k.rank() == 4
            && groups > 0
            && x.dims()[1] == k.dims()[1] * groups
            && k.dims()[0] % groups == 0
            && x.dtype() == k.dtype()
            && stride.iter().chain(&dilation).all(|&s| s > 0);
        if !ok {
            return Err(shape_error(
                "conv2d",
                &location,
                format!(
                    "cannot convolve input {} with kernel {} (groups {groups})",
                    x.shape(),
                    k.shape()
                ),
            ));
        }
        let out_hw: Vec<i64> = (0..2)
            .map(|i| {
                let (size, kk) = (x.dims()[2 + i], k.dims()[2 + i]);
                let eff = dilation[i] * (kk - 1) + 1;
                (size + 2 * padding[i] - eff) / stride[i] + 1
            })
            .collect();
        if out_hw.iter().any(|&d| d <= 0) {
            return Err(shape_error(
                "conv2d",
                &location,
                format!("kernel {} is larger than padded input {}", k.shape(), x.shape()),
            ));
        }
        let dims = vec![x.dims()[0], k.dims()[0], out_hw[0], out_hw[1]];
        let op = Op::Conv {
            stride: stride.to_vec(),
            padding: padding.iter().map(|&p| (p, p)).collect(),
            lhs_dilation: vec![1, 1],
            rhs_dilation: dilation.to_vec(),
            groups,
        };
        Ok(Tensor::op(op, x.shape().with_dims(dims), &[x, k], location, None))
    }

    /// Max pooling over `[N, C, H, W]`.
    #[track_caller]
    pub fn max_pool2d(
        &self,
        kernel: [i64; 2],
        stride: [i64; 2],
        padding: [i64; 2],
    ) -> Result<Tensor> {
        pool(self, ReduceKind::Max, kernel, stride, padding, SourceLocation::caller())
    }

    /// Average pooling over `[N, C, H, W]` (padding counts as zeros, like PyTorch's default).
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: [i64; 2],
        stride: [i64; 2],
        padding: [i64; 2],
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let summed = pool(self, ReduceKind::Sum, kernel, stride, padding, location.clone())?;
        scoped(&location, || summed.div_scalar((kernel[0] * kernel[1]) as f64))
    }
}

fn pool(
    x: &Tensor,
    kind: ReduceKind,
    kernel: [i64; 2],
    stride: [i64; 2],
    padding: [i64; 2],
    location: SourceLocation,
) -> Result<Tensor> {
    if x.rank() != 4 || kernel.iter().chain(&stride).any(|&k| k <= 0) {
        return Err(shape_error(
            "pool2d",
            &location,
            format!("needs an [N, C, H, W] input and positive sizes, got {}", x.shape()),
        ));
    }
    let out: Vec<i64> =
        (0..2).map(|i| (x.dims()[2 + i] + 2 * padding[i] - kernel[i]) / stride[i] + 1).collect();
    if out.iter().any(|&d| d <= 0) {
        return Err(shape_error(
            "pool2d",
            &location,
            format!("window {kernel:?} is larger than {}", x.shape()),
        ));
    }
    let init = match kind {
        ReduceKind::Max => f64::NEG_INFINITY,
        _ => 0.0,
    };
    let init = scoped(&location, || Tensor::scalar(init, x.dtype()));
    let dims = vec![x.dims()[0], x.dims()[1], out[0], out[1]];
    let op = Op::ReduceWindow {
        kind,
        window: vec![1, 1, kernel[0], kernel[1]],
        strides: vec![1, 1, stride[0], stride[1]],
        padding: vec![(0, 0), (0, 0), (padding[0], padding[0]), (padding[1], padding[1])],
    };
    Ok(Tensor::op(op, x.shape().with_dims(dims), &[x, &init], location, None))
}
