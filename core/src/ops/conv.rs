//! Convolution and pooling over `[N, C, H, W]`, and their gradients.
//!
//! The gradients are convolutions and windowed sums again:
//! - input gradient: the output gradient dilated by the stride, convolved with the kernel flipped
//!   and with its in/out features swapped (a transposed convolution);
//! - kernel gradient: the input convolved with the output gradient, batch and features swapped;
//! - average pooling: a windowed sum over the dilated output gradient;
//! - max pooling: the input cut into patches (a convolution with an identity kernel), the
//!   gradient sent to each window's first maximum (as PyTorch does), and the patches folded back
//!   with the transposed convolution.

use crate::autograd::grad_fn;
use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{Op, ReduceKind};
use crate::location::{scoped, SourceLocation};
use crate::tensor::Tensor;

use super::shape_error;

/// Geometry of one 2-D convolution: per spatial dim, (low, high) padding, input dilation, stride
/// and kernel dilation.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    stride: [i64; 2],
    padding: [(i64, i64); 2],
    lhs_dilation: [i64; 2],
    rhs_dilation: [i64; 2],
    groups: i64,
    batch_groups: i64,
}

impl Geometry {
    fn out_dim(&self, i: usize, size: i64, kernel: i64) -> i64 {
        let input = (size - 1) * self.lhs_dilation[i] + 1 + self.padding[i].0 + self.padding[i].1;
        let eff = (kernel - 1) * self.rhs_dilation[i] + 1;
        (input - eff).div_euclid(self.stride[i]) + 1
    }
}

/// A convolution's output height and width, or the error of a kernel that does not fit.
fn out_dims(x: &Tensor, k: &Tensor, g: Geometry, location: &SourceLocation) -> Result<Vec<i64>> {
    let out: Vec<i64> = (0..2).map(|i| g.out_dim(i, x.dims()[2 + i], k.dims()[2 + i])).collect();
    if out.iter().any(|&d| d <= 0) {
        return Err(shape_error(
            "conv2d",
            location,
            format!("kernel {} does not fit the padded input {}", k.shape(), x.shape()),
        ));
    }
    Ok(out)
}

/// The convolution primitive. Only the forward form (no input dilation, no batch groups) records
/// a gradient.
fn conv(x: &Tensor, k: &Tensor, g: Geometry, location: &SourceLocation) -> Result<Tensor> {
    let out = out_dims(x, k, g, location)?;
    let dims = vec![x.dims()[0] / g.batch_groups, k.dims()[0], out[0], out[1]];
    let op = Op::Conv {
        stride: g.stride.to_vec(),
        padding: g.padding.to_vec(),
        lhs_dilation: g.lhs_dilation.to_vec(),
        rhs_dilation: g.rhs_dilation.to_vec(),
        groups: g.groups,
        batch_groups: g.batch_groups,
    };
    let grad = if g.lhs_dilation == [1, 1] && g.batch_groups == 1 {
        let (xc, kc) = (x.clone(), k.clone());
        grad_fn("convolution", &[x, k], move |dy| {
            let loc = SourceLocation::caller();
            let dx = conv_input_grad(dy, &kc, xc.dims(), g, &loc)?;
            let dk = conv_kernel_grad(&xc, dy, kc.dims(), g, &loc)?;
            Ok(vec![Some(dx), Some(dk)])
        })
    } else {
        None
    };
    Ok(Tensor::op(op, x.shape().with_dims(dims), &[x, k], location.clone(), grad))
}

/// The largest depthwise kernel (taps) written as shifted products rather than a convolution.
const MAX_DEPTHWISE_TAPS: i64 = 49;

