"""``torch_xla.test.test_utils``: the progress lines and TensorBoard summaries of PyTorch/XLA's
training scripts. A summary writer needs TensorBoard (``pip install tensorboard``); without it,
or without a log directory, there is none and the writes do nothing, as in PyTorch/XLA."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, Optional

from .. import _alias
from ..debug import metrics

__getattr__ = _alias.not_provided(__name__)


def now(format: str = "%H:%M:%S") -> str:
    return datetime.now().strftime(format)


def print_training_update(device: Any, step: int, loss: Any, rate: float, global_rate: float,
                          epoch: Optional[int] = None, summary_writer: Any = None) -> None:
    """One line per logged step: device, epoch, step, loss, rates, time."""
    update = [f"Training Device={device}", f"Epoch={epoch}" if epoch is not None else None,
              f"Step={step}", f"Loss={loss:.5f}", f"Rate={rate:.2f}", f"GlobalRate={global_rate:.2f}",
              f"Time={now()}"]
    print("|", " ".join(u for u in update if u), flush=True)
    if summary_writer is not None:
        write_to_summary(summary_writer, step, {"Loss/train": loss, "Rate": rate, "GlobalRate": global_rate})


def print_test_update(device: Any, accuracy: Optional[float] = None, epoch: Optional[int] = None,
                      step: Optional[int] = None) -> None:
    update = [f"Test Device={device}", f"Step={step}" if step is not None else None,
              f"Epoch={epoch}" if epoch is not None else None,
              f"Accuracy={accuracy:.2f}" if accuracy is not None else None, f"Time={now()}"]
    print("|", " ".join(u for u in update if u), flush=True)


def get_summary_writer(logdir: Optional[str]) -> Any:
    if not logdir:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(log_dir=logdir)


def write_to_summary(summary_writer: Any, global_step: Optional[int] = None,
                     dict_to_write: Dict[str, Any] = {}, write_xla_metrics: bool = False) -> None:
    if summary_writer is None:
        return
    for key, value in dict_to_write.items():
        summary_writer.add_scalar(key, value, global_step)
    if write_xla_metrics:
        for name in metrics.metric_names():
            data = metrics.metric_data(name)
            if data is not None:
                summary_writer.add_scalar(f"xla/{name}/count", data[0], global_step)
                summary_writer.add_scalar(f"xla/{name}/total", data[1], global_step)
        for name in metrics.counter_names():
            summary_writer.add_scalar(f"xla/{name}", metrics.counter_value(name), global_step)


def close_summary_writer(summary_writer: Any) -> None:
    if summary_writer is not None:
        summary_writer.close()
