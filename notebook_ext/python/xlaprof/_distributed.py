"""A job's processes, seen by the profiler: torch.distributed's collectives, and the waits for
data that hold a rank back.

Each collective this process enters with the job's other processes (``all_reduce``,
``broadcast``, ``all_gather``, ``reduce_scatter``, ``barrier``, ...; DDP's gradient buckets
included) is reported on entry and on leaving, with its process group, its number in that group,
its bytes and the user's line. Matched by group and number, the ranks' profiles line up, and
``xlaprof report job.xlaprof`` names the straggler, the rank that diverged and a collective some
rank never joined (``profiler/src/analysis/job.rs``). In a job (torchrun's ``WORLD_SIZE`` over
1), a torch DataLoader's batches are timed on the program's thread too.

Installed while a profile records (``XLAPROF_PROFILE``, ``xp.profile()``). Nothing here changes
what a collective computes: the functions of ``torch.distributed`` are wrapped, and a DDP model
without a communication hook of its own gets one doing what DDP's built-in one does (average the
bucket with ``all_reduce``).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from . import _native

# The collectives of torch.distributed, by name, with the argument whose tensors are what the
# process contributes (their bytes are the collective's).
_COLLECTIVES: Dict[str, str] = {
    "all_reduce": "tensor",
    "broadcast": "tensor",
    "reduce": "tensor",
    "all_gather": "tensor",
    "all_gather_into_tensor": "input_tensor",
    "all_gather_single": "input_tensor",  # FSDP2's (torch 2.10 on)
    "all_gather_coalesced": "input_tensor_list",
    "all_reduce_coalesced": "tensors",
    "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input",
    "reduce_scatter_single": "input",  # FSDP2's
    "gather_single": "tensor",
    "all_to_all": "input_tensor_list",
    "all_to_all_single": "input",
    "gather": "tensor",
    "scatter": "scatter_list",
    "barrier": "",
    "monitored_barrier": "",
    "all_gather_object": "",
    "broadcast_object_list": "",
    "gather_object": "",
    "scatter_object_list": "",
}

_installed = False
_lock = threading.Lock()
# The numbers of each process group's collectives, by the group's name.
_next: Dict[str, Iterator[int]] = {}
# Whether each process group (by name) is the lazy device's, whose collectives go through the host.
_through_host: Dict[str, bool] = {}
# Inside a collective already reported (`all_gather_object` calls `all_gather`): the inner ones
# are its own work, not the program's.
_inside = threading.local()


def install() -> None:
    """Wraps torch.distributed's collectives and DDP (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    import torch.distributed as dist

    if not dist.is_available():
        return
    from torch.distributed import distributed_c10d as c10d

    for name, argument in _COLLECTIVES.items():
        original = getattr(c10d, name, None)
        if original is None or getattr(original, "_xlaprof", False):
            continue
        wrapped = _wrap(name, argument, original)
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is original:
            setattr(dist, name, wrapped)
    _watch_init(dist)
    _watch_ddp()
    _watch_data_loader()


