//! Training pieces: modules with parameter lists, and optimizers that update parameters in place
//! by rebinding them to new IR, so forward, backward and update compile to one graph.
//!
//! Parameters and optimizer state start as device data (initialized on the host and uploaded), so
//! the first training step's graph is already the steady one: it compiles once, then hits.

mod init;
mod optim;

pub use optim::{Adam, Optimizer, Sgd};

use crate::dtype::DType;
use crate::error::Result;
use crate::location::{scoped, SourceLocation};
use crate::tensor::Tensor;

/// Something with trainable parameters.
pub trait Module {
    fn parameters(&self) -> Vec<Tensor>;
}

#[track_caller]
fn parameter(values: Vec<f32>, dims: &[i64]) -> Result<Tensor> {
    let t = Tensor::from_slice(&values, dims)?;
    t.set_requires_grad(true);
    Ok(t)
}

/// `y = x W^T + b`, PyTorch's layout and initialization (uniform in +-1/sqrt(in)).
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl Linear {
    #[track_caller]
    pub fn new(inputs: usize, outputs: usize, bias: bool, seed: u64) -> Result<Linear> {
        let bound = 1.0 / (inputs as f32).sqrt();
        let mut rng = init::Rng::new(seed);
        let weight =
            parameter(rng.uniform(inputs * outputs, bound), &[outputs as i64, inputs as i64])?;
        let bias =
            bias.then(|| parameter(rng.uniform(outputs, bound), &[outputs as i64])).transpose()?;
        Ok(Linear { weight, bias })
    }

    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let y = x.matmul(&self.weight.transpose(0, 1)?)?;
            match &self.bias {
                Some(b) => y.add(b),
                None => Ok(y),
            }
        })
    }
}

impl Module for Linear {
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone()).chain(self.bias.clone()).collect()
    }
}

/// 2-D convolution over `[N, C, H, W]` with an `[O, C/groups, K, K]` kernel.
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub stride: i64,
    pub padding: i64,
}

impl Conv2d {
    #[track_caller]
    pub fn new(
        inputs: usize,
        outputs: usize,
        kernel: usize,
        stride: i64,
        padding: i64,
        seed: u64,
    ) -> Result<Conv2d> {
        let fan_in = inputs * kernel * kernel;
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut rng = init::Rng::new(seed);
        let dims = [outputs as i64, inputs as i64, kernel as i64, kernel as i64];
        let weight = parameter(rng.uniform(outputs * fan_in, bound), &dims)?;
        let bias = Some(parameter(rng.uniform(outputs, bound), &[outputs as i64])?);
        Ok(Conv2d { weight, bias, stride, padding })
    }

    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let s = self.stride;
            let y = x.conv2d(&self.weight, [s, s], [self.padding, self.padding], [1, 1], 1)?;
            match &self.bias {
                Some(b) => y.add(&b.reshape(&[1, -1, 1, 1])?),
                None => Ok(y),
            }
        })
    }
}

impl Module for Conv2d {
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone()).chain(self.bias.clone()).collect()
    }
}

/// Layer normalization over the last dims, with learned scale and shift.
pub struct LayerNorm {
    pub shape: Vec<i64>,
    pub weight: Tensor,
    pub bias: Tensor,
    pub eps: f64,
}

impl LayerNorm {
    #[track_caller]
    pub fn new(shape: &[i64]) -> Result<LayerNorm> {
        let n: i64 = shape.iter().product();
        Ok(LayerNorm {
            shape: shape.to_vec(),
            weight: parameter(vec![1.0; n as usize], shape)?,
            bias: parameter(vec![0.0; n as usize], shape)?,
            eps: 1e-5,
        })
    }

    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            x.layer_norm(&self.shape, Some(&self.weight), Some(&self.bias), self.eps)
        })
    }
}

impl Module for LayerNorm {
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

/// A table of `count` vectors of `dim` values, looked up by integer ids.
pub struct Embedding {
    pub weight: Tensor,
}

impl Embedding {
    #[track_caller]
    pub fn new(count: usize, dim: usize, seed: u64) -> Result<Embedding> {
        let mut rng = init::Rng::new(seed);
        Ok(Embedding { weight: parameter(rng.normal(count * dim), &[count as i64, dim as i64])? })
    }

    #[track_caller]
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || self.weight.embedding(ids))
    }
}

impl Module for Embedding {
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone()]
    }
}

/// Zeros of `t`'s shape as device data, split like `t` (optimizer state follows its parameter).
#[track_caller]
pub(crate) fn data_zeros_like(t: &Tensor) -> Result<Tensor> {
    let zeros = match t.dtype() {
        DType::F64 => Tensor::from_slice(&vec![0f64; t.element_count()], t.dims())?,
        _ => Tensor::from_slice(&vec![0f32; t.element_count()], t.dims())?.cast(t.dtype())?,
    };
    zeros.shard_like(t)?;
    Ok(zeros)
}
