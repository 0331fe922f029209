//! Creating tensors on the device: constants, ranges, identity, random.

use crate::autograd::no_grad;
use crate::dtype::DType;
use crate::error::Result;
use crate::ir::Op;
use crate::location::{scoped, SourceLocation};
use crate::shape::Shape;
use crate::tensor::Tensor;

use super::shape_error;

pub(crate) fn full_like_at(t: &Tensor, value: f64, location: SourceLocation) -> Tensor {
    full_at(t.dims(), value, t.dtype(), location)
}

fn full_at(dims: &[i64], value: f64, dtype: DType, location: SourceLocation) -> Tensor {
    scoped(&location, || {
        let s = Tensor::scalar(value, dtype);
        if dims.is_empty() {
            return s;
        }
        let shape = Shape::new(dtype, dims.to_vec());
        Tensor::op(Op::Broadcast { dims: vec![] }, shape, &[&s], location.clone(), None)
    })
}

fn check_sizes_at(op: &'static str, dims: &[i64], location: &SourceLocation) -> Result<()> {
    match dims.iter().find(|&&d| d < 0) {
        None => Ok(()),
        Some(d) => Err(shape_error(
            op,
            location,
            format!("sizes must be non-negative, but {dims:?} has {d}"),
        )),
    }
}

impl Tensor {
    /// Checks the sizes a factory is given, at the caller's line: a negative size is an error
    /// here, not an XLA parse error when the graph compiles.
    #[track_caller]
    pub fn check_sizes(op: &'static str, dims: &[i64]) -> Result<()> {
        check_sizes_at(op, dims, &SourceLocation::caller())
    }

    /// A tensor of `dims` filled with `value` (the value is a graph input, not a constant).
    #[track_caller]
    pub fn full(dims: &[i64], value: f64, dtype: DType) -> Tensor {
        full_at(dims, value, dtype, SourceLocation::caller())
    }

    #[track_caller]
    pub fn zeros(dims: &[i64], dtype: DType) -> Tensor {
        full_at(dims, 0.0, dtype, SourceLocation::caller())
    }

    #[track_caller]
    pub fn ones(dims: &[i64], dtype: DType) -> Tensor {
        full_at(dims, 1.0, dtype, SourceLocation::caller())
    }

    #[track_caller]
    pub fn zeros_like(&self) -> Tensor {
        full_at(self.dims(), 0.0, self.dtype(), SourceLocation::caller())
    }

    /// `start, start + step, ...` below `end`.
    #[track_caller]
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if step == 0.0 || !((end - start) / step).is_finite() {
            return Err(shape_error(
                "arange",
                &location,
                format!("step {step} cannot go from {start} to {end}"),
            ));
        }
        let n = ((end - start) / step).ceil().max(0.0) as i64;
        scoped(&location, || {
            let iota = Tensor::op(
                Op::Iota { axis: 0 },
                Shape::new(dtype, [n]),
                &[],
                location.clone(),
                None,
            );
            iota.mul_scalar(step)?.add_scalar(start)
        })
    }

    /// The `n` x `n` identity matrix.
    #[track_caller]
    pub fn eye(n: i64, dtype: DType) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let rows = Tensor::op(
                Op::Iota { axis: 0 },
                Shape::new(DType::S64, [n, n]),
                &[],
                location.clone(),
                None,
            );
            let cols = Tensor::op(
                Op::Iota { axis: 1 },
                Shape::new(DType::S64, [n, n]),
                &[],
                location.clone(),
                None,
            );
            rows.eq(&cols)?.cast(dtype)
        })
    }

    /// Uniform values in [0, 1), from XLA's RNG on the device, determined by `seed`.
    #[track_caller]
    pub fn rand(dims: &[i64], seed: i64, dtype: DType) -> Result<Tensor> {
        random(dims, seed, dtype, false, SourceLocation::caller())
    }

    /// Standard normal values, from XLA's RNG on the device, determined by `seed`.
    #[track_caller]
    pub fn randn(dims: &[i64], seed: i64, dtype: DType) -> Result<Tensor> {
        random(dims, seed, dtype, true, SourceLocation::caller())
    }
}

fn random(
    dims: &[i64],
    seed: i64,
    dtype: DType,
    normal: bool,
    location: SourceLocation,
) -> Result<Tensor> {
    check_sizes_at("rand", dims, &location)?;
    if !dtype.is_float() {
        return Err(shape_error(
            "rand",
            &location,
            format!("random values need a float dtype, not {dtype}"),
        ));
    }
    if dims.contains(&0) {
        // No values to draw (XLA's RNG rejects an empty shape).
        return Ok(full_at(dims, 0.0, dtype, location));
    }
    let seed = scoped(&location, || Tensor::scalar(seed as f64, DType::S64));
    Ok(no_grad(|| {
        Tensor::op(
            Op::Random { normal },
            Shape::new(dtype, dims.to_vec()),
            &[&seed],
            location,
            None,
        )
    }))
}
