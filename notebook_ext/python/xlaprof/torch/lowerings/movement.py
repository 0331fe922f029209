"""Movement: copies that rearrange, repeat or pad values (``cat``, ``flip``, ``roll``, ``tril``,
``pixel_shuffle``, ...).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

import xlaprof as xp

from .._device import TO_TORCH, engine_dtype
from .._tensor import LazyTensor, value
from .common import aten, triangle, vjp
from .registry import lower, lower_raw
from .views import slice_


@lower(aten.cat.default, complex_safe=True)
def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    return xp.cat(list(tensors), dim)


@lower(aten.stack.default, complex_safe=True)
def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    return xp.stack(list(tensors), dim)


@lower(aten.flip.default, complex_safe=True)
def flip(x: Any, dims: Sequence[int]) -> Any:
    return x.flip(list(dims))


@lower(aten.replication_pad1d_backward.default, aten.replication_pad2d_backward.default,
       aten.replication_pad3d_backward.default)
def replication_pad_backward(grad: Any, x: Any, padding: Sequence[int]) -> Any:
    """torch decomposes the forward; the backward is the gradient of the same gather."""
    return vjp(lambda v: _replicate(v, padding), [x], grad)[0]


def _replicate(x: Any, pad: Sequence[int]) -> Any:
    """Replication padding (``pad`` as torch orders it, the last dim first): a gather of the
    clamped positions along each padded dim."""
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        n = x.shape[d]
        rows = [min(max(j, 0), n - 1) for j in range(-int(pad[2 * i]), n + int(pad[2 * i + 1]))]
        x = x.index_select(d, xp.tensor(rows, dtype="int64"))
    return x


@lower(aten.constant_pad_nd.default, complex_safe=True)
def constant_pad_nd(x: Any, pad: Sequence[int], value: Any = 0) -> Any:
    pads = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pads[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        index = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(pads))
        x = x[index]
        pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    return x.pad(pads, value)


@lower(aten.tril.default)
def tril(x: Any, diagonal: int = 0) -> Any:
    return triangle(x, diagonal, lower_part=True)


@lower(aten.triu.default)
def triu(x: Any, diagonal: int = 0) -> Any:
    return triangle(x, diagonal, lower_part=False)


@lower(aten.repeat.default)
def repeat(x: Any, repeats: Sequence[int]) -> Any:
    repeats = [int(r) for r in repeats]
    lead = len(repeats) - x.ndim
    x = x.reshape(*([1] * lead + list(x.shape)))
    # Each dim d of size n becomes (r, n) broadcast, then merged: tiles, as torch repeats.
    shape, expanded, final = [], [], []
    for r, n in zip(repeats, x.shape):
        shape += [1, n]
        expanded += [r, n]
        final.append(r * n)
    return x.reshape(*shape).expand(*expanded).reshape(*final)


@lower(aten.roll.default)
def roll(x: Any, shifts: Sequence[int], dims: Sequence[int] = ()) -> Any:
    if not dims:
        return roll(x.reshape(-1), shifts, [0]).reshape(*x.shape)
    for s, d in zip(shifts, dims):
        d = d % x.ndim
        n = x.shape[d]
        if n == 0:
            continue
        s = s % n
        if s:
            head = tuple(slice(None) if i != d else slice(n - s, n) for i in range(x.ndim))
            tail = tuple(slice(None) if i != d else slice(0, n - s) for i in range(x.ndim))
            x = xp.cat([x[head], x[tail]], d)
    return x


@lower(aten.block_diag.default)
def block_diag(tensors: Sequence[Any]) -> Any:
    dtype = TO_TORCH[tensors[0].dtype]
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, TO_TORCH[t.dtype])
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    cols = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = cols - left - b.shape[1]
        rows.append(b.astype(engine_dtype(dtype)).pad([(0, 0), (left, right)], 0.0))
        left += b.shape[1]
    return xp.cat(rows, 0)


@lower(aten.rot90.default)
def rot90(x: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Any:
    d0, d1 = dims[0] % x.ndim, dims[1] % x.ndim
    k %= 4
    if k == 1:
        return x.flip([d1]).transpose(d0, d1)
    if k == 2:
        return x.flip([d0, d1])
    if k == 3:
        return x.transpose(d0, d1).flip([d1])
    return x.clone()


@lower(aten.pixel_shuffle.default)
def pixel_shuffle(x: Any, r: int) -> Any:
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    y = y.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


@lower(aten.pixel_unshuffle.default)
def pixel_unshuffle(x: Any, r: int) -> Any:
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    y = y.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return y.reshape(*lead, c * r * r, h // r, w // r)


@lower(aten.channel_shuffle.default, aten.native_channel_shuffle.default)
def channel_shuffle(x: Any, groups: int) -> Any:
    n, c, *rest = x.shape
    return x.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(*x.shape)


@lower_raw(aten.narrow_copy.default)
def narrow_copy(t: LazyTensor, dim: int, start: int, length: int) -> LazyTensor:
    return LazyTensor(value(slice_(t, dim, start, start + length, 1)).clone())
