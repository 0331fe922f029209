"""``torch_xla.distributed.parallel_loader`` (``pl``): batches moved onto the device ahead of the
loop by a thread (``xlaprof.torch.DeviceLoader``), and a step ended each time the next batch is
asked for, as PyTorch/XLA's loaders end it; with ``input_sharding``, each batch split over the
mesh as it arrives. A wait for a batch that is not ready is the profiler's "waiting for data" at
the loop's line.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Union

import torch

from .. import _alias, _target
from .spmd import ShardingSpec, shard_batch

__getattr__ = _alias.not_provided(__name__)


class PerDeviceLoader:
    """The batches of one device: an iterator (``next(loader)``) and an iterable."""

    def __init__(self, loader: Iterable[Any], device: Any, prefetch: int,
                 input_sharding: Optional[Union[ShardingSpec, Dict[Any, ShardingSpec]]]) -> None:
        self._loader = loader
        self._batches = self._iterate(loader, device, prefetch, input_sharding)

    def __iter__(self) -> "PerDeviceLoader":
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def next(self) -> Any:
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)  # type: ignore[arg-type]

    @staticmethod
    def _iterate(loader: Iterable[Any], device: Any, prefetch: int, sharding: Any) -> Iterator[Any]:
        target = _target.current()
        # What is pending before the first loop (the model made on the device) runs apart, so
        # that the first step's graph is the step's alone. A later loop (an evaluation after an
        # epoch) lets what was recorded since the last step join its first step: a sync there
        # would split that step in two.
        if _target.steps_ended() == 0:
            target.sync()
        batches = iter(target.loader(loader, device, prefetch))
        given = None
        while True:
            # The step the loop just ran ends when it asks for the next batch.
            if given is not None:
                _target.loader_step(given)
            try:
                batch = next(batches)
            except StopIteration:
                return
            given = _target.steps_ended()
            yield batch if sharding is None else shard_batch(batch, sharding)


class ParallelLoader:
    """Loads ``cpu_loader``'s batches onto ``devices`` (one here: SPMD's several are one)."""

    def __init__(self, cpu_loader: Iterable[Any], devices: List[Any], batchdim: int = 0,
                 batches_per_execution: int = 1, loader_prefetch_size: int = 16,
                 device_prefetch_size: int = 8, host_to_device_transfer_threads: int = 1,
                 input_sharding: Any = None) -> None:
        if len(devices) != 1:
            raise ValueError(f"ParallelLoader: one device per process here, not {len(devices)}")
        if batches_per_execution != 1:
            raise NotImplementedError("ParallelLoader(batches_per_execution>1) is not provided by "
                                      f"xlaprof's torch_xla layer ({_alias.DOCS})")
        self._loader = cpu_loader
        self._device = torch.device(devices[0])
        self._prefetch = max(1, device_prefetch_size)
        self._sharding = input_sharding

    def per_device_loader(self, device: Any) -> PerDeviceLoader:
        return PerDeviceLoader(self._loader, self._device, self._prefetch, self._sharding)

    def per_device_samples(self) -> int:
        return len(self._loader)  # type: ignore[arg-type]


class MpDeviceLoader:
    """``for x, y in MpDeviceLoader(loader, device):`` each batch on the device, a step ended at
    each next batch. Keyword arguments are ``ParallelLoader``'s (``input_sharding``, ...)."""

    def __init__(self, loader: Iterable[Any], device: Any, **kwargs: Any) -> None:
        self._loader = loader
        self._device = device
        self._kwargs = kwargs

    def __iter__(self) -> PerDeviceLoader:
        return ParallelLoader(self._loader, [self._device], **self._kwargs).per_device_loader(self._device)

    def __len__(self) -> int:
        return len(self._loader)  # type: ignore[arg-type]
