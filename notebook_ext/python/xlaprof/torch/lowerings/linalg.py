"""``torch.linalg`` on the engine: LAPACK's routines as the engine's factorizations (Cholesky,
triangular solve, Householder QR, symmetric eigen-decomposition, LU with partial pivoting), and
what torch builds on them (solve, inverse, determinant, pseudo-inverse, ...) composed here.

Two choices differ from torch's CPU kernels, as on every XLA device:
- ``_linalg_check_errors`` is not run: checking a factorization's ``info`` would read it (a
  hidden sync in the middle of the step); a matrix that is singular or not positive definite
  gives inf or NaN instead of an exception. ``*_ex`` ops still return a true ``info``.
- XLA has no SVD to expand: ``svd`` (and ``svdvals``, ``matrix_rank``, ``cond``, ``pinv``) of
  float32 matrices come from the eigen-decomposition of ``A^T A`` in float64, as accurate as
  float32's own SVD; float64 matrices go to the CPU, whose SVD keeps float64's accuracy where
  squaring the matrix would not. Singular vectors, like eigenvectors, are each defined up to
  its sign, which need not be LAPACK's.
- ``lstsq``'s default driver is CUDA's, ``gels`` (QR), not the CPU's ``gelsy``: the rank comes
  back empty, as on CUDA. The drivers for rank-deficient matrices, named, run on the CPU.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch.utils._pytree import tree_map

import xlaprof as xp

from .._device import TO_TORCH
from .._tensor import to_engine
from .common import Unsupported, aten, broadcast_shape, diagonal_of, reduce_product, triangle
from .elementwise import isfinite
from .registry import lower as _lower


def lower(*ops: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``registry.lower`` for ops of matrices that may be empty: where every tensor argument
    is empty, the results depend on shapes alone (an empty inverse, the determinant 1 of a 0 x 0
    matrix), and torch computes them on the host from empty stand-ins: nothing is read from the
    device and the graph is not split."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            _lower(op)(_or_from_shapes(op, fn))
        return fn

    return register


def _or_from_shapes(op: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, xp.Tensor)]
        if not tensors or not all(0 in t.shape for t in tensors):
            return fn(*args, **kwargs)

        def stand_in(a: Any) -> Any:
            return torch.zeros(a.shape, dtype=TO_TORCH[a.dtype]) if isinstance(a, xp.Tensor) else a

        out = op(*tree_map(stand_in, args), **tree_map(stand_in, kwargs))
        return tree_map(lambda r: to_engine(r) if isinstance(r, torch.Tensor) else r, out)

    return run


def _mT(x: Any) -> Any:
    return x.transpose(-2, -1)


def _diag(x: Any) -> Any:
    return diagonal_of(x, 0, x.ndim - 2, x.ndim - 1)


def _eye(n: int, batch: Sequence[int], dtype: str) -> Any:
    return xp.eye(n, n, dtype=dtype).expand(*batch, n, n)


def _empty(dtype: str) -> Any:
    return xp.zeros(0, dtype=dtype)


def _same_batch(a: Any, b: Any) -> Tuple[Any, Any]:
    """Both operands' matrices over their batch dims broadcast together."""
    batch = broadcast_shape([a.shape[:-2], b.shape[:-2]])
    return a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])


def _check_float(op: str, *xs: Any) -> None:
    for x in xs:
        if x.dtype not in ("float32", "float64"):
            raise Unsupported(f"{op} of {x.dtype}")
        if 0 in x.shape:
            raise Unsupported(f"{op} of an empty matrix")


def _first_bad(bad: Any) -> Any:
    """LAPACK's ``info``: the 1-based index of the first true entry on the last dim, or 0."""
    k = bad.shape[-1]
    index = xp.arange(1, k + 1, 1, dtype="int32")
    first = xp.where(bad, index, k + 1).amin(-1)
    return xp.where(first == k + 1, 0, first).astype("int32")


# ---- Cholesky and triangular solves ----------------------------------------------------------


def _solve_tri(a: Any, b: Any, *, left: bool, lower: bool, unit: bool = False,
               transpose: bool = False) -> Any:
    a, b = _same_batch(a, b)
    return a._triangular_solve(b, left, lower, unit, transpose)


