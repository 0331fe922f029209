"""FSDPv2: fully sharded data parallel over SPMD. Each parameter is split along the mesh's
``fsdp`` axis on its largest dimension, and each wrapped module's output along its batch; XLA's
partitioner then gathers the parameters where they are used and reduces the gradients, all inside
the step's program.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Optional, Tuple

import torch
import torch.nn as nn

from .. import _alias, _target
from ..distributed import spmd
from ..distributed.fsdp.wrap import recursive_wrap

__getattr__ = _alias.not_provided(__name__)


def _fsdp_spec(t: torch.Tensor, extra_data_axis: Optional[str] = None, largest: bool = False) -> Tuple[Any, ...]:
    """``fsdp`` on one dimension (the first, or the largest), every other whole."""
    spec: list = [None] * t.dim()
    if not spec:
        return ()
    at = list(t.shape).index(max(t.shape)) if largest else 0
    spec[at] = (extra_data_axis, "fsdp") if extra_data_axis else "fsdp"
    return tuple(spec)


def _policy(policy: Callable[..., bool]) -> Callable[..., bool]:
    """A wrap policy as torch's wrapping calls it (``nonwrapped_numel=``), from one written for
    PyTorch/XLA's (``unwrapped_params=``)."""
    if "unwrapped_params" not in inspect.signature(policy).parameters:
        return policy
    return lambda module, recurse, nonwrapped_numel: policy(module=module, recurse=recurse,
                                                            unwrapped_params=nonwrapped_numel)


class SpmdFullyShardedDataParallel(nn.Module):
    """Wraps ``module``: its parameters split over the mesh's ``fsdp`` axis, its output split
    along the batch (``shard_output(output, mesh)`` to do otherwise); ``auto_wrap_policy`` wraps
    its submodules the same way first."""

    def __init__(self, module: nn.Module, *, mesh: Optional[spmd.Mesh] = None,
                 shard_output: Optional[Callable[[Any, spmd.Mesh], None]] = None,
                 auto_wrap_policy: Optional[Callable[..., bool]] = None,
                 auto_wrapper_callable: Optional[Callable[..., nn.Module]] = None,
                 extra_data_axis: Optional[str] = None) -> None:
        if isinstance(module, SpmdFullyShardedDataParallel):
            raise RuntimeError("FSDPv2: this module is wrapped already; wrap the inner modules first")
        if type(module).forward is nn.Module.forward:
            raise RuntimeError(f"FSDPv2: {type(module).__name__} has no forward of its own (a "
                               "ModuleList or ModuleDict): wrap the modules that run")
        mesh = mesh if mesh is not None else spmd.get_global_mesh()
        if mesh is None:
            raise ValueError("FSDPv2: no mesh given and none set (xs.set_global_mesh)")
        if mesh.axis_names is None or "fsdp" not in mesh.axis_names:
            raise ValueError(f"FSDPv2: the mesh needs an axis named 'fsdp' (its axes: {mesh.axis_names})")
        if extra_data_axis and extra_data_axis not in mesh.axis_names:
            raise ValueError(f"FSDPv2: the mesh has no axis {extra_data_axis!r} (its axes: {mesh.axis_names})")
        super().__init__()
        if auto_wrap_policy is not None:
            recursive_wrap(module, _policy(auto_wrap_policy), auto_wrapper_callable or SpmdFullyShardedDataParallel,
                           set(), set(), only_wrap_children=True, mesh=mesh, shard_output=shard_output)
        self._orig_module = module.to(_target.device())
        self._mesh = mesh
        for p in module.parameters():
            if not _target.current().is_split(p):  # split already: by the user, or an inner wrap
                spmd.mark_sharding(p, mesh, _fsdp_spec(p, largest=True))
        self._shard_output = shard_output or self._split_along_batch(extra_data_axis)

    @staticmethod
    def _split_along_batch(extra_data_axis: Optional[str]) -> Callable[[Any, spmd.Mesh], None]:
        def shard_output(output: Any, mesh: spmd.Mesh) -> None:
            first = output
            if isinstance(output, tuple):
                first = output[0]
                warnings.warn("FSDPv2: the output is a tuple; its first element is split, the rest "
                              "left as they are (give shard_output to do otherwise)")
            if not isinstance(first, torch.Tensor):
                raise RuntimeError(f"FSDPv2: an output of type {type(output).__name__} cannot be split "
                                   "along its batch: give shard_output")
            spmd.mark_sharding(first, mesh, _fsdp_spec(first, extra_data_axis))

        return shard_output

    @property
    def module(self) -> nn.Module:
        return self._orig_module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        output = self.module(*args, **kwargs)
        self._shard_output(output, self._mesh)
        return output

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.module, name)

    def __getitem__(self, key: int) -> nn.Module:
        return self.module.__getitem__(key)
