"""``torch.special`` on the engine: the error-function family on XLA's own ops, and the modified
Bessel functions as integrals, summed on fixed points, with their asymptotic series for large
arguments.

Why integrals: ``I_n(x) = 1/pi * int_0^pi exp(x cos t) cos(n t) dt`` has a periodic analytic
integrand, for which the trapezoid rule converges geometrically, and ``K_n(x) = int_0^inf
exp(-x cosh t) cosh(n t) dt`` decays doubly exponentially; a few dozen points give float64
accuracy for moderate arguments. Both are one fused elementwise sum for XLA: no tables of
coefficients, no per-element loops.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, List, Tuple

import torch

import xlaprof as xp

from .._device import engine_dtype
from .common import aten, broadcast_shape, to_float
from .elementwise import acos, isnan
from .registry import declare, lower


_EULER = 0.5772156649015329


def _f64(x: Any) -> Any:
    return to_float(x).astype("float64")


# ---- the error-function family (erf, erfc, log1p and expm1 are XLA's own: the loop at the end) 


@lower(aten.special_ndtri.default)
def ndtri(p: Any) -> Any:
    # 2p - 1 is exact in float64 for a float32 p: the tails keep their digits.
    out = _f64(p) * 2.0 - 1.0
    return (out.erfinv() * math.sqrt(2.0)).astype(to_float(p).dtype)


@lower(aten.special_log_ndtr.default)
def log_ndtr(x: Any) -> Any:
    """log of the normal CDF: ``log(erfc(-x/sqrt2)/2)`` below zero, ``log1p(-erfc(x/sqrt2)/2)``
    above, and its asymptotic series far in the left tail where erfc underflows float64."""
    x64 = _f64(x)
    left = (((-x64) * (1.0 / math.sqrt(2.0))).erfc() * 0.5).log()
    right = ((x64 * (1.0 / math.sqrt(2.0))).erfc() * -0.5).log1p()
    z = xp.where(x64 < -20.0, x64, -20.0)
    inv2 = 1.0 / (z * z)
    tail = (-0.5 * z * z - (-z).log() - 0.5 * math.log(2.0 * math.pi)
            + (inv2 * (-1.0 + inv2 * (3.0 - 15.0 * inv2))).log1p())
    out = xp.where(x64 < -20.0, tail, xp.where(x64 < 0.0, left, right))
    return out.astype(to_float(x).dtype)


@lower(aten.special_erfcx.default)
def erfcx(x: Any) -> Any:
    """``exp(x^2) erfc(x)``: directly in float64 up to 25, its asymptotic series beyond (where
    the two factors overflow and underflow)."""
    x64 = _f64(x)
    small = xp.where(x64 < 25.0, x64, 0.0)
    direct = (small * small).exp() * small.erfc()
    big = xp.where(x64 < 25.0, 25.0, x64)
    inv2 = 1.0 / (big * big)
    series = (1.0 + inv2 * (-0.5 + inv2 * (0.75 - 1.875 * inv2))) / (big * math.sqrt(math.pi))
    return xp.where(x64 < 25.0, direct, series).astype(to_float(x).dtype)


@lower(aten.special_zeta.default)
def zeta(x: Any, q: Any) -> Any:
    return to_float(x)._zeta(q)


@lower(aten.special_zeta.self_scalar)
def zeta_self_scalar(x: Any, q: Any) -> Any:
    return xp.full_like(q, float(x), dtype=to_float(q).dtype)._zeta(q)


@lower(aten.special_zeta.other_scalar)
def zeta_other_scalar(x: Any, q: Any) -> Any:
    return to_float(x)._zeta(float(q))


@lower(aten.nextafter.default)
def nextafter(x: Any, other: Any) -> Any:
    return x.nextafter(other)


@lower(aten.special_entr.default)
def entr(x: Any) -> Any:
    x = to_float(x)
    safe = xp.where(x > 0, x, 1.0)
    out = xp.where(x > 0, -x * safe.log(), xp.where(x.eq(0), 0.0, -math.inf))
    return xp.where(isnan(x), x, out).astype(x.dtype)


def _xlog1py(x: Any, y: Any) -> Any:
    out = x * y.log1p()
    return xp.where(x.eq(0) & ~isnan(y), xp.zeros_like(out), out)


@lower(aten.special_xlog1py.default)
def xlog1py(x: Any, y: Any) -> Any:
    return _xlog1py(to_float(x), to_float(y))


@lower(aten.special_xlog1py.self_scalar)
def xlog1py_self_scalar(x: Any, y: Any) -> Any:
    y = to_float(y)
    return _xlog1py(xp.full_like(y, float(x)), y)


@lower(aten.special_xlog1py.other_scalar)
def xlog1py_other_scalar(x: Any, y: Any) -> Any:
    x = to_float(x)
    return _xlog1py(x, xp.full_like(x, float(y)))


@lower(aten.special_spherical_bessel_j0.default)
def spherical_bessel_j0(x: Any) -> Any:
    x = to_float(x)
    safe = xp.where(x.eq(0), 1.0, x)
    return xp.where(x.eq(0), 1.0, safe.sin() / safe)


# ---- modified Bessel functions -------------------------------------------------------------------

# The trapezoid rule's points on [0, pi] for I, on [0, 20] for K: its error for a peak of width
# 1/sqrt(x) at spacing h is about exp(-2 pi^2 / (x h^2)), far below float64's for x <= 30.
_I_POINTS = 48
_K_STEP, _K_END = 0.125, 20.0
_LARGE = 30.0  # from here on, the asymptotic series (six terms: below 1e-9 relative)


def _asymptotic(order: int, x: Any, scaled_k: bool) -> Any:
    """``sum_k c_k(order) / x^k`` of the large-x series: ``I_n(x) e^-x sqrt(2 pi x)`` (alternating)
    or ``K_n(x) e^x sqrt(2x/pi)``."""
    mu = 4.0 * order * order
    total, term = xp.ones_like(x), xp.ones_like(x)
    for k in range(1, 7):
        term = term * ((mu - (2 * k - 1) ** 2) / (k * 8.0)) / x
        total = total + (term if scaled_k else term * (-1.0) ** k)
    return total


def _weights(points: int) -> List[float]:
    return [0.5 if j in (0, points) else 1.0 for j in range(points + 1)]


def _i_scaled(order: int, x: Any) -> Any:
    """``I_order(|x|) exp(-|x|)`` in float64 (order 0 or 1)."""
    a = x.abs()
    near = xp.where(a < _LARGE, a, 0.0).unsqueeze(-1)
    t = [math.pi * j / _I_POINTS for j in range(_I_POINTS + 1)]
    cos_t = xp.tensor([math.cos(v) for v in t], dtype="float64")
    w = xp.tensor([wj * (math.cos(order * v)) / _I_POINTS for wj, v in zip(_weights(_I_POINTS), t)],
                  dtype="float64")
    quad = ((near * (cos_t - 1.0)).exp() * w).sum([near.ndim - 1])
    far = xp.where(a < _LARGE, _LARGE, a)
    series = _asymptotic(order, far, False) / (far * (2.0 * math.pi)).sqrt()
    return xp.where(a < _LARGE, quad, series)


def _k_scaled(order: int, x: Any) -> Any:
    """``K_order(x) exp(x)`` in float64 for x > 0."""
    points = int(_K_END / _K_STEP)
    t = [_K_STEP * j for j in range(points + 1)]
    tiny = 1e-300
    near = xp.where((x < _LARGE) & (x > 0), x, 1.0).unsqueeze(-1)
    cosh_t = xp.tensor([math.cosh(v) for v in t], dtype="float64")
    w = xp.tensor([wj * _K_STEP * math.cosh(order * v) for wj, v in zip(_weights(points), t)],
                  dtype="float64")
    quad = ((near * (1.0 - cosh_t)).exp() * w).sum([near.ndim - 1])
    far = xp.where(x < _LARGE, _LARGE, x)
    series = _asymptotic(order, far, True) * (math.pi / 2.0 / far).sqrt()
    # Below 1e-6 the integral's tail is past 20: the small-x forms (-log(x/2) - gamma, 1/x).
    small = xp.where(x > tiny, x, tiny)
    smallest = (-(small * 0.5).log() - _EULER) if order == 0 else 1.0 / small
    out = xp.where(x < 1e-6, smallest, xp.where(x < _LARGE, quad, series))
    return xp.where(x.eq(0), math.inf, xp.where(x < 0, math.nan, out))


def _bessel(scaled: Any, unscale: Any, odd: bool) -> Any:
    """A lowering from a scaled function of float64 values, the factor that undoes its scaling
    (None: the scaled one is wanted) and whether the function is odd."""
    def lowered(x: Any) -> Any:
        x = to_float(x)
        x64 = x.astype("float64")
        out = scaled(x64)
        if unscale is not None:
            out = out * unscale(x64)
        if odd:
            out = out * x64.sign()
        return xp.where(isnan(x64), x64, out).astype(x.dtype)

    return lowered


def _exp_abs(x: Any) -> Any:
    return x.abs().exp()


def _exp_neg(x: Any) -> Any:
    return (-x).exp()


_i0e, _i1e = partial(_i_scaled, 0), partial(_i_scaled, 1)
_k0e, _k1e = partial(_k_scaled, 0), partial(_k_scaled, 1)

lower(aten.i0.default, aten.special_modified_bessel_i0.default)(_bessel(_i0e, _exp_abs, False))
lower(aten.special_i0e.default)(_bessel(_i0e, None, False))
lower(aten.special_i1.default, aten.special_modified_bessel_i1.default)(_bessel(_i1e, _exp_abs, True))
lower(aten.special_i1e.default)(_bessel(_i1e, None, True))
lower(aten.special_modified_bessel_k0.default)(_bessel(_k0e, _exp_neg, False))
lower(aten.special_modified_bessel_k1.default)(_bessel(_k1e, _exp_neg, False))
lower(aten.special_scaled_modified_bessel_k0.default)(_bessel(_k0e, None, False))
lower(aten.special_scaled_modified_bessel_k1.default)(_bessel(_k1e, None, False))


# Special functions of the engine's own (XLA's): integers compute in the default float dtype.
for _name in ("lgamma", "digamma", "erfinv", "erf", "erfc", "log1p", "expm1"):
    lower(getattr(aten, _name).default)(
        (lambda n: lambda x: getattr(to_float(x), n)())(_name)
    )
declare(aten.erfinv, aten.expm1, aten.log1p, autocast="float32")


@lower(aten.polygamma.default)
def polygamma(n: int, x: Any) -> Any:
    return to_float(x).polygamma(n)


@lower(aten.mvlgamma.default)
def mvlgamma(x: Any, p: int) -> Any:
    # log of the multivariate gamma function: p(p-1)/4 log(pi) + sum_i lgamma(x - i/2).
    x = to_float(x)
    total = x.lgamma()
    for i in range(1, p):
        total = total + (x - i / 2).lgamma()
    return total + p * (p - 1) / 4 * math.log(math.pi)


# ---- orthogonal polynomials ----------------------------------------------------------------
#
# Each element's degree is its own: the three-term recurrence is one loop of the engine's
# (``three_term_recurrence``), run to the largest degree, the elements of smaller ones keeping
# theirs. torch's kernels take the same special cases first (negative degrees, x at the ends
# of the interval, the closed trigonometric forms of high degrees inside it), and so do these.

# [a1, a0, b1, b0, c1, c0, d1, d0]: P_m = ((a1 m + a0) x + b1 m + b0) P_{m-1} - (c1 m + c0) P_{m-2},
# over d1 m + d0.
_CHEBYSHEV = (0, 2, 0, 0, 0, 1, 0, 1)
_HERMITE = (0, 2, 0, 0, 2, -2, 0, 1)
_HERMITE_E = (0, 1, 0, 0, 1, -1, 0, 1)
_LAGUERRE = (0, -1, 2, -1, 1, -1, 1, 0)
_LEGENDRE = (2, -1, 0, 0, 1, -1, 1, 0)


_FLOATS = ("float64", "float32", "float16", "bfloat16")


def _common_float(*values: Any) -> str:
    """The float dtype torch computes a polynomial in: the operands' promoted, integers in the
    default float dtype."""
    floats = {v.dtype for v in values if isinstance(v, xp.Tensor) and v.dtype in _FLOATS}
    for dtype in ("float64", "float32"):
        if dtype in floats:
            return dtype
    if len(floats) == 1:
        return floats.pop()
    return "float32" if floats else engine_dtype(torch.get_default_dtype())


def _operands(x: Any, n: Any) -> Tuple[Any, Any, str]:
    """x in the dtype to compute in (half precision computed in float32), each element's
    degree as an integer (torch truncates; a NaN or infinite degree counts as negative), and the
    result's dtype."""
    dtype = _common_float(x, n)
    like = x if isinstance(x, xp.Tensor) else n
    work = "float32" if dtype in ("float16", "bfloat16") else dtype
    x = x.astype(work) if isinstance(x, xp.Tensor) else xp.full_like(like, float(x), dtype=work)
    n = n.astype(work) if isinstance(n, xp.Tensor) else xp.full_like(like, float(n), dtype=work)
    x, n = _broadcast(x, n)
    finite = (n - n).eq(0)
    degree = xp.where(finite, n.clamp(-1.0, 2.0 ** 30), -1.0).astype("int64")
    return x, degree, dtype