/// A depthwise convolution (each input channel its own group, with `O / C` kernels: MobileNet's,
/// EfficientNet's, ConvNeXt's 7x7, Mamba's 1-d) as a sum over the kernel's taps of the input,
/// shifted by the tap, times the tap's weights: `y[n, o, p, q] = sum over (i, j) of
/// w[o, 0, i, j] * x_padded[n, o / m, p * s + i * d, q * s + j * d]`. XLA's CPU code runs a
/// feature-grouped convolution, and the batch-grouped one of its kernel gradient, as a dense
/// convolution over every pair of channels (320 channels: 320 times the work); here the forward
/// and both gradients (autograd's, of slices and products) are loops XLA fuses. Measured on a
/// 3x3 kernel over 8x320x8x8 (JAX, same XLA): the convolution 6.9 ms forward and 7.0 ms for its
/// kernel gradient, the taps 0.27 and 0.62 ms.
///
/// Half-precision operands are summed in f32 and rounded once, as a convolution accumulates (in
/// bf16, 49 taps' sum was off by 3x torch's error).
fn depthwise(x: &Tensor, k: &Tensor, g: Geometry, location: &SourceLocation) -> Result<Tensor> {
    if x.dtype().is_half() {
        let wide = depthwise(&x.cast(DType::F32)?, &k.cast(DType::F32)?, g, location)?;
        return wide.cast(x.dtype());
    }
    let (n, c) = (x.dims()[0], x.dims()[1]);
    let (o, kh, kw) = (k.dims()[0], k.dims()[2], k.dims()[3]);
    let out = out_dims(x, k, g, location)?;
    let padded = x.pad(&[(0, 0), (0, 0), g.padding[0], g.padding[1]], 0.0)?;
    let weights = k.reshape(&[o, kh * kw])?;
    let mut sum: Option<Tensor> = None;
    for i in 0..kh {
        for j in 0..kw {
            let (top, left) = (i * g.rhs_dilation[0], j * g.rhs_dilation[1]);
            let tap = padded
                .slice(2, top, top + g.stride[0] * (out[0] - 1) + 1, g.stride[0])?
                .slice(3, left, left + g.stride[1] * (out[1] - 1) + 1, g.stride[1])?;
            // Output channel o reads input channel o / m (m kernels per channel).
            let tap = if o == c {
                tap
            } else {
                tap.unsqueeze(2)?
                    .broadcast_to(&[n, c, o / c, out[0], out[1]])?
                    .reshape(&[n, o, out[0], out[1]])?
            };
            let w = weights.slice(1, i * kw + j, i * kw + j + 1, 1)?.reshape(&[1, o, 1, 1])?;
            let term = tap.mul(&w)?;
            sum = Some(match sum {
                None => term,
                Some(s) => s.add(&term)?,
            });
        }
    }
    sum.ok_or_else(|| shape_error("conv2d", location, format!("kernel {} has no taps", k.shape())))
}

/// d(conv)/d(input): a transposed convolution of `dy` back to `x_dims`.
fn conv_input_grad(
    dy: &Tensor,
    k: &Tensor,
    x_dims: &[i64],
    g: Geometry,
    location: &SourceLocation,
) -> Result<Tensor> {
    let (o, cg, kh, kw) = (k.dims()[0], k.dims()[1], k.dims()[2], k.dims()[3]);
    let groups = g.groups;
    // [O, C/g, kh, kw] -> [C, O/g, kh, kw], flipped in space.
    let kt = k
        .reshape(&[groups, o / groups, cg, kh, kw])?
        .permute(&[0, 2, 1, 3, 4])?
        .reshape(&[groups * cg, o / groups, kh, kw])?
        .flip(&[2, 3])?;
    let mut padding = [(0, 0); 2];
    for i in 0..2 {
        let kernel = k.dims()[2 + i];
        let eff = (kernel - 1) * g.rhs_dilation[i] + 1;
        let (lo, hi) = g.padding[i];
        let rest = (x_dims[2 + i] + lo + hi - eff).rem_euclid(g.stride[i]);
        padding[i] = (eff - 1 - lo, eff - 1 - hi + rest);
    }
    let back = Geometry {
        stride: [1, 1],
        padding,
        lhs_dilation: g.stride,
        rhs_dilation: g.rhs_dilation,
        groups,
        batch_groups: 1,
    };
    conv(dy, &kt, back, location)
}

