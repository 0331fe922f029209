"""Pooling over one, two or three spatial dims, from the engine's 2-D ops.

A box's sum (or max) is separable: the sum over a box is the sum, along one dim, of sums along
the others. So every pool here is one 2-D window reduction per spatial dim, each over a view that
puts that dim first; the counts that average pooling divides by depend on shapes alone and are
worked out here, on the host. Adaptive pooling's windows differ in size: its average is one
matrix product per dim, its max a masked maximum per dim (keeping where each came from).
"""

from __future__ import annotations

import math
from typing import Any, List, Sequence, Tuple

import xlaprof as xp

from .common import Unsupported, aten, vjp
from .registry import lower


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
    low = [0] * first + p
    high = [0] * first + [(o - 1) * ss + kk - n - pp for o, ss, kk, n, pp in zip(outs, s, k, sizes, p)]
    padded = x
    if any(low) or any(h > 0 for h in high):
        padded = x.pad([(lo, max(hi, 0)) for lo, hi in zip(low, high)])
    for i in range(nd):
        d = first + i
        need = (outs[i] - 1) * s[i] + k[i]
        if padded.shape[d] > need:
            padded = padded[tuple(slice(None) if j != d else slice(0, need) for j in range(x.ndim))]
        padded = _window_sum(padded, d, k[i], s[i])
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
    out = x
    first = x.ndim - 3
    for i, o in enumerate(output_size):
        d = first + i
        n = x.shape[d]
        rows = [[1.0 / (e - b) if b <= j < e else 0.0 for j in range(n)] for b, e in _bounds(n, o)]
        m = xp.tensor(rows, dtype=x.dtype)                              # [o, n]
        out = (out.transpose(d, x.ndim - 1) @ m.T).transpose(d, x.ndim - 1)
    return out


@lower(aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool3d_backward(grad: Any, x: Any) -> Any:
    return vjp(lambda v: adaptive_avg_pool3d(v, grad.shape[-3:]), [x], grad)[0]


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


@lower(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(x: Any, output_size: Sequence[int]) -> Any:
    """``(values, indices)``: each window's maximum and its flat position ``h * W + w`` in the
    input plane, the first in row-major order among equal maxima (torch's scan)."""
    h_out, w_out = output_size
    H, W = x.shape[-2], x.shape[-1]

    def mask(n: int, out: int) -> Any:
        return xp.tensor([[b <= j < e for j in range(n)] for b, e in _bounds(n, out)], dtype="bool")

    # Along W: [..., H, Wo] maxima and the w each came from.
    mw = mask(W, w_out)                                                   # [Wo, W]
    cand = xp.where(mw, x.unsqueeze(-2), -math.inf)                       # [..., H, Wo, W]
    row_max = cand.amax(-1)
    row_arg = cand.argmax(-1)                                             # first maximum
    # Along H: the first row holding each window's maximum.
    mh = mask(H, h_out)                                                   # [Ho, H]
    by_col = row_max.transpose(-2, -1)                                    # [..., Wo, H]
    cand_h = xp.where(mh, by_col.unsqueeze(-2), -math.inf)                # [..., Wo, Ho, H]
    values = cand_h.amax(-1)                                              # [..., Wo, Ho]
    h_arg = cand_h.argmax(-1)                                             # [..., Wo, Ho]
    w_of = row_arg.transpose(-2, -1)                                      # [..., Wo, H]
    hot = h_arg.unsqueeze(-1) == xp.arange(0, H, 1, dtype="int64")        # [..., Wo, Ho, H]
    w_arg = xp.where(hot, w_of.unsqueeze(-2), 0).sum([hot.ndim - 1])
    index = h_arg * W + w_arg
    return values.transpose(-2, -1), index.transpose(-2, -1).astype("int64")


@lower(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(grad: Any, x: Any, indices: Any) -> Any:
    plane = x.shape[-2] * x.shape[-1]
    lead = list(x.shape[:-2])
    g = grad.reshape(*lead, -1)
    idx = indices.reshape(*lead, -1)
    hot = (idx.unsqueeze(-1) == xp.arange(0, plane, 1, dtype="int64")).astype(grad.dtype)   # [..., k, plane]
    return (hot * g.unsqueeze(-1)).sum([hot.ndim - 2]).reshape(*x.shape)


@lower(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_backward(grad: Any, x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        dilation: Sequence[int], ceil_mode: bool, indices: Any) -> Any:
    if any(d != 1 for d in dilation) or ceil_mode:
        raise Unsupported("max_pool2d backward with dilation or ceil_mode")
    return vjp(lambda v: xp.max_pool2d(v, tuple(kernel), tuple(stride or kernel), tuple(padding)), [x], grad)[0]
