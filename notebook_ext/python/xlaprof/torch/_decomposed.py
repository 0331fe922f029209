"""Ops that autograd differentiates through their decomposition on the device.

torch's autograd differentiates an op by its formula, and for resampling the formula is a
backward kernel of its own (``upsample_bilinear2d_backward``, ``grid_sampler_2d_backward``),
which torch writes for CUDA and the CPU only and decomposes nowhere: a vision model's backward
(a U-Net's or an FPN's upsampling, a spatial transformer's sampling) ran on the CPU fallback,
every gradient read to the host. At the device's autograd key these ops are instead torch's own
decompositions (``torch._decomp``: gathers and arithmetic, as the forward already ran here), so
autograd differentiates each op of it, and the backward is scatters the engine lowers. The
forward is what it was: the same decomposition.
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


def register(lib: torch.library.Library) -> None:
    """Registers the resampling ops in the device's aten library (`_device.register`)."""
    decompose_at_autograd_key(lib, RESAMPLING)
