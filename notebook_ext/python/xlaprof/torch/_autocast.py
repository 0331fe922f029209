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

# torch's lists for CUDA (aten/src/ATen/autocast_mode.cpp), by aten name (all overloads): each op's
# `autocast=` in the lowerings' registry.
LOWER_PRECISION = registry.autocast_ops("lower_precision")
FLOAT32 = registry.autocast_ops("float32")
WIDEST = registry.autocast_ops("widest")


def register(lib: torch.library.Library, key: str = _KEY, device_type: str = DEVICE_TYPE) -> torch.library.Library:
    """Registers the rules in the device's aten library (`_device.register`); returns the
    library of the fallthrough for every other op, which the caller keeps alive. With ``key``
    and ``device_type``, the same rules for another device: the CPU's (``AutocastCPU``, whose
    own lists differ from CUDA's), so that a reference run on the CPU casts as the device does."""
    every_op = torch.library.Library("_", "IMPL")
    if key == _KEY:
        every_op.fallback(torch.library.fallthrough_kernel, key)
    below = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))
    # The key's own kernels (the CPU's lists), where these rules do not replace them, fall
    # through: the ops run as they would on the device.
    theirs = set(torch._C._dispatch_get_registrations_for_dispatch_key(key)) if key != _KEY else set()
    for names, rule in ((LOWER_PRECISION, _lower), (FLOAT32, _float32), (WIDEST, _widest)):
        for name in names:
            theirs.discard(f"aten::{name}")
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                op = getattr(packet, overload)
                theirs.discard(op._name if overload == "default" else f"{op._name}.{overload}")
                if any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments):
                    continue  # `out=` and in-place forms: torch casts the functional ones only
                lib.impl(op, _kernel(op, rule, device_type, below), key)
    for name in theirs:
        lib.impl(name.split("::", 1)[1], torch.library.fallthrough_kernel, key)
    return every_op


def _eligible(t: Any, device_type: str) -> bool:
    return (isinstance(t, torch.Tensor) and t.device.type == device_type and t.is_floating_point()
            and t.dtype != torch.float64)


def _cast_to(dtype: torch.dtype, device_type: str) -> Callable[[Any], Any]:
    return lambda t: t.to(dtype) if _eligible(t, device_type) and t.dtype != dtype else t


def _lower(args: Any, device_type: str) -> Callable[[Any], Any]:
    return _cast_to(torch.get_autocast_dtype(device_type), device_type)


def _float32(args: Any, device_type: str) -> Callable[[Any], Any]:
    return _cast_to(torch.float32, device_type)


def _widest(args: Any, device_type: str) -> Callable[[Any], Any]:
    dtypes = [t.dtype for t in torch.utils._pytree.tree_leaves(args) if _eligible(t, device_type)]
    return _cast_to(functools.reduce(torch.promote_types, dtypes), device_type) if dtypes else (lambda t: t)


def _kernel(op: Any, rule: Callable[[Any, str], Callable[[Any], Any]], device_type: str,
            below: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        cast = rule((args, kwargs), device_type)
        args, kwargs = tree_map(cast, (args, kwargs))
        # Below autocast, the op runs as it would outside it.
        with torch._C._ExcludeDispatchKeyGuard(below):
            return op(*args, **kwargs)

    return kernel