/// d(conv)/d(kernel): the input convolved with the output gradient, batch and features
/// swapped: [C, N, H, W] with [O, N, Ho, Wo]. With feature groups this is one convolution of
/// as many batch groups (XLA's own form, JAX's too): group j of the input's channels meets group
/// j of the output's, where a convolution per group made a depthwise layer of 320 channels 320
/// convolutions, a graph that took XLA 38 s to compile.
fn conv_kernel_grad(
    x: &Tensor,
    dy: &Tensor,
    k_dims: &[i64],
    g: Geometry,
    location: &SourceLocation,
) -> Result<Tensor> {
    let lhs = x.permute(&[1, 0, 2, 3])?;
    let rhs = dy.permute(&[1, 0, 2, 3])?;
    let geometry = Geometry {
        stride: g.rhs_dilation,
        padding: g.padding,
        lhs_dilation: [1, 1],
        rhs_dilation: g.stride,
        groups: 1,
        batch_groups: g.groups,
    };
    let w = conv(&lhs, &rhs, geometry, location)?; // [C/g, O, kh', kw'], kh' >= kh
    let w = w.slice(2, 0, k_dims[2], 1)?.slice(3, 0, k_dims[3], 1)?;
    w.permute(&[1, 0, 2, 3])
}

/// The windowed-reduction primitive over the spatial dims of `[N, C, H, W]`.
fn reduce_window(
    x: &Tensor,
    kind: ReduceKind,
    kernel: [i64; 2],
    stride: [i64; 2],
    padding: [(i64, i64); 2],
    location: &SourceLocation,
) -> Result<Tensor> {
    let out: Vec<i64> = (0..2)
        .map(|i| {
            (x.dims()[2 + i] + padding[i].0 + padding[i].1 - kernel[i]).div_euclid(stride[i]) + 1
        })
        .collect();
    if out.iter().any(|&d| d <= 0) {
        return Err(shape_error(
            "pool2d",
            location,
            format!("window {kernel:?} is larger than {}", x.shape()),
        ));
    }
    let init = Tensor::scalar(kind.identity(x.dtype()), x.dtype());
    let dims = vec![x.dims()[0], x.dims()[1], out[0], out[1]];
    let op = Op::ReduceWindow {
        kind,
        window: vec![1, 1, kernel[0], kernel[1]],
        strides: vec![1, 1, stride[0], stride[1]],
        padding: vec![(0, 0), (0, 0), padding[0], padding[1]],
    };
    let grad = match kind {
        ReduceKind::Sum => {
            grad_fn("reduce_window", &[x], sum_window_backward(x.dims(), kernel, stride, padding))
        }
        ReduceKind::Max => {
            grad_fn("max_pool2d", &[x], max_window_backward(x, kernel, stride, padding))
        }
        ReduceKind::Min => None,
    };
    Ok(Tensor::op(op, x.shape().with_dims(dims), &[x, &init], location.clone(), grad))
}

/// The lowest finite value of a float dtype: padding for max pooling that stays finite when the
/// patches are cut out by a convolution (where `-inf * 0` would be NaN).
fn lowest(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => -65504.0,
        DType::BF16 => -3.38e38,
        DType::F32 => f32::MIN as f64,
        _ => f64::MIN,
    }
}

/// Windowed sum: every input element receives the sum of the windows that cover it.
fn sum_window_backward(
    x_dims: &[i64],
    kernel: [i64; 2],
    stride: [i64; 2],
    padding: [(i64, i64); 2],
) -> impl Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static {
    let x_dims = x_dims.to_vec();
    move |dy| {
        let mut low = vec![0, 0, 0, 0];
        let mut high = vec![0, 0, 0, 0];
        let mut interior = vec![0, 0, 0, 0];
        for i in 0..2 {
            let rest =
                (x_dims[2 + i] + padding[i].0 + padding[i].1 - kernel[i]).rem_euclid(stride[i]);
            low[2 + i] = kernel[i] - 1 - padding[i].0;
            high[2 + i] = kernel[i] - 1 - padding[i].1 + rest;
            interior[2 + i] = stride[i] - 1;
        }
        let spread = dy.pad_general(&low, &high, &interior, 0.0)?;
        let loc = SourceLocation::caller();
        Ok(vec![Some(reduce_window(&spread, ReduceKind::Sum, kernel, [1, 1], [(0, 0); 2], &loc)?)])
    }
}