@lower(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a: Any, upper: bool = False, check_errors: bool = False) -> Any:
    _check_float("cholesky", a)
    factor = a._cholesky(upper)
    d = _diag(factor)
    return factor, _first_bad(~isfinite(d) | (d <= 0))


@lower(aten._linalg_check_errors.default)
def linalg_check_errors(info: Any, api_name: str, is_matrix: bool) -> None:
    return None  # see the module's docstring


@lower(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(a: Any, b: Any, upper: bool, left: bool = True,
                            unitriangular: bool = False) -> Any:
    _check_float("solve_triangular", a, b)
    return _solve_tri(a, b, left=left, lower=not upper, unit=unitriangular)


@lower(aten.triangular_solve.default)
def triangular_solve(b: Any, a: Any, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> Any:
    _check_float("triangular_solve", a, b)
    x = _solve_tri(a, b, left=True, lower=not upper, unit=unitriangular, transpose=transpose)
    return x, a.clone()


def _cholesky_solve(b: Any, factor: Any, upper: bool) -> Any:
    # A = L L^T: L y = b, then L^T x = y (A = U^T U: U^T y = b, then U x = y).
    y = _solve_tri(factor, b, left=True, lower=not upper, transpose=upper)
    return _solve_tri(factor, y, left=True, lower=not upper, transpose=not upper)


@lower(aten.cholesky_solve.default)
def cholesky_solve(b: Any, factor: Any, upper: bool = False) -> Any:
    _check_float("cholesky_solve", b, factor)
    return _cholesky_solve(b, factor, upper)


@lower(aten.cholesky_inverse.default)
def cholesky_inverse(factor: Any, upper: bool = False) -> Any:
    _check_float("cholesky_inverse", factor)
    n = factor.shape[-1]
    return _cholesky_solve(_eye(n, factor.shape[:-2], factor.dtype), factor, upper)


# ---- QR ---------------------------------------------------------------------------------------


@lower(aten.geqrf.default)
def geqrf(a: Any) -> Any:
    _check_float("geqrf", a)
    return a._geqrf()


@lower(aten.linalg_householder_product.default, aten.orgqr.default)
def householder_product(a: Any, tau: Any) -> Any:
    _check_float("householder_product", a)
    if tau.shape[-1] == 0:
        return _eye(a.shape[-2], a.shape[:-2], a.dtype)[..., :, : a.shape[-1]]
    return a._householder_product(tau)


def _full_q(a: Any, tau: Any) -> Any:
    """The whole m x m Q of compact reflectors (``a`` m x n) and their scales."""
    m, n = a.shape[-2], a.shape[-1]
    if n < m:
        a = xp.cat([a, xp.zeros(*a.shape[:-1], m - n, dtype=a.dtype)], -1)
    elif n > m:
        a = a[..., :, :m]
    return a._householder_product(tau)


@lower(aten.linalg_qr.default)
def linalg_qr(a: Any, mode: str = "reduced") -> Any:
    _check_float("qr", a)
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    h, tau = a._geqrf()
    if mode == "complete" and m > n:
        return _full_q(h, tau), triangle(h, 0, lower_part=False)
    r = triangle(h[..., :k, :], 0, lower_part=False)
    if mode == "r":
        return _empty(a.dtype), r
    return _full_q(h, tau) if m <= n else h._householder_product(tau), r


@lower(aten.ormqr.default)
def ormqr(a: Any, tau: Any, other: Any, left: bool = True, transpose: bool = False) -> Any:
    _check_float("ormqr", a, other)
    q = _full_q(a, tau)
    if transpose:
        q = _mT(q)
    q, other = _same_batch(q, other)
    return q @ other if left else other @ q


# ---- least squares ------------------------------------------------------------------------------


def _lstsq_check(a: Any, b: Any) -> bool:
    """torch's checks of ``lstsq``'s operands, in its words; whether ``b`` is a vector (one dim
    fewer than ``a``)."""
    if a.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if not 0 <= a.ndim - b.ndim <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = a.ndim - b.ndim == 1
    if a.shape[-2] != b.shape[-1 if vector else -2]:
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match other.size({-1 if vector else -2})")
    return vector


@lower(aten.linalg_lstsq.default)
def linalg_lstsq(a: Any, b: Any, rcond: Any = None, driver: Optional[str] = None) -> Any:
    """Least squares as CUDA computes them, LAPACK's ``gels``, which is CUDA's only driver and
    so its default: the QR of a full-rank ``a`` (of its transpose where it is wide, for the
    smallest solution). The residuals (the squared norm of each column of ``a x - b``) come when
    ``a`` is tall; the rank and singular values are empty, as on CUDA. The CPU's default driver,
    ``gelsy``, also returns the rank; asked for by name, it and ``gelss`` and ``gelsd`` (which
    take rank-deficient matrices) run on the CPU's LAPACK."""
    if driver not in (None, "gels"):
        raise Unsupported(f"lstsq with driver {driver!r}")
    vector = _lstsq_check(a, b)
    _check_float("lstsq", a, b)
    m, n = a.shape[-2], a.shape[-1]
    rhs = b.unsqueeze(-1) if vector else b
    a, rhs = _same_batch(a, rhs)
    if m >= n:
        h, tau = a._geqrf()
        r = triangle(h[..., :n, :], 0, lower_part=False)
        x = _solve_tri(r, _mT(h._householder_product(tau)) @ rhs, left=True, lower=False)
        off = a @ x - rhs
        residuals = (off * off).sum([rhs.ndim - 2]) if m > n else _empty(a.dtype)
    else:
        h, tau = _mT(a)._geqrf()
        r = triangle(h[..., :m, :], 0, lower_part=False)
        x = h._householder_product(tau) @ _solve_tri(r, rhs, left=True, lower=False, transpose=True)
        residuals = _empty(a.dtype)
    return x.squeeze(-1) if vector else x, residuals, xp.zeros(0, dtype="int64"), _empty(a.dtype)


# ---- symmetric eigen-decomposition ---------------------------------------------------------------


@lower(aten._linalg_eigh.default)
def linalg_eigh(a: Any, uplo: str = "L", compute_v: bool = True) -> Any:
    _check_float("eigh", a)
    w, v = a._eigh(uplo.upper() == "U")
    return (w, v) if compute_v else (w, _empty(a.dtype))


# ---- singular values, from the eigenvalues of A^T A in float64 ----------------------------------


def _gram_eigh(a: Any) -> Tuple[Any, Any, bool]:
    """The eigen-decomposition of ``A^T A`` (or ``A A^T``, the smaller) in float64: eigenvalues
    (ascending), eigenvectors, and whether it was ``A^T A``."""
    a64 = a.astype("float64")
    tall = a.shape[-2] >= a.shape[-1]
    gram = _mT(a64) @ a64 if tall else a64 @ _mT(a64)
    w, v = gram._eigh(False)
    return w, v, tall


def _gram_precise_enough(op: str, a: Any) -> None:
    """Squaring a matrix squares its condition number: in float64 that keeps a float32
    matrix's singular values as accurate as float32's own SVD would, a float64 one's not."""
    if a.dtype != "float32":
        raise Unsupported(f"{op} of {a.dtype} (the CPU's SVD keeps its accuracy)")


def _complete(cols: Any, k: int, full: bool) -> Any:
    """``cols`` (rows x k, orthonormal where nonzero) with its zero columns, and for ``full`` the
    rest of the rows x rows matrix, filled in orthonormally: a Householder QR, whose Q keeps
    each nonzero column up to the sign its R says."""
    rows = cols.shape[-2]
    h, tau = cols._geqrf()
    q = _full_q(h, tau) if full and rows > k else h._householder_product(tau)
    d = _diag(h[..., :k, :k])
    sign = xp.where(d < 0, -1.0, 1.0)
    if q.shape[-1] > k:
        sign = xp.cat([sign, xp.ones(*sign.shape[:-1], q.shape[-1] - k, dtype=sign.dtype)], -1)
    return q * sign.unsqueeze(-2)


@lower(aten._linalg_svd.default)
def linalg_svd(a: Any, full_matrices: bool = False, compute_uv: bool = True,
               driver: Optional[str] = None) -> Any:
    """Singular values (descending) from the eigenvalues of ``A^T A`` (or ``A A^T``) in float64,
    and with ``compute_uv`` its eigenvectors as one side's singular vectors, the other side's
    ``A v / s``, completed orthonormally where s is 0. torch asks for the vectors whenever the
    input is a tensor subclass, so ``svdvals`` comes here with ``compute_uv`` too."""
    _check_float("svd", a)
    _gram_precise_enough("svd", a)
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    w, v, tall = _gram_eigh(a)
    last = w.ndim - 1
    w, v = w.flip([last]), v.flip([v.ndim - 1])              # descending
    s = w.clamp(0.0, None).sqrt()
    if not compute_uv:
        return _empty(a.dtype), s.astype(a.dtype), _empty(a.dtype)
    a64 = a.astype("float64")
    other = (a64 @ v) if tall else (_mT(a64) @ v)            # [.., m, k] or [.., n, k]
    tol = s.amax(-1, keepdim=True) * (max(m, n) * 2.220446049250313e-16)
    good = s > tol
    other = xp.where(good.unsqueeze(-2), other / xp.where(good, s, 1.0).unsqueeze(-2), 0.0)
    other = _complete(other, k, full_matrices)
    u, vt = (other, _mT(v)) if tall else (v, _mT(other))
    return u.astype(a.dtype), s.astype(a.dtype), vt.astype(a.dtype)


def _pinv_tolerance(smax: Any, atol: Any, rtol: Any, m: int, n: int, dtype: str) -> Any:
    """torch's rule: below ``max(atol, rtol * smax)`` a singular value counts as zero; without
    either, ``rtol`` is the dtype's epsilon times the larger dim, and with ``atol > 0`` alone it
    is zero."""
    eps = 1.1920928955078125e-07 if dtype == "float32" else 2.220446049250313e-16
    default = eps * max(m, n)
    as_tensor = (lambda v: v.astype("float64") if isinstance(v, xp.Tensor)
                 else xp.tensor(float(v), dtype="float64"))
    if rtol is None:
        rtol = (xp.tensor(default, dtype="float64") if atol is None
                else xp.where(as_tensor(atol) > 0, 0.0, default))
    tol = as_tensor(rtol) * smax
    return tol if atol is None else xp.maximum(tol, as_tensor(atol) + xp.zeros_like(tol))


@lower(aten.linalg_pinv.atol_rtol_tensor, aten.linalg_pinv.atol_rtol_float)
def linalg_pinv(a: Any, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Any:
    _check_float("pinv", a)
    if not hermitian:
        _gram_precise_enough("pinv", a)
    m, n = a.shape[-2], a.shape[-1]
    a64 = a.astype("float64")
    if hermitian:
        w, v = a64._eigh(False)
        mag = w.abs()
        keep = mag > _pinv_tolerance(mag.amax(-1), atol, rtol, m, n, a.dtype).unsqueeze(-1)
        inv = xp.where(keep, 1.0 / xp.where(keep, w, 1.0), 0.0)
        return ((v * inv.unsqueeze(-2)) @ _mT(v)).astype(a.dtype)
    w, v, tall = _gram_eigh(a)
    s = w.clamp(0.0, None).sqrt()
    keep = s > _pinv_tolerance(s.amax(-1), atol, rtol, m, n, a.dtype).unsqueeze(-1)
    inv = xp.where(keep, 1.0 / xp.where(keep, w, 1.0), 0.0)  # 1 / s^2
    core = (v * inv.unsqueeze(-2)) @ _mT(v)
    # A^T A = V S^2 V^T: pinv = V S^-2 V^T A^T; A A^T = U S^2 U^T: pinv = A^T U S^-2 U^T.
    out = core @ _mT(a64) if tall else _mT(a64) @ core
    return out.astype(a.dtype)


# ---- LU ---------------------------------------------------------------------------------------


def _permute_rows(perm: Any, b: Any) -> Any:
    """Rows of ``b`` picked by ``perm`` (row i is row ``perm[i]``), per matrix of a batch."""
    pick = perm.one_hot(b.shape[-2]).astype(b.dtype)
    pick, b = _same_batch(pick, b)
    return pick @ b


def _unpermute_rows(perm: Any, b: Any) -> Any:
    """The inverse of :func:`_permute_rows`: row ``perm[i]`` of the result is row i of ``b``."""
    place = _mT(perm.one_hot(b.shape[-2]).astype(b.dtype))
    place, b = _same_batch(place, b)
    return place @ b


def _lu_solve(lu: Any, perm: Any, b: Any, adjoint: bool) -> Any:
    """``A X = B`` (or ``A^T X = B``) for ``P A = L U`` (``P A`` row i = ``A`` row ``perm[i]``)."""
    if not adjoint:
        y = _solve_tri(lu, _permute_rows(perm, b), left=True, lower=True, unit=True)
        return _solve_tri(lu, y, left=True, lower=False)
    y = _solve_tri(lu, b, left=True, lower=False, transpose=True)
    y = _solve_tri(lu, y, left=True, lower=True, unit=True, transpose=True)
    return _unpermute_rows(perm, y)


def _info(lu: Any) -> Any:
    return _first_bad(_diag(lu) == 0)


@lower(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a: Any, pivot: bool = True, check_errors: bool = False) -> Any:
    if not pivot:
        raise Unsupported("LU without pivoting")
    _check_float("lu_factor", a)
    lu, pivots, _ = a._lu()
    return lu, pivots, _info(lu)


def _unpack(lu: Any, perm: Any) -> Tuple[Any, Any, Any]:
    """``(P, L, U)`` with ``A = P L U``."""
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    lower_part = triangle(lu[..., :, :k], -1, lower_part=True) + xp.eye(m, k, dtype=lu.dtype)
    upper_part = triangle(lu[..., :k, :], 0, lower_part=False)
    p = _mT(perm.one_hot(m).astype(lu.dtype))
    return p, lower_part, upper_part


@lower(aten.linalg_lu.default)
def linalg_lu(a: Any, pivot: bool = True) -> Any:
    if not pivot:
        raise Unsupported("LU without pivoting")
    _check_float("lu", a)
    lu, _, perm = a._lu()
    return _unpack(lu, perm)


@lower(aten.lu_unpack.default)
def lu_unpack(lu: Any, pivots: Any, unpack_data: bool = True, unpack_pivots: bool = True) -> Any:
    _check_float("lu_unpack", lu)
    perm = pivots._lu_pivots_to_permutation(lu.shape[-2])
    p, lower_part, upper_part = _unpack(lu, perm)
    if not unpack_data:
        lower_part, upper_part = _empty(lu.dtype), _empty(lu.dtype)
    return (p if unpack_pivots else _empty(lu.dtype)), lower_part, upper_part


@lower(aten.linalg_lu_solve.default)
def linalg_lu_solve(lu: Any, pivots: Any, b: Any, left: bool = True, adjoint: bool = False) -> Any:
    if (lu.numel() == 0 or b.numel() == 0) and {lu.dtype, b.dtype} <= {"float32", "float64"}:
        # Nothing to solve (no right-hand sides, or a batch of none): the solution's shape.
        batch = broadcast_shape([list(lu.shape[:-2]), list(b.shape[:-2])])
        return xp.zeros(*batch, *b.shape[-2:], dtype=b.dtype)
    _check_float("lu_solve", lu, b)
    perm = pivots._lu_pivots_to_permutation(lu.shape[-2])
    if left:
        return _lu_solve(lu, perm, b, adjoint)
    # X A = B is A^T X^T = B^T; X A^T = B is A X^T = B^T.
    return _mT(_lu_solve(lu, perm, _mT(b), not adjoint))


def _swap_sign(pivots: Any, dtype: str) -> Any:
    """(-1) to the number of rows the pivots swapped."""
    k = pivots.shape[-1]
    swaps = (pivots != xp.arange(1, k + 1, 1, dtype="int32")).astype("int64").sum([pivots.ndim - 1])
    return 1.0 - swaps.remainder(2).astype(dtype) * 2.0


# The determinant's two ops return the LU factorization of the transpose, not of `a`, as torch's
# kernels do (they factor the transpose, which is laid out as LAPACK wants): their backward
# formulas solve with it as such, and the factorization of `a` itself gave a wrong gradient.
# The determinant is the same either way.


@lower(aten._linalg_det.default)
def linalg_det(a: Any) -> Any:
    _check_float("det", a)
    lu, pivots, _ = _mT(a)._lu()
    d = _diag(lu)
    return reduce_product(d, [d.ndim - 1], False) * _swap_sign(pivots, a.dtype), lu, pivots


@lower(aten._linalg_slogdet.default)
def linalg_slogdet(a: Any) -> Any:
    _check_float("slogdet", a)
    lu, pivots, _ = _mT(a)._lu()
    d = _diag(lu)
    last = [d.ndim - 1]
    sign = reduce_product(d.sign(), last, False) * _swap_sign(pivots, a.dtype)
    return sign, d.abs().log().sum(last), lu, pivots


@lower(aten.linalg_inv_ex.default)
def linalg_inv_ex(a: Any, check_errors: bool = False) -> Any:
    _check_float("inv", a)
    lu, _, perm = a._lu()
    eye = _eye(a.shape[-1], a.shape[:-2], a.dtype)
    return _lu_solve(lu, perm, eye, False), _info(lu)


@lower(aten._linalg_solve_ex.default)
def linalg_solve_ex(a: Any, b: Any, left: bool = True, check_errors: bool = False) -> Any:
    _check_float("solve", a, b)
    lu, pivots, perm = a._lu()
    vector = left and (b.ndim == 1 or (b.ndim == a.ndim - 1 and list(b.shape) == list(a.shape[:-1])))
    if vector:
        x = _lu_solve(lu, perm, b.unsqueeze(-1), False).squeeze(-1)
    elif left:
        x = _lu_solve(lu, perm, b, False)
    else:
        x = _mT(_lu_solve(lu, perm, _mT(b), True))
    return x, lu, pivots, _info(lu)


# The matrix exponential by scaling and squaring: each matrix scaled by 2^-s to a 1-norm of at
# most _THETA, its exponential the Taylor polynomial of degree 18 (whose remainder there is below
# the dtype's rounding: 2^19 / 19! for float32, 1 / 19! for float64), then squared s times. The
# s are each matrix's own and decided on the device; CUDA reads them to the host to loop, here
# the squaring is one loop of the engine's (``squarings``) and nothing is read.
_THETA = {"float32": 2.0, "float64": 1.0}
_TAYLOR = [1.0 / math.factorial(k) for k in range(19)]


def _taylor_18(a: Any, eye: Any) -> Any:
    """sum a^k / k! for k <= 18, in 7 products (Paterson and Stockmeyer: powers up to a^4, then
    Horner's rule in a^4 over polynomials of degree 3)."""
    powers = [eye, a, a.matmul(a)]
    powers.append(powers[2].matmul(a))
    a4 = powers[2].matmul(powers[2])

    def block(j: int) -> Any:
        terms = [_TAYLOR[4 * j + i] * powers[i] for i in range(4) if 4 * j + i <= 18]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out

    out = block(4)
    for j in (3, 2, 1, 0):
        out = block(j) + a4.matmul(out)
    return out


@lower(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(a: Any) -> Any:
    if a.dtype not in ("float32", "float64", "float16", "bfloat16"):
        raise Unsupported("matrix_exp of complex matrices")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are "
                           f"{a.shape[-2] if a.ndim > 1 else 1} by {a.shape[-1]} matrices")
    dtype = a.dtype
    x = a if dtype in _THETA else a.astype("float32")  # half precision computed in float32
    if x.shape[-1] == 1:
        return x.exp().astype(dtype)
    norm = x.abs().sum([x.ndim - 2]).amax([x.ndim - 2])  # the 1-norm of each matrix
    # s = ceil(log2(norm / theta)), at least 0; a norm of inf or NaN takes none (its NaN stays).
    s = -(-(norm / _THETA[x.dtype]).log() / math.log(2.0)).floor()
    s = xp.where(isfinite(s), s.clamp(min=0.0), xp.zeros_like(s))
    scaled = x * (2.0 ** (-s)).unsqueeze(-1).unsqueeze(-1)
    taylor = _taylor_18(scaled, _eye(x.shape[-1], x.shape[:-2], x.dtype))
    return taylor._squarings(s.astype("int64")).astype(dtype)


__all__: List[str] = []
