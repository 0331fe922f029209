//! Factorizations of matrices (the last two dims; leading dims are a batch): Cholesky, triangular
//! solves, Householder QR, the symmetric eigen-decomposition and LU with partial pivoting. What
//! linear algebra builds on them (solve, inverse, determinant, least squares ...) is composed by
//! the callers, as PyTorch composes `torch.linalg` from LAPACK's routines.
//!
//! The engine's autograd does not differentiate them: a tensor that requires a gradient is an
//! error, never a silent constant (torch code gets its gradients from torch's formulas, which
//! call these ops again).

use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{qr_taus, LuOutput, Op};
use crate::location::{scoped, SourceLocation};
use crate::tensor::Tensor;

use super::{not_differentiable, shape_error};

/// The matrices of `t` must be floating point, at least 2-D, and square if `square`.
fn check(op: &'static str, t: &Tensor, square: bool, location: &SourceLocation) -> Result<()> {
    let r = t.rank();
    if r < 2 || !matches!(t.dtype(), DType::F32 | DType::F64) {
        return Err(shape_error(
            op,
            location,
            format!("needs float32 or float64 matrices (at least 2-D), got {}", t.shape()),
        ));
    }
    if square && t.dims()[r - 1] != t.dims()[r - 2] {
        return Err(shape_error(op, location, format!("needs square matrices, got {}", t.shape())));
    }
    not_differentiable(op, &[t], location)
}

impl Tensor {
    /// The Cholesky factor of symmetric positive-definite matrices: lower triangular (`L L^T`),
    /// or upper (`U^T U`) if `upper`; the other triangle is zero. A matrix that is not positive
    /// definite gives NaN, as on every XLA device.
    #[track_caller]
    pub fn cholesky(&self, upper: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        check("cholesky", self, true, &location)?;
        Ok(Tensor::op(
            Op::Cholesky { lower: !upper },
            self.shape().clone(),
            &[self],
            location,
            None,
        ))
    }

    /// Solves `op(A) X = B` (`left`) or `X op(A) = B` for triangular `A` (self, square) and `B`
    /// (same batch dims), where `op(A)` is `A` or, if `transpose`, `A^T`. Only the `lower` (or
    /// upper) triangle of `A` is read, and its diagonal is taken as ones if `unit_diagonal`.
    #[track_caller]
    pub fn triangular_solve(
        &self,
        b: &Tensor,
        left: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose: bool,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        check("triangular_solve", self, true, &location)?;
        check("triangular_solve", b, false, &location)?;
        let (ra, rb) = (self.rank(), b.rank());
        let n = self.dims()[ra - 1];
        let fits = ra == rb
            && self.dims()[..ra - 2] == b.dims()[..rb - 2]
            && self.dtype() == b.dtype()
            && if left { b.dims()[rb - 2] == n } else { b.dims()[rb - 1] == n };
        if !fits {
            return Err(shape_error(
                "triangular_solve",
                &location,
                format!(
                    "cannot solve with {} on the {} of {}: the batch dims and dtypes must be equal and the matrix's size match B's {}",
                    self.shape(),
                    if left { "left" } else { "right" },
                    b.shape(),
                    if left { "rows" } else { "columns" }
                ),
            ));
        }
        let op = Op::TriangularSolve { left_side: left, lower, unit_diagonal, transpose };
        Ok(Tensor::op(op, b.shape().clone(), &[self, b], location, None))
    }

    /// Householder QR in LAPACK's compact form (`torch.geqrf`): `(a, tau)`, R on and above the
    /// diagonal of `a`, the reflectors' vectors below it, and their scales in `tau`.
    #[track_caller]
    pub fn geqrf(&self) -> Result<(Tensor, Tensor)> {
        let location = SourceLocation::caller();
        check("geqrf", self, false, &location)?;
        let a = Tensor::op(
            Op::Qr { taus: false },
            self.shape().clone(),
            &[self],
            location.clone(),
            None,
        );
        let tau = Tensor::op(Op::Qr { taus: true }, qr_taus(self.shape()), &[self], location, None);
        Ok((a, tau))
    }