def _watch_init(dist: Any) -> None:
    """A process that joins a job's process group learns its rank there (``torch.multiprocessing
    .spawn``'s processes, with no ``RANK`` in their environment): its profile takes the rank's
    name beside the one asked for (``job.rank1.xlaprof``), where the job's readers look."""
    from torch.distributed import distributed_c10d as c10d

    original = c10d.init_process_group
    if getattr(original, "_xlaprof", False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        world = dist.get_world_size()
        if world > 1:
            _native.join_job(dist.get_rank(), world)
            _watch_data_loader()
        return result

    init_process_group._xlaprof = True  # type: ignore[attr-defined]
    c10d.init_process_group = init_process_group
    if dist.init_process_group is original:
        dist.init_process_group = init_process_group


def _in_a_job() -> bool:
    """Whether this process is one of a job's (torchrun's ``WORLD_SIZE`` over 1; a spawned one
    knows when it joins the group)."""
    import os

    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _group_name(group: Any) -> str:
    if group is None:
        return "world"
    import torch.distributed as dist

    if group is dist.group.WORLD:
        return "world"
    name = getattr(group, "group_name", None)
    return str(name) if name else f"group{id(group)}"


def _enter(op: str, group: Any, contributed: Any) -> Tuple[str, int]:
    """Reports entering collective `op` of process group `group` (None: the world) with the
    tensors `contributed`; returns the group's name and the collective's number in it."""
    name = _group_name(group)
    seq = _next_seq(name)
    _native.collective_enter(name, seq, _named(op, group, name), _bytes(contributed))
    return name, seq


def _named(op: str, group: Any, name: str) -> str:
    """`op` as the profile names it: a collective of the lazy device's ``xla`` group runs through
    the host (its tensors read to the host, reduced over gloo, written back: docs/jobs.md)."""
    through = _through_host.get(name)
    if through is None:
        import torch.distributed as dist

        try:
            through = dist.get_backend(group) == "xla"
        except Exception:  # a group this process is not in
            through = False
        _through_host[name] = through
    return f"{op}, through the host" if through else op


def _next_seq(group: str) -> int:
    """The next number of `group`'s collectives (from 1); `next` of a count is atomic."""
    counter = _next.get(group)
    if counter is None:
        with _lock:
            counter = _next.setdefault(group, itertools.count(1))
    return next(counter)


def _bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_bytes(v) for v in value)
    return 0


def _leave_when_done(work: Any, group: str, seq: int) -> None:
    """Reports leaving when an asynchronous collective's result is ready."""
    try:
        future = work.get_future()
    except Exception:  # a backend whose work has no future: left when it was started
        _native.collective_leave(group, seq)
        return
    future.add_done_callback(lambda _f: _native.collective_leave(group, seq))


