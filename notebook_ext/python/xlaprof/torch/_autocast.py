"""Mixed precision on the device: ``torch.autocast("xlaprof", dtype=torch.bfloat16)``.

torch writes autocast's casting rules in C++ for its own devices and none for a PrivateUse1 one,
whose autocast key then has no kernel at all (``linear`` under autocast is an error). Here are
torch's rules for GPUs, registered at that key: ops that run in the lower precision (matrix
products, convolutions, attention) cast their floating-point tensors to the autocast dtype; ops
that need float32's range (exponentials, logarithms, norms, softmax, losses) cast them to float32;
ops that mix tensors (``addcmul``, ``index_put``, ...) cast them to the dtype they promote to;
every other op falls through to the device unchanged. float64 tensors are never cast, as in torch.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_map

from ._device import DEVICE_TYPE
from .lowerings import registry

_KEY = "AutocastPrivateUse1"
_BELOW = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

# torch's lists for CUDA (aten/src/ATen/autocast_mode.cpp), by aten name (all overloads): each op's
# `autocast=` in the lowerings' registry.
LOWER_PRECISION = registry.autocast_ops("lower_precision")
FLOAT32 = registry.autocast_ops("float32")
WIDEST = registry.autocast_ops("widest")


def register(lib: torch.library.Library) -> torch.library.Library:
    """Registers the rules in the device's aten library (`_device.register`); returns the
    library of the fallthrough for every other op, which the caller keeps alive."""
    every_op = torch.library.Library("_", "IMPL")
    every_op.fallback(torch.library.fallthrough_kernel, _KEY)
    for names, rule in ((LOWER_PRECISION, _lower), (FLOAT32, _float32), (WIDEST, _widest)):
        for name in names:
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                op = getattr(packet, overload)
                if any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments):
                    continue  # `out=` and in-place forms: torch casts the functional ones only
                lib.impl(op, _kernel(op, rule), _KEY)
    return every_op


def _eligible(t: Any) -> bool:
    return (isinstance(t, torch.Tensor) and t.device.type == DEVICE_TYPE and t.is_floating_point()
            and t.dtype != torch.float64)


def _cast_to(dtype: torch.dtype) -> Callable[[Any], Any]:
    return lambda t: t.to(dtype) if _eligible(t) and t.dtype != dtype else t


def _lower(args: Any) -> Callable[[Any], Any]:
    return _cast_to(torch.get_autocast_dtype(DEVICE_TYPE))


def _float32(args: Any) -> Callable[[Any], Any]:
    return _cast_to(torch.float32)


def _widest(args: Any) -> Callable[[Any], Any]:
    dtypes = [t.dtype for t in torch.utils._pytree.tree_leaves(args) if _eligible(t)]
    return _cast_to(functools.reduce(torch.promote_types, dtypes)) if dtypes else (lambda t: t)


def _kernel(op: Any, rule: Callable[[Any], Callable[[Any], Any]]) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        cast = rule((args, kwargs))
        args, kwargs = tree_map(cast, (args, kwargs))
        # Below autocast, the op runs as it would outside it.
        with torch._C._ExcludeDispatchKeyGuard(_BELOW):
            return op(*args, **kwargs)

    return kernel

