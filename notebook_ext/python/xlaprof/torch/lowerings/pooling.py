"""Pooling over one, two or three spatial dims, from the engine's 2-D ops.

A box's sum (or max) is separable: the sum over a box is the sum, along one dim, of sums along
the others. So every pool here is one 2-D window reduction per spatial dim, each over a view that
puts that dim first; the counts that average pooling divides by depend on shapes alone and are
worked out here, on the host. Adaptive pooling's windows differ in size: its average is one
matrix product per dim, its max a masked maximum per dim (keeping where each came from), and so
is antialiased resampling, whose filter's weights depend on shapes alone too.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, List, Sequence, Tuple

import numpy as np

import xlaprof as xp

from .common import Unsupported, aten, half_in_float, vjp
from .indexing import gather
from .registry import lower
from .scatter import scatter_add


def _window_sum(x: Any, d: int, k: int, s: int) -> Any:
    """Sums of windows of ``k`` every ``s`` along dim ``d`` (no padding)."""
    moved = x.transpose(d, x.ndim - 1)
    lead = list(moved.shape[:-1])
    n = moved.shape[-1]
    flat = moved.reshape(-1, 1, 1, n)
    out = xp.avg_pool2d(flat, (1, k), (1, s), (0, 0)) * float(k)
    return out.reshape(*lead, out.shape[-1]).transpose(d, x.ndim - 1)


def _out_size(n: int, k: int, s: int, p: int, ceil_mode: bool) -> int:
    """torch's pooling output size (dilation 1)."""
    span = n + 2 * p - k
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _spread(v: Sequence[int], nd: int, default: Sequence[int]) -> List[int]:
    v = list(v) or list(default)
    return v * nd if len(v) == 1 else v


def _avg_pool(x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int], ceil_mode: bool,
              count_include_pad: bool, divisor_override: Any) -> Any:
    nd = len(kernel)
    if x.ndim not in (nd + 1, nd + 2) or x.dtype not in ("float32", "float64", "bfloat16", "float16"):
        raise Unsupported("avg_pool of this input")
    if x.dtype in ("bfloat16", "float16"):
        # Summed in float32, one rounding at the end (as torch's CPU kernel accumulates).
        out = _avg_pool(x.astype("float32"), kernel, stride, padding, ceil_mode, count_include_pad,
                        divisor_override)
        return out.astype(x.dtype)
    k = _spread(kernel, nd, kernel)
    s = _spread(stride, nd, k)
    p = _spread(padding, nd, [0])
    first = x.ndim - nd
    sizes = [x.shape[first + i] for i in range(nd)]
    outs = [_out_size(n, kk, ss, pp, ceil_mode) for n, kk, ss, pp in zip(sizes, k, s, p)]
    # A window wider than the padded input (a global pool written as a kernel of the channels'
    # count, as Hugging Face's EfficientNet does: 1280 over a 7x7 map) is one output, which sums
    # the padded input: the window is cut to it. Padded to the whole window, one 4x320x1x1 input
    # became a 500 MB array. The divisor below counts with the window as given, which the cut
    # does not change.
    window = [min(kk, n + 2 * pp) for kk, n, pp in zip(k, sizes, p)]
    low = [0] * first + p
    high = [0] * first + [(o - 1) * ss + kk - n - pp for o, ss, kk, n, pp in zip(outs, s, window, sizes, p)]
    padded = x
    if any(low) or any(h > 0 for h in high):
        padded = x.pad([(lo, max(hi, 0)) for lo, hi in zip(low, high)])
    for i in range(nd):
        d = first + i
        need = (outs[i] - 1) * s[i] + window[i]
        if padded.shape[d] > need:
            padded = padded[tuple(slice(None) if j != d else slice(0, need) for j in range(x.ndim))]
        padded = _window_sum(padded, d, window[i], s[i])
    if divisor_override:
        return padded / float(divisor_override)
    # Per dim, how many of a window's places count: inside the input and its padding, or
    # (count_include_pad=False) inside the input alone.
    divisor = None
    for i in range(nd):
        lo_bound, hi_bound = (-p[i], sizes[i] + p[i]) if count_include_pad else (0, sizes[i])
        counts = [min(o * s[i] - p[i] + k[i], hi_bound) - max(o * s[i] - p[i], lo_bound) for o in range(outs[i])]
        shape = [1] * x.ndim
        shape[first + i] = outs[i]
        c = xp.tensor([float(v) for v in counts], dtype=x.dtype).reshape(*shape)
        divisor = c if divisor is None else divisor * c
    return padded / divisor