def _wrap(name: str, argument: str, original: Callable) -> Callable:
    # Where the group and the contributed tensors are among the arguments (found once: the
    # wrapper's own cost is a few dictionary and tuple reads).
    try:
        params = list(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        params = []
    group_at = params.index("group") if "group" in params else None
    tensors_at = params.index(argument) if argument in params else None
    async_at = params.index("async_op") if "async_op" in params else None

    def given(at: Optional[int], key: str, args: tuple, kwargs: dict) -> Any:
        if key in kwargs:
            return kwargs[key]
        return args[at] if at is not None and at < len(args) else None

    @functools.wraps(original)
    def collective(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "depth", 0) or not _native.profiling():
            return original(*args, **kwargs)
        contributed = given(tensors_at, argument, args, kwargs) if argument else None
        group, seq = _enter(name, given(group_at, "group", args, kwargs), contributed)
        _inside.depth = 1
        try:
            result = original(*args, **kwargs)
        except BaseException:
            _native.collective_leave(group, seq)
            raise
        finally:
            _inside.depth = 0
        if given(async_at, "async_op", args, kwargs) and result is not None:
            _leave_when_done(result, group, seq)
        else:
            _native.collective_leave(group, seq)
        return result

    collective._xlaprof = True  # type: ignore[attr-defined]
    return collective


def _watch_ddp() -> None:
    """A DDP model's gradient buckets reported as collectives. A DDP model made while a profile
    records gets a communication hook of xlaprof's, which times the hook doing the work: the one
    the user registers later (``register_comm_hook``; a built-in one by its Python twin), else one
    doing what DDP's built-in one does. Registered when the model is made, not in its forward,
    so torch.compile traces DDP's forward untouched."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    if getattr(DDP, "_xlaprof", False):
        return
    DDP._xlaprof = True
    init = DDP.__init__
    register = DDP.register_comm_hook
    builtin = DDP._register_builtin_comm_hook

    def ddp_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if not _native.profiling():
            return init(self, *args, **kwargs)
        # Making the model is a collective of its own: the ranks check their parameters' shapes
        # against each other's and take rank 0's values (torch's C++ calls the process group
        # directly, so no function of torch.distributed sees it). Lazily its reads of the
        # parameters are then the collective's, at the line that wrapped the model.
        module = args[0] if args else kwargs.get("module")
        parameters = list(module.parameters()) if module is not None else []
        group, seq = _enter("DDP's set-up (parameters broadcast from rank 0)", kwargs.get("process_group"),
                            parameters)
        _inside.depth = 1
        try:
            init(self, *args, **kwargs)
        finally:
            _inside.depth = 0
            _native.collective_leave(group, seq)
        self._xlaprof_hook = (self.process_group, _average)
        register(self, None, _timed_hook(self))

    def register_comm_hook(self: Any, state: Any, hook: Callable) -> None:
        if getattr(self, "_xlaprof_hook", None) is None:
            return register(self, state, hook)
        self._xlaprof_hook = (state, hook)

    def register_builtin(self: Any, comm_hook_type: Any) -> None:
        if getattr(self, "_xlaprof_hook", None) is None:
            return builtin(self, comm_hook_type)
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        twins = {"ALLREDUCE": _average, "FP16_COMPRESS": default_hooks.fp16_compress_hook}
        self._xlaprof_hook = (self.process_group, twins[comm_hook_type.name])

    DDP.__init__ = functools.wraps(init)(ddp_init)
    DDP.register_comm_hook = functools.wraps(register)(register_comm_hook)
    DDP._register_builtin_comm_hook = functools.wraps(builtin)(register_builtin)


def _watch_data_loader() -> None:
    """Each batch a program's loop waits for from a torch DataLoader, reported as a wait for data
    at the loop's line, whatever runs the step (the engine, inductor, eager): in a job, a rank
    held back by its input pipeline is named for it. Only
    the program's own thread (xlaprof's DeviceLoader reads its loader on a thread of its own,
    and reports the loop's waits itself)."""
    import time

    from torch.utils.data import dataloader

    iterator = dataloader._BaseDataLoaderIter
    if getattr(iterator, "_xlaprof", False):
        return
    iterator._xlaprof = True
    following = iterator.__next__
    main = threading.main_thread()

    def __next__(self: Any) -> Any:
        if threading.current_thread() is not main or not _native.profiling():
            return following(self)
        start = time.perf_counter()
        try:
            return following(self)
        finally:
            waited = time.perf_counter() - start
            if waited >= _NOTICEABLE_WAIT_S:
                _native.data_wait(waited)

    iterator.__next__ = functools.wraps(following)(__next__)


# A batch read faster than this is no wait worth a record: a DataLoader without workers takes a
# few hundred microseconds to collate a batch of small samples, and an eager program has no step
# time to weigh that against.
_NOTICEABLE_WAIT_S = 1e-3


def _average(process_group, bucket):  # type: ignore[no-untyped-def]
    """What DDP's built-in hook does: the bucket averaged over the group's processes."""
    import torch.distributed as dist

    tensor = bucket.buffer()
    tensor.div_(dist.get_world_size(process_group))
    work = dist.distributed_c10d.all_reduce(tensor, group=process_group, async_op=True)
    return work.get_future().then(lambda f: f.value()[0])


def _timed_hook(model: Any) -> Callable:
    """The hook xlaprof registers on `model`: the model's chosen hook, timed from the bucket's
    arrival to its result's."""

    # No annotations: DDP checks a hook's (and this module's would be strings).
    def timed(_state, bucket):  # type: ignore[no-untyped-def]
        state, hook = model._xlaprof_hook
        if not _native.profiling():
            return hook(state, bucket)
        group, seq = _enter("all_reduce of a DDP gradient bucket", getattr(model, "process_group", None),
                            bucket.buffer())
        _inside.depth = 1
        try:
            future = hook(state, bucket)
        finally:
            _inside.depth = 0
        future.add_done_callback(lambda _f: _native.collective_leave(group, seq))
        return future

    return timed
