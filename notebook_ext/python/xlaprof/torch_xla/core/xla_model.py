"""``torch_xla.core.xla_model`` (``xm``): the device, steps, step closures, ranks and collectives.

Collectives between the processes of a job (torchrun) go through ``torch.distributed`` on the
host (the CPU plugin cannot run them across processes): the tensors are read, reduced by the
process group's backend, and sent back. In one process (world size 1) each is what it computes
over one replica: a sum of one, a gather of one.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_map

from .. import _alias, _target, runtime

__getattr__ = _alias.not_provided(__name__)

REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX = (
    "sum", "mul", "and", "or", "min", "max")


# ---- devices ----------------------------------------------------------------------------------

def xla_device(n: Optional[int] = None, devkind: Optional[str] = None) -> torch.device:
    return _target.device(n)


def get_xla_supported_devices(devkind: Optional[str] = None, max_devices: Optional[int] = None) -> List[str]:
    return [str(_target.device())]


def xla_device_hw(device: Any) -> str:
    return runtime.device_type() or "CPU"


def xla_device_kind(device: Any = None) -> str:
    return xla_device_hw(device)


def xla_real_devices(devices: Optional[List[Any]] = None) -> List[str]:
    return [f"{xla_device_hw(None)}:0"]


def is_xla_tensor(tensor: torch.Tensor) -> bool:
    return _target.current().is_lazy(tensor)


def get_memory_info(device: Any = None) -> Dict[str, int]:
    """The device's memory in use and its limit, as its allocator counts them (GPUs; the CPU
    plugin keeps no such figures: an error that says so, as ``torch.accelerator``'s does)."""
    used, limit = torch.accelerator.memory_allocated(), torch.accelerator.get_memory_info()[1]
    return {"bytes_used": used, "bytes_limit": limit}


# ---- ranks ------------------------------------------------------------------------------------

def get_ordinal(defval: int = 0) -> int:
    return runtime.global_ordinal()


def get_local_ordinal(defval: int = 0) -> int:
    return runtime.local_ordinal()


def xrt_world_size(defval: int = 1) -> int:
    return runtime.world_size()


def is_master_ordinal(local: bool = True) -> bool:
    return (runtime.local_ordinal() if local else runtime.global_ordinal()) == 0


def master_print(*args: Any, fd: Any = sys.stdout, local: bool = False, flush: bool = False) -> None:
    """Prints on the master process (of the job, or with ``local`` of this host) only."""
    if is_master_ordinal(local=local):
        print(*args, file=fd, flush=flush)


# ---- steps ------------------------------------------------------------------------------------

def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """Runs what is pending and ends the step (``torch_xla.sync()``), then the step closures."""
    _target.sync(wait)


def wait_device_ops(devices: List[str] = []) -> None:
    """Waits until the device has run everything launched so far."""
    _target.current().wait()


def add_step_closure(closure: Callable[..., Any], args: Tuple[Any, ...] = (), run_async: bool = False) -> None:
    """Runs ``closure(*args)`` after the step's sync, when the tensors it reads are computed: no
    sync of its own. (``run_async`` closures run in order with the others, on this thread.)"""
    _target.add_closure(closure, tuple(args))


def optimizer_step(optimizer: torch.optim.Optimizer, barrier: bool = False,
                   optimizer_args: Dict[str, Any] = {}, groups: Optional[List[List[int]]] = None,
                   pin_layout: bool = True) -> Any:
    """Averages the gradients over the replicas, runs ``optimizer.step``, and with ``barrier``
    ends the step (what a device loader does at its next batch otherwise)."""
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    result = optimizer.step(**optimizer_args)
    if barrier:
        mark_step()
    return result


def set_rng_state(seed: int, device: Any = None) -> None:
    _target.manual_seed(seed)


def unlazy(tensors: List[torch.Tensor]) -> None:
    """Computes ``tensors`` now (and with them whatever is pending), and waits for them."""
    if tensors:
        _target.current().sync()
        _target.current().wait()


# ---- collectives ------------------------------------------------------------------------------

def _across_processes(groups: Any, what: str) -> bool:
    """Whether the collective crosses processes (through torch.distributed), or is one
    replica's."""
    if groups:
        raise NotImplementedError("torch_xla's collectives over replica groups are not provided by "
                                  f"xlaprof's torch_xla layer ({_alias.DOCS})")
    if runtime.world_size() == 1:
        return False
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(f"xm.{what} across the {runtime.world_size()} processes of this job goes through "
                           "torch.distributed here: call dist.init_process_group(\"xla\", init_method=\"xla://\") "
                           "(with `import torch_xla.distributed.xla_backend`) first")
    return True


_HOST_OPS = {
    REDUCE_SUM: dist.ReduceOp.SUM, REDUCE_MUL: dist.ReduceOp.PRODUCT, REDUCE_MIN: dist.ReduceOp.MIN,
    REDUCE_MAX: dist.ReduceOp.MAX, REDUCE_AND: dist.ReduceOp.BAND, REDUCE_OR: dist.ReduceOp.BOR,
}


def _on_host(t: torch.Tensor, reduce: Callable[[torch.Tensor], Any]) -> torch.Tensor:
    """Runs a collective of torch.distributed on a copy of ``t`` on the host; the result goes
    back to ``t``'s device."""
    host = t.detach().cpu().contiguous()
    reduce(host)
    return host.to(t.device)


