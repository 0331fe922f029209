"""``DeviceLoader``: batches moved onto the device ahead of the loop, and a step marked at each
(PyTorch/XLA's ``MpDeviceLoader``).

A thread iterates the user's loader and moves each batch onto the device (tensors anywhere in
tuples, lists and dicts; anything else as it is) while the loop records and runs the step before.
Asking for the next batch ends the previous step (``xt.step()``), as ``MpDeviceLoader`` does, so
a loop over it needs no step call of its own. When the next batch is not ready, the loop waits:
the wait is reported to the profiler at the loop's line (``DataWait`` events; the finding "waiting
for data" names the loop, the steps and the time).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from typing import Any, Iterable, Iterator, Optional

import torch

from .. import _api, _native
from . import _check
from ._device import DEVICE_TYPE, device as _device
from ._tensor import to_engine, wrap

_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class DeviceLoader:
    """Iterates ``loader`` with each batch on the device, ``prefetch`` batches ahead.

    ``for x, y in xt.DeviceLoader(train_loader):`` -- each step ends when the next batch is
    asked for (``mark_step=False`` leaves step marking to the loop)."""

    def __init__(self, loader: Iterable[Any], device: Optional[torch.device] = None, prefetch: int = 2,
                 mark_step: bool = True) -> None:
        if prefetch < 1:
            raise ValueError(f"DeviceLoader: prefetch must be at least 1, not {prefetch}")
        self.loader = loader
        self.device = device if device is not None else _device()
        self.prefetch = prefetch
        self.mark_step = mark_step

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        ready: "queue.Queue[Any]" = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(item: Any) -> bool:
            """Queues ``item`` unless the loop has stopped asking (a ``break``): then the
            thread ends, and nothing it made stays held."""
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def fill() -> None:
            try:
                for batch in self.loader:
                    if not put(_to_device(batch, self.device)):
                        return
                put(_DONE)
            except BaseException as e:  # the loop re-raises it, at its own line
                put(_Failed(e))

        worker = threading.Thread(target=fill, name="xlaprof-device-loader", daemon=True)
        worker.start()
        first = True
        try:
            while True:
                if not first and self.mark_step:
                    _check.around_sync(_api.step)  # XLAPROF_CHECK's bounds in the step's graph
                first = False
                start = time.perf_counter()
                try:
                    item = ready.get_nowait()
                except queue.Empty:
                    item = ready.get()
                    # Reported at the loop's line: the frame that asked for the batch.
                    _native.data_wait(time.perf_counter() - start)
                if item is _DONE:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            stop.set()


def _to_device(batch: Any, dev: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        if batch.device.type == "cpu" and batch.layout == torch.strided and torch.device(dev).type == DEVICE_TYPE:
            # Straight to device data. `batch.to(dev)` makes an empty device tensor first (a
            # pending `zeros`) and copies into it: a step's sync on the training thread in
            # between would take that pending tensor into its graph (another graph, compiled).
            return wrap(to_engine(batch))
        return batch.to(dev)
    if isinstance(batch, Mapping):  # a dict, or transformers' BatchEncoding
        moved = {k: _to_device(v, dev) for k, v in batch.items()}
        try:
            return type(batch)(moved)
        except TypeError:
            return moved
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(_to_device(v, dev) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, dev) for v in batch)
    return batch