def _broadcast(a: Any, b: Any) -> Tuple[Any, Any]:
    shape = broadcast_shape([a.shape, b.shape])
    return a.expand(*shape), b.expand(*shape)


def _recurrence(x: Any, degree: Any, p1: Any, coefficients: Tuple[int, ...], closed: Any = None) -> Any:
    """P_n(x) by the recurrence (P_0 = 1), for the elements where ``closed`` (a mask) is not
    set: those run no step of the loop."""
    steps = degree if closed is None else xp.where(closed, 0, degree)
    out = x._three_term(steps, p1, list(coefficients))
    return xp.where(degree.eq(0), 1.0, out)


def _chebyshev(kind: str, y: Any, n: Any, trig_above: int) -> Any:
    """The Chebyshev polynomials of the four kinds at y (for the shifted ones, 2x - 1): at the
    ends of [-1, 1] their values, inside it above degree ``trig_above`` their trigonometric
    forms, else the recurrence."""
    nf = n.astype(y.dtype)
    even = n.remainder(2).eq(0)
    sign = xp.where(even, 1.0, -1.0)
    inside = y.abs() < 1.0
    theta = acos(xp.where(inside, y, 0.0))
    trig = inside & (n > trig_above)
    if kind == "t":
        p1, top, bottom = y, xp.ones_like(y), sign
        closed = (nf * theta).cos()
    elif kind == "u":
        p1, top, bottom = y * 2.0, nf + 1.0, sign * (nf + 1.0)
        s = theta.sin()
        closed = xp.where(s.eq(0), (nf + 1.0) * ((nf + 1.0) * theta).cos() / y,
                          ((nf + 1.0) * theta).sin() / xp.where(s.eq(0), 1.0, s))
    elif kind == "v":
        p1, top, bottom = y * 2.0 - 1.0, xp.ones_like(y), sign * (2.0 * nf + 1.0)
        half = theta * 0.5
        closed = xp.where(half.sin().eq(1.0), sign * (2.0 * nf + 1.0), ((nf + 0.5) * theta).cos() / half.cos())
    else:
        p1, top, bottom = y * 2.0 + 1.0, 2.0 * nf + 1.0, sign
        half = theta * 0.5
        ends = xp.where(y > 0, 2.0 * nf + 1.0, sign)
        sine = half.sin()
        closed = xp.where(half.cos().eq(1.0), ends, ((nf + 0.5) * theta).sin() / xp.where(sine.eq(0), 1.0, sine))
    at_end = y.abs().eq(1.0)
    out = _recurrence(y, n, p1, _CHEBYSHEV, at_end | trig)
    out = xp.where(trig, closed, out)
    out = xp.where(at_end, xp.where(y > 0, top, bottom), out)
    return xp.where(n < 0, 0.0, out)