/// Windowed max: the gradient goes to each window's first maximum, as PyTorch's max pooling.
fn max_window_backward(
    x: &Tensor,
    kernel: [i64; 2],
    stride: [i64; 2],
    padding: [(i64, i64); 2],
) -> impl Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static {
    let xc = x.clone();
    move |dy| {
        let (n, c) = (xc.dims()[0], xc.dims()[1]);
        let kk = kernel[0] * kernel[1];
        let padded = xc.pad_general(
            &[0, 0, padding[0].0, padding[1].0],
            &[0, 0, padding[0].1, padding[1].1],
            &[0; 4],
            lowest(xc.dtype()),
        )?;
        // Identity kernel: output channel c * kk + j copies window position j of channel c.
        let eye = Tensor::eye(kk, xc.dtype())?.reshape(&[1, kk, 1, kernel[0], kernel[1]])?;
        let ident = eye.broadcast_to(&[c, kk, 1, kernel[0], kernel[1]])?.reshape(&[
            c * kk,
            1,
            kernel[0],
            kernel[1],
        ])?;
        let g = Geometry {
            stride,
            padding: [(0, 0); 2],
            lhs_dilation: [1, 1],
            rhs_dilation: [1, 1],
            groups: c,
            batch_groups: 1,
        };
        let loc = SourceLocation::caller();
        let patches = conv(&padded, &ident, g, &loc)?; // [N, C*kk, Ho, Wo]
        let (ho, wo) = (patches.dims()[2], patches.dims()[3]);
        let patches = patches.reshape(&[n, c, kk, ho, wo])?;
        let first = patches.argmax(2, false)?.one_hot(kk, dy.dtype())?; // [N, C, Ho, Wo, kk]
        let routed = first.permute(&[0, 1, 4, 2, 3])?.mul(&dy.unsqueeze(2)?)?.reshape(&[
            n,
            c * kk,
            ho,
            wo,
        ])?;
        let dpadded = conv_input_grad(&routed, &ident, padded.dims(), g, &loc)?;
        let (h, w) = (xc.dims()[2], xc.dims()[3]);
        let dx = dpadded.slice(2, padding[0].0, padding[0].0 + h, 1)?;
        Ok(vec![Some(dx.slice(3, padding[1].0, padding[1].0 + w, 1)?)])
    }
}

impl Tensor {
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
            && stride.iter().chain(&dilation).all(|&s| s > 0)
            && padding.iter().all(|&p| p >= 0);
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
        let g = Geometry {
            stride,
            padding: [(padding[0], padding[0]), (padding[1], padding[1])],
            lhs_dilation: [1, 1],
            rhs_dilation: dilation,
            groups,
            batch_groups: 1,
        };
        let (kh, kw) = (k.dims()[2], k.dims()[3]);
        if groups > 1 && k.dims()[1] == 1 && kh * kw <= MAX_DEPTHWISE_TAPS {
            return scoped(&location, || depthwise(x, k, g, &location));
        }
        scoped(&location, || conv(x, k, g, &location))
    }

    /// Max pooling over `[N, C, H, W]` (padding never wins the max).
    #[track_caller]
    pub fn max_pool2d(
        &self,
        kernel: [i64; 2],
        stride: [i64; 2],
        padding: [i64; 2],
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        check_pool(self, kernel, stride, padding, &location)?;
        let pads = [(padding[0], padding[0]), (padding[1], padding[1])];
        scoped(&location, || reduce_window(self, ReduceKind::Max, kernel, stride, pads, &location))
    }

    /// Average pooling over `[N, C, H, W]` (padding counts as zeros, PyTorch's default).
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: [i64; 2],
        stride: [i64; 2],
        padding: [i64; 2],
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        check_pool(self, kernel, stride, padding, &location)?;
        scoped(&location, || {
            let pads = [(padding[0], padding[0]), (padding[1], padding[1])];
            reduce_window(self, ReduceKind::Sum, kernel, stride, pads, &location)?
                .div_scalar((kernel[0] * kernel[1]) as f64)
        })
    }
}

fn check_pool(
    x: &Tensor,
    kernel: [i64; 2],
    stride: [i64; 2],
    padding: [i64; 2],
    location: &SourceLocation,
) -> Result<()> {
    let ok = x.rank() == 4
        && x.dtype().is_float()
        && kernel.iter().chain(&stride).all(|&k| k > 0)
        && (0..2).all(|i| padding[i] >= 0 && padding[i] * 2 <= kernel[i]);
    if ok {
        Ok(())
    } else {
        Err(shape_error(
            "pool2d",
            location,
            format!(
                "needs a float [N, C, H, W] input, positive window and stride, and padding at most half the window; got {} with window {kernel:?}, stride {stride:?}, padding {padding:?}",
                x.shape()
            ),
        ))
    }
}
