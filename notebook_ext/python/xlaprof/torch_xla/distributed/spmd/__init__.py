"""``torch_xla.distributed.spmd`` (``xs``): meshes and sharding annotations, on the engine's SPMD.

XLA's own partitioner splits each step over the mesh's devices as the annotations say (Shardy,
through PJRT); the profiler shows the collectives it inserted. A ``Mesh`` here is PyTorch/XLA's
(device ids, shape, axis names); the engine's is made from it on first use, so that the reference
run (CPU eager) never starts the engine and only checks each annotation.
"""

from __future__ import annotations

import collections
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

import xlaprof as xp

from ... import _alias, _target, runtime

__getattr__ = _alias.not_provided(__name__)

PartitionSpec = Tuple[Union[None, int, str, Tuple[Union[int, str], ...]], ...]


class Mesh:
    """Devices laid out along named axes: ``Mesh(device_ids, mesh_shape, axis_names)``."""

    def __init__(self, device_ids: Union[np.ndarray, Sequence[int]], mesh_shape: Tuple[int, ...],
                 axis_names: Optional[Tuple[str, ...]] = None) -> None:
        ids = [int(i) for i in np.asarray(device_ids).reshape(-1)]
        shape = tuple(int(d) for d in mesh_shape)
        if int(np.prod(shape)) != len(ids):
            raise ValueError(f"Mesh: {len(ids)} device ids do not fill a mesh of shape {shape}")
        if axis_names is not None and len(axis_names) != len(shape):
            raise ValueError(f"Mesh: {len(axis_names)} axis names {tuple(axis_names)} for a mesh of "
                             f"{len(shape)} dimensions {shape}")
        if sorted(ids) != list(range(len(ids))):
            raise ValueError(f"Mesh: the device ids must be 0..{len(ids) - 1} each once, not {ids}")
        self.device_ids = np.asarray(ids)
        self.mesh_shape = shape
        self.axis_names = tuple(axis_names) if axis_names is not None else None
        self._engine: Optional[xp.Mesh] = None

    def size(self) -> int:
        return len(self.device_ids)

    def shape(self) -> "collections.OrderedDict[Any, int]":
        """Each axis's size, by its name (by its number in a mesh with no names)."""
        names = self.axis_names or tuple(range(len(self.mesh_shape)))
        return collections.OrderedDict(zip(names, self.mesh_shape))

    def get_logical_mesh(self) -> np.ndarray:
        return self.device_ids.reshape(self.mesh_shape)

    def get_axis_name_idx(self, name: str) -> Optional[int]:
        return None if self.axis_names is None or name not in self.axis_names else self.axis_names.index(name)

    def _names(self) -> Tuple[str, ...]:
        return self.axis_names or tuple(f"axis{i}" for i in range(len(self.mesh_shape)))

    def engine_mesh(self) -> xp.Mesh:
        """The engine's mesh (made once: the engine then starts with the devices it needs)."""
        if self._engine is None:
            self._engine = xp.Mesh(list(self.device_ids), self.mesh_shape, self._names())
        return self._engine

    def spec(self, t: torch.Tensor, partition_spec: PartitionSpec) -> Tuple[Any, ...]:
        """``partition_spec`` in axis names (PyTorch/XLA also takes axis numbers), checked
        against ``t``."""
        if len(partition_spec) != t.dim():
            raise ValueError(f"mark_sharding: a partition spec of {len(partition_spec)} entries "
                             f"{tuple(partition_spec)} for a tensor of {t.dim()} dimensions {tuple(t.shape)}")
        names = self._names()

        def name(axis: Union[int, str]) -> str:
            if isinstance(axis, str):
                if axis not in names:
                    raise ValueError(f"mark_sharding: the mesh has no axis {axis!r} (its axes: {names})")
                return axis
            if not 0 <= int(axis) < len(names):
                raise ValueError(f"mark_sharding: the mesh has no axis {axis} (it has {len(names)})")
            return names[int(axis)]

        return tuple(None if e is None else tuple(name(a) for a in e) if isinstance(e, tuple) else name(e)
                     for e in partition_spec)

    def __repr__(self) -> str:
        return f"Mesh(device_ids={list(self.device_ids)}, mesh_shape={self.mesh_shape}, axis_names={self.axis_names})"


def get_1d_mesh(axis_name: Optional[str] = None) -> Mesh:
    n = runtime.global_runtime_device_count()
    return Mesh(np.arange(n), (n,), (axis_name,) if axis_name is not None else None)


_global_mesh: Optional[Mesh] = None


def set_global_mesh(mesh: Mesh) -> None:
    global _global_mesh
    _global_mesh = mesh


def get_global_mesh() -> Optional[Mesh]:
    return _global_mesh


def mark_sharding(t: torch.Tensor, mesh: Optional[Mesh], partition_spec: PartitionSpec) -> torch.Tensor:
    """Splits ``t`` over ``mesh`` as ``partition_spec`` says (one entry per dimension: None,
    an axis name or number, or a tuple of them); returns ``t``."""
    mesh = mesh if mesh is not None else _global_mesh
    if mesh is None:
        raise ValueError("mark_sharding: no mesh given and none set (xs.set_global_mesh)")
    return _target.current().mark_sharding(t, mesh, mesh.spec(t, partition_spec))


def clear_sharding(t: torch.Tensor) -> torch.Tensor:
    """``t`` whole on every device of its mesh again."""
    mesh = _global_mesh
    if mesh is None:
        raise ValueError("clear_sharding: xlaprof's torch_xla layer clears a sharding over the "
                         "global mesh: set one with xs.set_global_mesh")
    return mark_sharding(t, mesh, (None,) * t.dim())


class ShardingSpec:
    """A mesh and a partition spec, applied to tensors as they arrive (``MpDeviceLoader``'s
    ``input_sharding``)."""

    def __init__(self, mesh: Mesh, partition_spec: PartitionSpec, minibatch: Optional[bool] = False) -> None:
        if minibatch:
            raise NotImplementedError("ShardingSpec(minibatch=True) (a batch split across processes) is "
                                      f"not provided by xlaprof's torch_xla layer ({_alias.DOCS})")
        self.mesh = mesh
        self.partition_spec = tuple(partition_spec)

    def can_apply(self, t: torch.Tensor) -> bool:
        return t.dim() == len(self.partition_spec)

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return mark_sharding(t, self.mesh, self.partition_spec)


def shard_batch(batch: Any, sharding: Union[ShardingSpec, Dict[Any, ShardingSpec]]) -> Any:
    """Each tensor of ``batch`` split as ``sharding`` says (one spec for all, or one per key);
    as in PyTorch/XLA, a tensor of another rank than the spec's stays whole (a batch's labels
    beside its images)."""
    if isinstance(sharding, dict):
        return {k: shard_batch(v, sharding[k]) if k in sharding else v for k, v in batch.items()}
    if isinstance(batch, torch.Tensor):
        return sharding.apply(batch) if sharding.can_apply(batch) else batch
    if isinstance(batch, dict):
        return {k: shard_batch(v, sharding) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(shard_batch(v, sharding) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(shard_batch(v, sharding) for v in batch)
    return batch
