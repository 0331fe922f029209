"""Packed sequences (``nn.utils.rnn.pack_padded_sequence``): the time-major gather of the
sequences' live steps, its backward, with the batch sizes on the CPU, as torch keeps them on CUDA.

``PackedSequence`` refuses batch sizes on any device but the CPU, and torch's recurrent layers
read them on the host (``lstm.data``'s decomposition splits its input by them), so they are
computed from the lengths, which torch requires on the CPU too: no sync. The packing itself is
one gather whose positions the lengths fix, so each set of lengths is one graph.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np
import torch

from xlaprof import _native

from .._tensor import LazyTensor, value
from .common import aten
from .registry import lower_raw


def _positions(batch_sizes: Sequence[int], batch: int) -> Any:
    """Where each packed row lies in the time-major input flattened to (time * batch, ...)."""
    return np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)]).astype(np.int64)


@lower_raw(aten._pack_padded_sequence.default)
def pack_padded_sequence(input: LazyTensor, lengths: torch.Tensor, batch_first: bool) -> Tuple[Any, torch.Tensor]:
    if lengths.device.type != "cpu" or lengths.dim() != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D "
                           f"{lengths.device.type} {lengths.dtype} tensor")
    lens: List[int] = lengths.tolist()
    x = value(input)
    if batch_first:
        x = x.transpose(0, 1)
    steps, batch = x.shape[0], x.shape[1]
    # torch's own checks, with its words (`_pack_padded_sequence` in PackedSequence.cpp).
    if len(lens) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} "
                           f"(batch_size={batch})")
    if lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in "
                           "'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                           "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                           "pack_sequence to sidestep this requirement if you do not need ONNX exportability.")
    if lens[0] > steps:
        raise RuntimeError(f"Expected sequence length to be smaller than or equal to {steps}, but got {lens[0]}")
    batch_sizes = [sum(n > t for n in lens) for t in range(lens[0])]
    rows = x.reshape(steps * batch, *x.shape[2:])
    data = rows.index_select(0, _native.from_array(_positions(batch_sizes, batch)))
    return LazyTensor(data), torch.tensor(batch_sizes, dtype=torch.int64)


@lower_raw(aten._pack_padded_sequence_backward.default)
def pack_padded_sequence_backward(grad: LazyTensor, input_size: Sequence[int], batch_sizes: torch.Tensor,
                                  batch_first: bool) -> LazyTensor:
    sizes = list(input_size)
    if batch_first:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    steps, batch = sizes[0], sizes[1]
    g = value(grad)
    rows = _native.zeros(steps * batch, *sizes[2:], dtype=g.dtype)
    rows = rows.index_add(0, _native.from_array(_positions(batch_sizes.tolist(), batch)), g)
    x = rows.reshape(*sizes)
    return LazyTensor(x.transpose(0, 1) if batch_first else x)