def _hermite(physicists: bool, x: Any, n: Any) -> Any:
    limit = 512 if x.dtype == "float64" else 128  # torch's: past it, NaN
    p1 = x * 2.0 if physicists else x
    out = _recurrence(x, n, p1, _HERMITE if physicists else _HERMITE_E, n > limit)
    out = xp.where(n > limit, math.nan, out)
    return xp.where(n < 0, 0.0, out)


def _laguerre(x: Any, n: Any) -> Any:
    out = _recurrence(x, n, 1.0 - x, _LAGUERRE, x.eq(0))
    return xp.where(n < 0, 0.0, xp.where(x.eq(0), 1.0, out))


def _legendre(x: Any, n: Any) -> Any:
    at_end = x.abs().eq(1.0)
    out = _recurrence(x, n, x, _LEGENDRE, at_end)
    ends = xp.where((x > 0) | n.remainder(2).eq(0), 1.0, -1.0)
    return xp.where(n < 0, 0.0, xp.where(at_end, ends, out))


def _polynomial(fn: Any) -> Any:
    def run(x: Any, n: Any) -> Any:
        x, degree, dtype = _operands(x, n)
        return fn(x, degree).astype(dtype)

    return run


_POLYNOMIALS = {
    "chebyshev_polynomial_t": lambda x, n: _chebyshev("t", x, n, 6),
    "chebyshev_polynomial_u": lambda x, n: _chebyshev("u", x, n, 8),
    "chebyshev_polynomial_v": lambda x, n: _chebyshev("v", x, n, 8),
    "chebyshev_polynomial_w": lambda x, n: _chebyshev("w", x, n, 8),
    "shifted_chebyshev_polynomial_t": lambda x, n: _chebyshev("t", x * 2.0 - 1.0, n, 6),
    "shifted_chebyshev_polynomial_u": lambda x, n: _chebyshev("u", x * 2.0 - 1.0, n, 6),
    "shifted_chebyshev_polynomial_v": lambda x, n: _chebyshev("v", x * 2.0 - 1.0, n, 6),
    "shifted_chebyshev_polynomial_w": lambda x, n: _chebyshev("w", x * 2.0 - 1.0, n, 4),
    "hermite_polynomial_h": partial(_hermite, True),
    "hermite_polynomial_he": partial(_hermite, False),
    "laguerre_polynomial_l": _laguerre,
    "legendre_polynomial_p": _legendre,
}
for _name, _fn in _POLYNOMIALS.items():
    _packet = getattr(aten, "special_" + _name)
    lower(_packet.default, _packet.x_scalar, _packet.n_scalar)(_polynomial(_fn))
