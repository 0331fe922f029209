"""``torch_xla.runtime``: the processes and devices of the job, and the SPMD switch.

One process per job unless a launcher (torchrun) started several: ranks come from
``torch.distributed`` once it is initialized, else from the launcher's variables. The devices are
the engine's: on the CPU plugin as many as ``CPU_NUM_DEVICES`` (``XLAPROF_CPU_DEVICES``) asks, the
plugin's own count elsewhere.
"""

from __future__ import annotations

import os
from typing import Optional

import torch

import xlaprof as xp
from xlaprof import _native

from . import _alias, _target

__getattr__ = _alias.not_provided(__name__)

_spmd = [False]


def world_size() -> int:
    """The processes of the job (1 under SPMD, which runs every device from one process)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def global_ordinal() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def local_ordinal() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def process_index() -> int:
    return global_ordinal()


def process_count() -> int:
    return world_size()


def local_process_count() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def host_index() -> int:
    return int(os.environ.get("GROUP_RANK", "0"))


def device_type() -> Optional[str]:
    """The plugin's kind in PyTorch/XLA's words: CPU or CUDA (or CPU for the reference run)."""
    if _target.current().reference:
        return "CPU"
    plugin = os.path.basename(os.environ.get("XLAPROF_PJRT_PLUGIN", "")).lower()
    if "cpu" in plugin or not plugin:
        return "CPU"
    if "gpu" in plugin or "cuda" in plugin:
        return "CUDA"
    if "tpu" in plugin:
        return "TPU"
    return plugin.split(".")[0].upper()


def using_pjrt() -> bool:
    return True


def use_spmd(auto: Optional[bool] = False) -> None:
    """Every device of the process runs one program, split as ``xs.mark_sharding`` says."""
    if auto:
        raise NotImplementedError("torch_xla.runtime.use_spmd(auto=True) (XLA's automatic sharding) "
                                  f"is not provided by xlaprof's torch_xla layer ({_alias.DOCS})")
    _spmd[0] = True


def is_spmd() -> bool:
    return _spmd[0]


def addressable_runtime_device_count() -> int:
    """The engine's devices: on the CPU plugin, before the engine starts, as many as
    ``CPU_NUM_DEVICES`` asks (default 1), read without starting it, so that a mesh made next
    still gets them all."""
    started = _native.started_device_count()
    if started is not None:
        return started
    if device_type() == "CPU":
        _alias.map_environment()  # the program may have set CPU_NUM_DEVICES since it started
        return int(os.environ.get("XLAPROF_CPU_DEVICES") or 1)
    return len(xp.devices())


def global_runtime_device_count() -> int:
    """The devices of every process of the job (under SPMD, one process's)."""
    return addressable_runtime_device_count() * (1 if is_spmd() else world_size())


def addressable_device_count() -> int:
    """The devices this process's program sees: one (under SPMD, the one over the mesh)."""
    return 1


def global_device_count() -> int:
    return addressable_device_count() * (1 if is_spmd() else world_size())


def local_device_count() -> int:
    return local_process_count() * addressable_device_count()


def initialize_cache(path: str, readonly: bool = False) -> None:
    """The persistent compile cache in ``path`` (``XLAPROF_CACHE_DIR``): before the first compile."""
    if readonly:
        raise NotImplementedError("torch_xla.runtime.initialize_cache(readonly=True) is not provided "
                                  f"by xlaprof's torch_xla layer ({_alias.DOCS})")
    if _native.started_device_count() is not None:
        raise RuntimeError("torch_xla.runtime.initialize_cache must come before the first tensor on the "
                           "device: the engine has started, and reads where its cache is when it starts")
    os.environ["XLAPROF_CACHE_DIR"] = path