def _into(output: Optional[torch.Tensor], result: torch.Tensor) -> torch.Tensor:
    """``result``, written into ``output`` where the caller gave one."""
    if output is None:
        return result
    with torch.no_grad():
        output.copy_(result)
    return output


def all_reduce(reduce_type: str, inputs: Any, scale: float = 1.0, groups: Any = None,
               pin_layout: bool = True) -> Any:
    """Reduces ``inputs`` (a tensor, returned reduced; or a list, reduced in place) over the
    replicas, times ``scale``."""
    if reduce_type not in _HOST_OPS:
        raise ValueError(f"all_reduce: reduce_type must be one of {sorted(_HOST_OPS)}, not {reduce_type!r}")
    if not _across_processes(groups, "all_reduce"):
        # One replica: nothing to reduce, and (as in PyTorch/XLA) no scale applied.
        return inputs.clone() if isinstance(inputs, torch.Tensor) else inputs

    def reduced(t: torch.Tensor) -> torch.Tensor:
        t = _on_host(t, lambda h: dist.all_reduce(h, op=_HOST_OPS[reduce_type]))
        return t * scale if scale != 1.0 else t

    if isinstance(inputs, torch.Tensor):
        return reduced(inputs)
    for t in inputs:
        with torch.no_grad():
            t.copy_(reduced(t))
    return inputs


def all_gather(value: torch.Tensor, dim: int = 0, groups: Any = None, output: Any = None,
               pin_layout: bool = True) -> torch.Tensor:
    """``value`` of every replica, concatenated along ``dim``."""
    if _across_processes(groups, "all_gather"):
        parts = [torch.empty_like(value.detach().cpu()) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, value.detach().cpu().contiguous())
        result = torch.cat(parts, dim).to(value.device)
    else:
        result = value
    return _into(output, result)


def reduce_scatter(reduce_type: str, input: torch.Tensor, scale: float, scatter_dim: int,
                   shard_count: int, groups: Any = None, output: Any = None,
                   pin_layout: bool = True) -> torch.Tensor:
    """``input`` reduced over the replicas, times ``scale``, and this replica's shard of it along
    ``scatter_dim``."""
    if shard_count != runtime.world_size():
        raise ValueError(f"reduce_scatter: shard_count {shard_count} is not the world size "
                         f"{runtime.world_size()}")
    reduced = all_reduce(reduce_type, input, scale, groups)
    result = reduced.chunk(shard_count, scatter_dim)[runtime.global_ordinal()]
    return _into(output, result)


def reduce_gradients(optimizer: torch.optim.Optimizer, groups: Any = None, pin_layout: bool = True) -> None:
    """The gradients averaged over the replicas (nothing to do in one process)."""
    if not _across_processes(groups, "reduce_gradients"):
        return
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    all_reduce(REDUCE_SUM, grads, scale=1.0 / dist.get_world_size())


def broadcast_master_param(model: torch.nn.Module) -> None:
    """Every replica's parameters and buffers set to the master's (nothing to do in one process)."""
    if not _across_processes(None, "broadcast_master_param"):
        return
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            t.copy_(_on_host(t, lambda h: dist.broadcast(h, src=0)))


def mesh_reduce(tag: str, data: Any, reduce_fn: Callable[[List[Any]], Any]) -> Any:
    """``reduce_fn`` of every replica's ``data`` (any picklable value; its tensors on the CPU)."""
    data = tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, data)
    if not _across_processes(None, "mesh_reduce"):
        return reduce_fn([data])
    gathered: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, data)
    return reduce_fn(gathered)


def rendezvous(tag: str, payload: bytes = b"", replicas: List[int] = []) -> List[bytes]:
    """Waits for every replica; returns each one's ``payload``."""
    if not _across_processes(None, "rendezvous"):
        return [payload]
    gathered: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, payload)
    return gathered


# ---- saving -----------------------------------------------------------------------------------

def save(data: Any, file_or_path: Any, master_only: bool = True, global_master: bool = False) -> None:
    """``torch.save`` of ``data`` with its tensors moved to the CPU, by the master only unless
    ``master_only`` is False."""
    if master_only and not is_master_ordinal(local=not global_master):
        return
    torch.save(tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, data), file_or_path)


class RateTracker:
    """Items per second: ``rate()`` since the last call, smoothed; ``global_rate()`` since the
    tracker was made."""

    def __init__(self, smooth_factor: Optional[float] = None) -> None:
        self.smooth_factor = 0.4 if smooth_factor is None else smooth_factor
        self.start = self.last = time.time()
        self.total = 0.0
        self.since_last = 0.0
        self.last_rate: Optional[float] = None

    def add(self, count: float) -> None:
        self.total += count
        self.since_last += count

    def rate(self) -> float:
        now = time.time()
        elapsed = now - self.last
        if elapsed <= 0:
            return self.last_rate or 0.0
        current = self.since_last / elapsed
        if self.last_rate is not None:
            current = (1 - self.smooth_factor) * current + self.smooth_factor * self.last_rate
        self.last, self.since_last, self.last_rate = now, 0.0, current
        return current

    def global_rate(self) -> float:
        elapsed = time.time() - self.start
        return self.total / elapsed if elapsed > 0 else 0.0