@lower(aten.avg_pool2d.default)
def avg_pool2d(x: Any, kernel: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    return _avg_pool(x, _spread(kernel, 2, kernel), stride, padding, ceil_mode, count_include_pad, divisor_override)


@lower(aten.avg_pool3d.default)
def avg_pool3d(x: Any, kernel: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    return _avg_pool(x, _spread(kernel, 3, kernel), stride, padding, ceil_mode, count_include_pad, divisor_override)


@lower(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(grad: Any, x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        ceil_mode: bool, count_include_pad: bool, divisor_override: Any) -> Any:
    return vjp(lambda v: avg_pool2d(v, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override),
                [x], grad)[0]


@lower(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(grad: Any, x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        ceil_mode: bool, count_include_pad: bool, divisor_override: Any) -> Any:
    return vjp(lambda v: avg_pool3d(v, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override),
                [x], grad)[0]


def _bounds(n: int, out: int) -> List[Tuple[int, int]]:
    """Adaptive pooling's windows: [floor(i n / out), ceil((i + 1) n / out))."""
    return [((i * n) // out, -((-(i + 1) * n) // out)) for i in range(out)]


@lower(aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(x: Any, output_size: Sequence[int]) -> Any:
    return _adaptive_avg(x, output_size)


def _adaptive_avg(x: Any, output_size: Sequence[int]) -> Any:
    """Adaptive average pooling over the last ``len(output_size)`` dims: a product per dim."""
    out = x
    first = x.ndim - len(output_size)
    for i, o in enumerate(output_size):
        d = first + i
        n = x.shape[d]
        rows = [[1.0 / (e - b) if b <= j < e else 0.0 for j in range(n)] for b, e in _bounds(n, o)]
        m = xp.tensor(rows, dtype=x.dtype)                              # [o, n]
        out = (out.transpose(d, x.ndim - 1) @ m.T).transpose(d, x.ndim - 1)
    return out


@lower(aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool3d_backward(grad: Any, x: Any) -> Any:
    return vjp(lambda v: _adaptive_avg(v, grad.shape[-3:]), [x], grad)[0]


@lower(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(grad: Any, x: Any) -> Any:
    return vjp(lambda v: _adaptive_avg(v, grad.shape[-2:]), [x], grad)[0]


@lower(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x: Any, kernel: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
                            dilation: Sequence[int] = (1,), ceil_mode: bool = False) -> Any:
    """``(values, indices)``: each window's maximum (the engine's window reduction) and its flat
    position ``h * W + w`` in the input plane, the first in the window's row-major scan among
    equal maxima, a NaN winning as in torch's kernel. The positions come from one strided view
    of the padded input per kernel offset; XLA drops them when nothing reads them."""
    k = _spread(kernel, 2, kernel)
    s = _spread(stride, 2, k)
    p = _spread(padding, 2, [0])
    if any(d != 1 for d in _spread(dilation, 2, [1])) or ceil_mode or x.ndim not in (3, 4):
        raise Unsupported("max_pool2d with dilation or ceil_mode")
    values = xp.max_pool2d(x if x.ndim == 4 else x.unsqueeze(0), tuple(k), tuple(s), tuple(p))
    if x.ndim == 3:
        values = values.squeeze(0)
    H, W = x.shape[-2], x.shape[-1]
    h_out, w_out = values.shape[-2], values.shape[-1]
    lead = [(0, 0)] * (x.ndim - 2)
    padded = x.pad(lead + [(p[0], p[0]), (p[1], p[1])], value=-math.inf)
    best = index = None
    for i in range(k[0]):
        for j in range(k[1]):
            cand = padded[..., i:i + s[0] * (h_out - 1) + 1:s[0], j:j + s[1] * (w_out - 1) + 1:s[1]]
            where = xp.tensor([[(oh * s[0] + i - p[0]) * W + (ow * s[1] + j - p[1]) for ow in range(w_out)]
                               for oh in range(h_out)], dtype="int64")
            if best is None:
                best, index = cand, where + xp.zeros(list(cand.shape), dtype="int64")
                continue
            take = (cand > best) | (cand != cand)
            best = xp.where(take, cand, best)
            index = xp.where(take, where, index)
    return values, index


@lower(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool(x: Any, output_size: Sequence[int]) -> Any:
    """``(values, indices)``: each window's maximum and its flat position in the input's
    spatial dims, the first in row-major order among equal maxima (torch's scan). One masked
    maximum per dim, the last dim first, each carrying the positions its maxima came from: the
    first maximum along the last dim, then the first row holding the greatest of those, and so
    on, is the row-major scan's first maximum."""
    nd = len(output_size)
    sizes = list(x.shape[-nd:])
    volume = math.prod(sizes)
    values = x
    index = xp.arange(0, volume, 1, dtype="int64").reshape(*sizes).expand(*x.shape)
    for d in reversed(range(nd)):
        axis = x.ndim - nd + d
        n, out = sizes[d], output_size[d]
        mask = xp.tensor([[b <= j < e for j in range(n)] for b, e in _bounds(n, out)], dtype="bool")   # [out, n]
        v = values.transpose(axis, -1).unsqueeze(-2)                                  # [..., 1, n]
        cand = xp.where(mask, v, -math.inf)                                           # [..., out, n]
        first = cand.argmax(-1)                                                       # [..., out]
        hot = first.unsqueeze(-1) == xp.arange(0, n, 1, dtype="int64")               # [..., out, n]
        carried = xp.where(hot, index.transpose(axis, -1).unsqueeze(-2), 0).sum([hot.ndim - 1])
        values = cand.amax(-1).transpose(axis, -1)
        index = carried.transpose(axis, -1)
    return values, index.astype("int64")


@lower(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(grad: Any, x: Any, indices: Any) -> Any:
    return _to_positions(grad, x, indices, 2)


@lower(aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool3d_backward(grad: Any, x: Any, indices: Any) -> Any:
    return _to_positions(grad, x, indices, 3)


@lower(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_backward(grad: Any, x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        dilation: Sequence[int], ceil_mode: bool, indices: Any) -> Any:
    return _to_positions(grad, x, indices, 3)


def _to_positions(grad: Any, x: Any, indices: Any, nd: int) -> Any:
    """A max pool's backward: each output's gradient added at the input position its forward
    took (``indices``, flat in the last ``nd`` dims, as torch's kernels give them), whatever
    the windows were (dilated, ceil mode, adaptive)."""
    lead = list(x.shape[:-nd])
    volume = math.prod(x.shape[-nd:])
    zeros = xp.zeros(lead + [volume], dtype=grad.dtype)
    return scatter_add(zeros, len(lead), indices.reshape(*lead, -1), grad.reshape(*lead, -1)).reshape(*x.shape)


@lower(aten.fractional_max_pool2d.default, aten.fractional_max_pool3d.default)
def fractional_max_pool(x: Any, kernel: Sequence[int], output_size: Sequence[int], samples: Any) -> Any:
    """``(values, indices)`` over windows placed by ``samples`` (one number in [0, 1) per
    sample, channel and spatial dim), as torch's kernels place them: window ``i`` of a dim of
    ``n`` starts at ``int((i + u) * alpha) - int(u * alpha)``, ``alpha = (n - k) / (out - 1)``
    in the input's float type, the last at ``n - k``. Each window's maximum (a NaN winning)
    and its flat position in the input's spatial dims, the first in the window's row-major scan."""
    nd = len(kernel)
    batched = x.ndim == nd + 2
    x = x if batched else x.unsqueeze(0)
    n, c, sizes = x.shape[0], x.shape[1], list(x.shape[2:])
    u = samples.reshape(n, c, nd).astype(x.dtype)
    # torch's 2-D kernel reads a plane's samples as (w, h); the 3-D one as (t, h, w).
    order = [1, 0] if nd == 2 else list(range(nd))
    starts = []
    for d in range(nd):
        size, k, out = sizes[d], kernel[d], output_size[d]
        last = xp.full([n, c, 1], size - k, dtype="int64")
        if out > 1:
            alpha = float(np.float32(size - k) / np.float32(out - 1))
            ud = u[:, :, order[d]:order[d] + 1]
            steps = xp.arange(0, out - 1, 1, dtype=x.dtype).reshape(1, 1, out - 1)
            first = ((steps + ud) * alpha).astype("int64") - (ud * alpha).astype("int64")
            starts.append(xp.cat([first, last], 2))
        else:
            starts.append(last)
    strides = [math.prod(sizes[d + 1:]) for d in range(nd)]
    flat_x = x.reshape(n, c, -1)
    best = index = None
    for offsets in itertools.product(*[range(k) for k in kernel]):
        where = None
        for d in range(nd):
            shape = [n, c] + [output_size[e] if e == d else 1 for e in range(nd)]
            pos = ((starts[d] + offsets[d]) * strides[d]).reshape(*shape)
            where = pos if where is None else where + pos
        where = where.expand(n, c, *output_size)
        cand = gather(flat_x, 2, where.reshape(n, c, -1)).reshape(n, c, *output_size)
        if best is None:
            best, index = cand, where
            continue
        take = (cand > best) | (cand != cand)
        best = xp.where(take, cand, best)
        index = xp.where(take, where, index)
    if not batched:
        best, index = best.squeeze(0), index.squeeze(0)
    return best, index


@lower(aten.fractional_max_pool2d_backward.default)
def fractional_max_pool2d_backward(grad: Any, x: Any, kernel: Sequence[int], output_size: Sequence[int],
                                   indices: Any) -> Any:
    return _to_positions(grad, x, indices, 2)


@lower(aten.fractional_max_pool3d_backward.default)
def fractional_max_pool3d_backward(grad: Any, x: Any, kernel: Sequence[int], output_size: Sequence[int],
                                   indices: Any) -> Any:
    return _to_positions(grad, x, indices, 3)


@lower(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_backward(grad: Any, x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        dilation: Sequence[int], ceil_mode: bool, indices: Any) -> Any:
    if any(d != 1 for d in dilation) or ceil_mode:
        return _to_positions(grad, x, indices, 2)
    if x.ndim == 3:  # unbatched, as the forward takes it
        return max_pool2d_backward(grad.unsqueeze(0), x.unsqueeze(0), kernel, stride, padding, dilation, ceil_mode,
                                   indices.unsqueeze(0)).squeeze(0)
    return vjp(lambda v: xp.max_pool2d(v, tuple(kernel), tuple(stride or kernel), tuple(padding)), [x], grad)[0]


# ---- antialiased resampling (``F.interpolate(..., antialias=True)``, torchvision's Resize) ---
#
# Each output pixel is a normalized sum of the input pixels under a filter (a triangle for
# bilinear, Keys' cubic for bicubic) stretched by the scale when shrinking: weights that depend
# on the sizes alone. So each spatial dim is one product with an [out, in] matrix of them, made
# here on the host, and the backward is the same products transposed.


def _aa_filter(kind: str, x: float) -> float:
    x = abs(x)
    if kind == "bilinear":
        return max(0.0, 1.0 - x)
    a = -0.5  # torch's antialiased bicubic (PIL's)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return 0.0


@functools.lru_cache(maxsize=256)
def _aa_weights(kind: str, size: int, out: int, align_corners: bool, scale: Any) -> np.ndarray:
    """The [out, size] weights of one dim (``scale``: the caller's scale factor, or None)."""
    if align_corners:
        step = (size - 1) / (out - 1) if out > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None and scale > 0 else size / out
    support = (1.0 if kind == "bilinear" else 2.0) * max(step, 1.0)
    stretch = 1.0 / step if step >= 1.0 else 1.0
    weights = np.zeros((out, size))
    for i in range(out):
        center = step * (i + 0.5)
        lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), size)
        row = np.array([_aa_filter(kind, (j - center + 0.5) * stretch) for j in range(lo, hi)])
        if row.size and row.sum() != 0:
            weights[i, lo:hi] = row / row.sum()
    return weights


def _aa_products(x: Any, size: Sequence[int], out: Sequence[int], kind: str, align_corners: bool,
                 scales: Sequence[Any], transpose: bool) -> Any:
    """``x`` [N, C, H, W] resampled from ``size`` to ``out`` (or, ``transpose``, a gradient of
    the ``out`` sized result taken back to ``size``)."""
    for axis, (n, o, s) in enumerate(zip(size, out, scales)):
        w = xp.tensor(_aa_weights(kind, n, o, align_corners, s).tolist(), dtype=x.dtype)
        m = w if transpose else w.T
        d = x.ndim - 2 + axis
        x = (x.transpose(d, x.ndim - 1) @ m).transpose(d, x.ndim - 1)
    return x


def _aa(kind: str) -> Tuple[Any, Any, Any]:
    def forward(x: Any, output_size: Sequence[int], align_corners: bool, scales_h: Any = None,
                scales_w: Any = None) -> Any:
        return _aa_products(x, x.shape[-2:], output_size, kind, align_corners, (scales_h, scales_w), False)

    def vec(x: Any, output_size: Any, align_corners: bool, scale_factors: Any) -> Any:
        scales = tuple(scale_factors) if scale_factors else (None, None)
        if output_size is None:
            output_size = [int(math.floor(n * s)) for n, s in zip(x.shape[-2:], scales)]
        return forward(x, output_size, align_corners, *scales)

    def backward(grad: Any, output_size: Sequence[int], input_size: Sequence[int], align_corners: bool,
                 scales_h: Any = None, scales_w: Any = None) -> Any:
        return _aa_products(grad, input_size[-2:], output_size, kind, align_corners, (scales_h, scales_w), True)

    return half_in_float(forward), half_in_float(vec), half_in_float(backward)


for _kind in ("bilinear", "bicubic"):
    _forward, _vec, _backward = _aa(_kind)
    lower(getattr(aten, f"_upsample_{_kind}2d_aa").default)(_forward)
    lower(getattr(aten, f"_upsample_{_kind}2d_aa").vec)(_vec)
    lower(getattr(aten, f"_upsample_{_kind}2d_aa_backward").default)(_backward)