    /// The product of the Householder reflectors whose vectors are below the diagonal of self
    /// (`m x n`, `m >= n`) and whose scales are `tau` (`k <= n` of them): the first `n` columns of
    /// Q (`torch.linalg.householder_product`, LAPACK's `orgqr`).
    #[track_caller]
    pub fn householder_product(&self, tau: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        check("householder_product", self, false, &location)?;
        let r = self.rank();
        let (m, n) = (self.dims()[r - 2], self.dims()[r - 1]);
        let fits = tau.rank() == r - 1
            && tau.dims()[..r - 2] == self.dims()[..r - 2]
            && tau.dims()[r - 2] <= n
            && n <= m
            && tau.dtype() == self.dtype();
        if !fits {
            return Err(shape_error(
                "householder_product",
                &location,
                format!(
                    "needs m x n reflectors with m >= n and at most n scales of the same batch and dtype, got {} and {}",
                    self.shape(),
                    tau.shape()
                ),
            ));
        }
        Ok(Tensor::op(Op::HouseholderProduct, self.shape().clone(), &[self, tau], location, None))
    }

    /// The eigen-decomposition of symmetric matrices, read from the lower triangle (the upper if
    /// `upper`): `(eigenvalues, eigenvectors)`, the values ascending and the vectors as columns
    /// (each defined up to its sign).
    #[track_caller]
    pub fn eigh(&self, upper: bool) -> Result<(Tensor, Tensor)> {
        let location = SourceLocation::caller();
        check("eigh", self, true, &location)?;
        let dims = self.dims();
        let values = self.shape().with_dims(dims[..dims.len() - 1].to_vec());
        let lower = !upper;
        let w =
            Tensor::op(Op::Eigh { lower, vectors: false }, values, &[self], location.clone(), None);
        let v = Tensor::op(
            Op::Eigh { lower, vectors: true },
            self.shape().clone(),
            &[self],
            location,
            None,
        );
        Ok((w, v))
    }

    /// LU with partial pivoting, as LAPACK's `getrf` (`torch.linalg.lu_factor`):
    /// `(lu, pivots, permutation)`: L (unit diagonal implied) and U in one `m x n` matrix, the
    /// 1-based row swapped with row `i` at step `i` (s32, `min(m, n)` of them), and the
    /// permutation they make (s32, `m`): row `i` of `L U` is row `permutation[i]` of the input.
    #[track_caller]
    pub fn lu(&self) -> Result<(Tensor, Tensor, Tensor)> {
        let location = SourceLocation::caller();
        check("lu", self, false, &location)?;
        let r = self.rank();
        let (m, n) = (self.dims()[r - 2], self.dims()[r - 1]);
        let batch = &self.dims()[..r - 2];
        let of = |output: LuOutput, dims: Vec<i64>, dtype: DType| {
            let shape = crate::shape::Shape::new(dtype, dims);
            Tensor::op(Op::Lu { output }, shape, &[self], location.clone(), None)
        };
        let factors = of(LuOutput::Factors, self.dims().to_vec(), self.dtype());
        let pivots = of(LuOutput::Pivots, [batch, &[m.min(n)]].concat(), DType::S32);
        let perm = of(LuOutput::Permutation, [batch, &[m]].concat(), DType::S32);
        Ok((factors, pivots, perm))
    }

    /// The permutation of `rows` rows that LAPACK's 1-based pivots (self, s32 or s64, the last
    /// dim the steps) make, as [`Tensor::lu`] returns it.
    #[track_caller]
    pub fn lu_pivots_to_permutation(&self, rows: usize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() == 0 || !matches!(self.dtype(), DType::S32 | DType::S64) {
            return Err(shape_error(
                "lu_pivots_to_permutation",
                &location,
                format!("needs integer pivots with a dim of steps, got {}", self.shape()),
            ));
        }
        let pivots = scoped(&location, || self.cast(DType::S32))?;
        let mut dims = self.dims()[..self.rank() - 1].to_vec();
        dims.push(rows as i64);
        let shape = crate::shape::Shape::new(DType::S32, dims);
        Ok(Tensor::op(Op::PivotsToPermutation { rows }, shape, &[&pivots], location, None))
    }
}
