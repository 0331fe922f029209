"""``torch_xla.distributed.xla_backend``: importing it registers the ``xla`` process group
backend and the ``xla://`` init method, so that ``dist.init_process_group('xla',
init_method='xla://')`` works.

In one process (the world of one that ``torch_xla.launch`` gives on the CPU plugin) each
collective is what it computes over one replica. Between the processes of a job (torchrun) the
tensors go through the host: read, reduced by a gloo group over the same store, and written back
(the CPU plugin cannot run collectives across processes).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.distributed.rendezvous import register_rendezvous_handler, rendezvous
from torch.futures import Future

from .. import _alias

__getattr__ = _alias.not_provided(__name__)

BACKEND = "xla"


def _done(result: Any = None) -> Any:
    future: Future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _through_host(tensors: List[torch.Tensor], collective: Any) -> None:
    """``collective`` on host copies of ``tensors``, the results written back."""
    hosts = [t.detach().cpu().contiguous() for t in tensors]
    collective(hosts).wait()
    with torch.no_grad():
        for t, h in zip(tensors, hosts):
            t.copy_(h.to(t.device))


class ProcessGroupXla(dist.ProcessGroup):
    """The ``xla`` backend: collectives of lazy tensors (see the module's docstring)."""

    def __init__(self, rank: int, size: int, host: Optional[dist.ProcessGroup]) -> None:
        super().__init__(rank, size)
        self._host = host

    def getBackendName(self) -> str:
        return BACKEND

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        if self._host is not None:
            options = opts if opts is not None else dist.AllreduceOptions()
            _through_host(tensors, lambda hs: self._host.allreduce(hs, options))
        return _done(tensors)

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        if self._host is not None:
            _through_host(tensors, lambda hs: self._host.broadcast(hs, opts or dist.BroadcastOptions()))
        return _done(tensors)

    def allgather(self, outputs: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any = None) -> Any:
        if self._host is None:
            with torch.no_grad():
                for out, t in zip(outputs, inputs):
                    out[0].copy_(t)
            return _done(outputs)
        hosts_out = [[o.detach().cpu() for o in out] for out in outputs]
        self._host.allgather(hosts_out, [t.detach().cpu().contiguous() for t in inputs]).wait()
        with torch.no_grad():
            for out, host in zip(outputs, hosts_out):
                for o, h in zip(out, host):
                    o.copy_(h.to(o.device))
        return _done(outputs)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        return self.allgather([list(output.chunk(self.size()))], [input], opts)

    all_gather_single = _allgather_base  # (torch's newer name: `all_gather_object` calls it)

    def reduce_scatter(self, outputs: List[torch.Tensor], inputs: List[List[torch.Tensor]], opts: Any = None) -> Any:
        for out, parts in zip(outputs, inputs):
            whole = torch.stack(parts)
            self.allreduce([whole], None if opts is None else _allreduce_options(opts))
            with torch.no_grad():
                out.copy_(whole[self.rank()])
        return _done(outputs)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        return self.reduce_scatter([output], [list(input.chunk(self.size()))], opts)

    reduce_scatter_single = _reduce_scatter_base

    def barrier(self, opts: Any = None) -> Any:
        if self._host is not None:
            self._host.barrier().wait()
        return _done()


def _allreduce_options(opts: Any) -> Any:
    options = dist.AllreduceOptions()
    options.reduceOp = opts.reduceOp
    return options


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> ProcessGroupXla:
    host = dist.ProcessGroupGloo(store, rank, size, timeout) if size > 1 else None
    return ProcessGroupXla(rank, size, host)


def _xla_rendezvous(url: str, timeout: timedelta = timedelta(minutes=30), **kwargs: Any) -> Iterator[Tuple[Any, int, int]]:
    """``xla://``: the launcher's variables (torchrun's), or a world of one."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        yield from rendezvous("env://", timeout=timeout)
        return
    yield (dist.HashStore(), 0, 1)


if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "xlaprof"])
    register_rendezvous_handler("xla", _xla_rendezvous)
