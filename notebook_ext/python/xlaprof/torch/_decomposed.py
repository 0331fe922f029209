"""Ops that autograd differentiates through their decomposition on the device.

torch's autograd differentiates an op by its formula, and for resampling the formula is a
backward kernel of its own (``upsample_bilinear2d_backward``, ``grid_sampler_2d_backward``),
which torch writes for CUDA and the CPU only and decomposes nowhere: a vision model's backward
(a U-Net's or an FPN's upsampling, a spatial transformer's sampling) ran on the CPU fallback,
every gradient read to the host. At the device's autograd key these ops are instead torch's own
decompositions (``torch._decomp``: gathers and arithmetic, as the forward already ran here), so
autograd differentiates each op of it, and the backward is scatters the engine lowers. The
forward is what it was: the same decomposition.

The other way round, two backward ops have a CompositeImplicit kernel, which torch runs above the
device as its pieces: ``silu_backward`` (every SiLU/SwiGLU MLP's) and ``mish_backward``. In
bfloat16 each piece rounds, and SiLU's gradient was off by 3.4x torch's error. At the device's
autograd key they go below autograd to their lowerings instead, which compute half precision in
float32 as torch's kernels do.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch._decomp import decomposition_table

aten = torch.ops.aten
KEY = "AutogradPrivateUse1"

RESAMPLING = (
    aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d,
    aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d,
    aten.upsample_linear1d, aten.upsample_bilinear2d, aten.upsample_bicubic2d, aten.upsample_trilinear3d,
    aten._upsample_bilinear2d_aa, aten._upsample_bicubic2d_aa, aten.grid_sampler_2d,
)


def decompose_at_autograd_key(lib: torch.library.Library, packets: Iterable[object]) -> None:
    """Registers torch's decomposition of each overload of ``packets`` that has one (no ``out=``
    form: those do not differentiate) at the device's autograd key."""
    for packet in packets:
        for overload in packet.overloads():  # type: ignore[attr-defined]
            op = getattr(packet, overload)
            if op in decomposition_table and overload != "out":
                lib.impl(op, decomposition_table[op], KEY)


LOWERED_BELOW_AUTOGRAD = (aten.silu_backward.default, aten.mish_backward.default)


def _below_autograd(op: object) -> object:
    def run(*args: object, **kwargs: object) -> object:
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args, **kwargs)  # type: ignore[operator]

    return run


def register(lib: torch.library.Library) -> None:
    """Registers the resampling ops, and the backward ops lowered below autograd, in the device's
    aten library (`_device.register`)."""
    decompose_at_autograd_key(lib, RESAMPLING)
    for op in LOWERED_BELOW_AUTOGRAD:
        lib.impl(op, _below_autograd(op), KEY)
