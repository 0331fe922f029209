//! Matrix products.

use crate::autograd::grad_fn;
use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{FftKind, Op, Recursion};
use crate::location::{scoped, SourceLocation};
use crate::shape::{broadcast_dims, promote};
use crate::tensor::Tensor;

use super::{not_differentiable, shape_error};

impl Tensor {
    /// Matrix product with NumPy semantics: 1-D operands are vectors, leading dims broadcast
    /// as batch dims.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || matmul(self, other, &location))
    }

    /// `dot_general` in XLA's terms: batch dims first in the output, then the free dims of the
    /// left operand, then those of the right.
    #[track_caller]
    pub fn dot_general(
        &self,
        other: &Tensor,
        lhs_batch: &[usize],
        rhs_batch: &[usize],
        lhs_contract: &[usize],
        rhs_contract: &[usize],
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let (a, b) = (self, other);
        if a.dtype() != b.dtype() {
            return Err(shape_error(
                "dot_general",
                &location,
                format!(
                    "the operands must have one dtype, but they are {} and {}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        let valid = lhs_batch.len() == rhs_batch.len()
            && lhs_contract.len() == rhs_contract.len()
            && lhs_batch.iter().chain(lhs_contract).all(|&d| d < a.rank())
            && rhs_batch.iter().chain(rhs_contract).all(|&d| d < b.rank())
            && lhs_batch.iter().zip(rhs_batch).all(|(&x, &y)| a.dims()[x] == b.dims()[y])
            && lhs_contract.iter().zip(rhs_contract).all(|(&x, &y)| a.dims()[x] == b.dims()[y])
            && a.dtype() == b.dtype();
        if !valid {
            return Err(shape_error(
                "dot_general",
                &location,
                format!(
                    "cannot contract {} dims {lhs_contract:?} (batch {lhs_batch:?}) with {} dims {rhs_contract:?} (batch {rhs_batch:?})",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        let free = |t: &Tensor, batch: &[usize], contract: &[usize]| -> Vec<i64> {
            (0..t.rank())
                .filter(|d| !batch.contains(d) && !contract.contains(d))
                .map(|d| t.dims()[d])
                .collect()
        };
        let mut dims: Vec<i64> = lhs_batch.iter().map(|&d| a.dims()[d]).collect();
        dims.extend(free(a, lhs_batch, lhs_contract));
        dims.extend(free(b, rhs_batch, rhs_contract));
        let op = Op::DotGeneral {
            lhs_batch: lhs_batch.to_vec(),
            rhs_batch: rhs_batch.to_vec(),
            lhs_contract: lhs_contract.to_vec(),
            rhs_contract: rhs_contract.to_vec(),
        };
        Ok(Tensor::op(op, a.shape().with_dims(dims), &[a, b], location, None))
    }

    /// Each square matrix of `self` (`[..., n, n]`, float) squared `times` times, its own count
    /// per matrix (integer, `[...]`), in one loop ([`Recursion::Squarings`]): the squaring of a
    /// matrix exponential's scaling and squaring, whose count the norms decide on the device.
    /// Not differentiable here (torch's formula for the exponential's gradient calls the
    /// exponential again).
    #[track_caller]
    pub fn squarings(&self, times: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let r = self.rank();
        let fits = r >= 2
            && matches!(self.dtype(), DType::F32 | DType::F64)
            && self.dims()[r - 1] == self.dims()[r - 2]
            && matches!(times.dtype(), DType::S32 | DType::S64)
            && times.dims() == &self.dims()[..r - 2];
        if !fits {
            return Err(shape_error(
                "squarings",
                &location,
                format!(
                    "needs float square matrices [..., n, n] and an integer count per matrix [...], got {} and {}",
                    self.shape(),
                    times.shape()
                ),
            ));
        }
        not_differentiable("squarings", &[self], &location)?;
        let times = scoped(&location, || times.cast(DType::S32))?;
        let op = Op::Recursion(Recursion::Squarings);
        Ok(Tensor::op(op, self.shape().clone(), &[self, &times], location, None))
    }
}

fn matmul(a: &Tensor, b: &Tensor, location: &SourceLocation) -> Result<Tensor> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(shape_error(
            "matmul",
            location,
            format!("cannot multiply {} by {}: scalars are not matrices", a.shape(), b.shape()),
        ));
    }
    // Vectors become matrices, and the extra dim is dropped again at the end.
    let a2 = if a.rank() == 1 { a.unsqueeze(0)? } else { a.clone() };
    let b2 = if b.rank() == 1 { b.unsqueeze(-1)? } else { b.clone() };
    let (m, k) = (a2.dims()[a2.rank() - 2], a2.dims()[a2.rank() - 1]);
    let (k2, n) = (b2.dims()[b2.rank() - 2], b2.dims()[b2.rank() - 1]);
    let batch_a = &a2.dims()[..a2.rank() - 2];
    let batch_b = &b2.dims()[..b2.rank() - 2];
    let batch = broadcast_dims(batch_a, batch_b);
    let (Some(batch), true) = (batch, k == k2) else {
        return Err(shape_error(
            "matmul",
            location,
            format!("cannot multiply {} by {}: inner dims {k} and {k2} differ or batch dims do not broadcast", a.shape(), b.shape()),
        ));
    };
    let dtype = promote(a.dtype(), b.dtype());
    let mut da = batch.clone();
    da.extend([m, k]);
    let mut db = batch.clone();
    db.extend([k, n]);
    let a3 = a2.cast(dtype)?.broadcast_to(&da)?;
    let b3 = b2.cast(dtype)?.broadcast_to(&db)?;
    let out = batched_matmul(&a3, &b3, location)?;
    let mut dims = batch;
    if a.rank() > 1 {
        dims.push(m);
    }
    if b.rank() > 1 {
        dims.push(n);
    }
    out.reshape(&dims)
}

/// `[B.., m, k] @ [B.., k, n]` with equal batch dims: the one primitive matmul lowers to.
fn batched_matmul(a: &Tensor, b: &Tensor, location: &SourceLocation) -> Result<Tensor> {
    let nb = a.rank() - 2;
    let batch: Vec<usize> = (0..nb).collect();
    let mut dims = a.dims()[..nb].to_vec();
    dims.extend([a.dims()[nb], b.dims()[nb + 1]]);
    let op = Op::DotGeneral {
        lhs_batch: batch.clone(),
        rhs_batch: batch,
        lhs_contract: vec![nb + 1],
        rhs_contract: vec![nb],
    };
    let (ac, bc) = (a.clone(), b.clone());
    let grad = grad_fn("dot_general", &[a, b], move |g| {
        let loc = SourceLocation::caller();
        let at = ac.transpose(-1, -2)?;
        let bt = bc.transpose(-1, -2)?;
        Ok(vec![Some(batched_matmul(g, &bt, &loc)?), Some(batched_matmul(&at, g, &loc)?)])
    });
    Ok(Tensor::op(op, a.shape().with_dims(dims), &[a, b], location.clone(), grad))
}

impl Tensor {
    /// The discrete Fourier transform over the last `lengths.len()` dims (1 to 3): `Fft` and
    /// `Ifft` of complex values (the inverse scaled by 1/n), `Rfft` of real ones (the last dim
    /// keeps n/2 + 1 values), `Irfft` back to real values of `lengths`. Unnormalized otherwise,
    /// as XLA's; callers scale.
    #[track_caller]
    pub fn fft(&self, kind: FftKind, lengths: &[i64]) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let bad = || {
            shape_error(
                "fft",
                &location,
                format!(
                    "cannot take the {} of {} over lengths {lengths:?} (complex input for FFT, IFFT and IRFFT, real for RFFT; 1 to 3 trailing dims of those lengths)",
                    kind.name(),
                    self.shape()
                ),
            )
        };
        let (r, k) = (self.rank(), lengths.len());
        if !(1..=3).contains(&k) || k > r || lengths.iter().any(|&n| n <= 0) {
            return Err(bad());
        }
        let last = &self.dims()[r - k..];
        let mut dims = self.dims().to_vec();
        let (input, dtype) = match kind {
            FftKind::Fft | FftKind::Ifft if self.dtype().is_complex() && last == lengths => {
                (self.clone(), self.dtype())
            }
            FftKind::Rfft if self.dtype().is_float() && last == lengths => {
                // Half-precision input is transformed in f32.
                let parts = if self.dtype() == DType::F64 { DType::F64 } else { DType::F32 };
                dims[r - 1] = lengths[k - 1] / 2 + 1;
                (scoped(&location, || self.cast(parts))?, parts.complex())
            }
            FftKind::Irfft
                if self.dtype().is_complex()
                    && last[..k - 1] == lengths[..k - 1]
                    && last[k - 1] == lengths[k - 1] / 2 + 1 =>
            {
                dims[r - 1] = lengths[k - 1];
                (self.clone(), self.dtype().real())
            }
            _ => return Err(bad()),
        };
        let op = Op::Fft { kind, lengths: lengths.to_vec() };
        Ok(Tensor::op(op, crate::shape::Shape::new(dtype, dims), &[&input], location, None))
    }
}
