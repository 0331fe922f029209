"""The CTC loss (``nn.CTCLoss``, ``F.ctc_loss``): the alpha recursion of its forward and the
beta recursion of the backward that torch's autograd formula calls, on the device.

torch computes the loss over each target's extended labels (a blank before, between and after
its S labels: 2 * S + 1 of them) by the alpha recursion over time, and the gradient of the
log-probs by the beta recursion backwards, both in log space, a sequence at a time. Here each
recursion runs every sequence of the batch at once, through all T steps of the input, on
[batch, 2 * S + 1] arrays: a sequence's loss is read off its alphas at its own last step, and its
betas start there. The lengths are device values, then, that decide nothing on the host. CUDA
reads lengths given as tensors to the host (a sync a step); here only concatenated
(1-D) targets with lengths on the device read one number, their longest target, which sizes the
labels: a size read the profiler reports. Padded (2-D) targets are sized by their padding, so a
batch's lengths change no graph (the alphas of the private ``_ctc_loss`` then span the padding,
where torch's span the longest target; the loss and its gradient are torch's).

Each recursion is one op of the engine's (``ctc_alphas``, the beta recursion being the alpha one on
time and places reversed), a loop in the compiled program: a graph holds one step however long
the input. Unrolled, as a dozen ops a step, XLA compiled a loss over 39 steps for 75 s on a CPU.
A new T or S is a new graph, as any new shape is.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

import xlaprof as xp
from xlaprof import _native

from .. import _check
from .common import Unsupported, aten, read_size
from .cumulative import cumsum
from .indexing import gather
from .registry import lower

NEG_INF = float("-inf")
_CHECKING = " (while checking arguments for ctc_loss_allocate_outputs)"


def _logaddexp(*xs: Any) -> Any:
    """log(sum(exp(x))) of same-shaped arrays: -inf, not nan, where every one is -inf."""
    top = xs[0]
    for x in xs[1:]:
        top = xp.maximum(top, x)
    top = xp.where(top == NEG_INF, 0.0, top)
    total = None
    for x in xs:
        term = (x - top).exp()
        total = term if total is None else total + term
    return total.log() + top


def _shift(x: Any, by: int, fill: Any) -> Any:
    """``x`` moved ``by`` places along its last dim (right if positive), ``fill`` coming in."""
    n = x.shape[-1]
    if by > 0:
        return x.pad([(0, 0), (by, 0)], fill)[:, :n]
    return x.pad([(0, 0), (0, -by)], fill)[:, -by:]


class _Labels:
    """A batch's extended labels and what the recursions need of them, [batch, 2 * S + 1] each:
    the label at each place, whether the place is within the sequence's own 2 * length + 1, and
    whether the alpha there may come from two places back (a label unlike the one before it)."""

    def __init__(self, targets: Any, target_lengths: Any, batch: int, longest: int, blank: int) -> None:
        k = xp.arange(0, longest, 1, dtype="int64").unsqueeze(0)
        tl = target_lengths.astype("int64").unsqueeze(1)
        if longest == 0:
            labels = xp.zeros(batch, 0, dtype="int64")
        elif targets.ndim == 2:
            labels = targets[:, :longest].astype("int64")
        else:  # concatenated: sequence b's labels start after those of the ones before it
            starts = cumsum(target_lengths, 0) - target_lengths
            at = (starts.astype("int64").unsqueeze(1) + k).clamp(0, max(targets.shape[0] - 1, 0))
            labels = targets.astype("int64").index_select(0, at.reshape(-1)).reshape(batch, longest)
        labels = xp.where(k < tl, labels, blank)
        blanks = xp.full((batch, longest), blank, dtype="int64")
        interleaved = xp.stack([blanks, labels], 2).reshape(batch, 2 * longest)
        self.labels = interleaved.pad([(0, 0), (0, 1)], blank)
        self.size = 2 * longest + 1
        place = xp.arange(0, self.size, 1, dtype="int64").unsqueeze(0)
        self.within = place <= 2 * tl
        self.ends = (place == 2 * tl).logical_or(place == 2 * tl - 1)
        self.skips = (place > 1).logical_and(self.labels != _shift(self.labels, 2, blank))


def _emissions(log_probs: Any, labels: _Labels) -> Any:
    """Each place's log-prob at each step, [batch, T, 2 * S + 1]; -inf past a sequence's labels."""
    by_batch = log_probs.transpose(0, 1)                                        # [B, T, C]
    steps = by_batch.shape[1]
    at = labels.labels.unsqueeze(1).expand(by_batch.shape[0], steps, labels.size)
    emitted = gather(by_batch, 2, at)
    return xp.where(labels.within.unsqueeze(1), emitted, NEG_INF)


def _alphas(emitted: Any, labels: _Labels) -> Any:
    """The alphas, [batch, T, 2 * S + 1], from each sequence's first step on (past its input
    length they go on: the caller masks them), in one loop."""
    batch, size = emitted.shape[0], labels.size
    place = xp.arange(0, size, 1, dtype="int64").unsqueeze(0)
    start = (place < 2).expand(batch, size)
    return emitted._ctc_alphas(labels.skips, xp.zeros(batch, dtype="int64"), start)


def _betas(emitted: Any, labels: _Labels, input_lengths: Any) -> Any:
    """The betas, [batch, T, 2 * S + 1]: the alpha recursion on time and places reversed, from
    each sequence's last step (its input length's) back to its first, -inf past its length."""
    steps = emitted.shape[1]
    skips_back = _shift(labels.skips, -2, False)  # the beta at s may come from s + 2
    first = steps - input_lengths.astype("int64")  # the last step, counted from the end
    reversed_ = emitted.flip([1, 2])._ctc_alphas(skips_back.flip([1]), first, labels.ends.flip([1]))
    return reversed_.flip([1, 2])


def _check_on_host(log_probs: Any, targets: Any, input_lengths: Sequence[int], target_lengths: Sequence[int],
           blank: int) -> None:
    """torch's checks of lengths the host holds, in its words."""
    steps, batch = log_probs.shape[0], log_probs.shape[1]
    if not 0 <= blank < log_probs.shape[2]:
        raise RuntimeError("blank must be in label range")
    if len(input_lengths) != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(target_lengths) != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    for name, lengths in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if any(n < 0 for n in lengths):
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value {min(lengths)}{_CHECKING}")
    if input_lengths and max(input_lengths) > steps:
        raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value "
                           f"{max(input_lengths)}{_CHECKING}")
    if targets.ndim == 1 and targets.shape[0] != sum(target_lengths):
        raise RuntimeError(f"Expected tensor to have size {sum(target_lengths)} at dimension 0, but got size "
                           f"{targets.shape[0]} for argument #2 'targets'{_CHECKING}")
    longest = max(target_lengths, default=0)
    if targets.ndim == 2 and targets.shape[1] < longest:
        raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                           f"{targets.shape[1]} for argument #2 'targets'{_CHECKING}")


def _check_on_device(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> None:
    """torch's checks of lengths given as device tensors, at the next sync (``XLAPROF_CHECK``).
    CUDA reads them to the host to check them; here they decide nothing on the host, and without
    the check a length past the input reads its last step's alphas."""
    steps = log_probs.shape[0]

    def at_least_zero(name: str, low: int) -> Optional[str]:
        return None if low >= 0 else f"Expected {name} to have value at least 0, but got value {low}{_CHECKING}"

    def inputs(low: int, high: int) -> Optional[str]:
        if high > steps:
            return f"Expected input_lengths to have value at most {steps}, but got value {high}{_CHECKING}"
        return at_least_zero("input_lengths", low)

    def padded(low: int, high: int) -> Optional[str]:
        if targets.ndim == 2 and high > targets.shape[1]:
            return (f"Expected tensor to have size at least {high} at dimension 1, but got size "
                    f"{targets.shape[1]} for argument #2 'targets'{_CHECKING}")
        return at_least_zero("target_lengths", low)

    def concatenated(total: int, _: int) -> Optional[str]:
        if total == targets.shape[0]:
            return None
        return (f"Expected tensor to have size {total} at dimension 0, but got size {targets.shape[0]} "
                f"for argument #2 'targets'{_CHECKING}")

    _check.deferred(input_lengths, inputs)
    _check.deferred(target_lengths, padded)
    if targets.ndim == 1:
        _check.deferred(target_lengths.astype("int64").sum(), concatenated)


def _on_device(lengths: Sequence[int]) -> Any:
    return _native.from_array(np.asarray(list(lengths), dtype=np.int64))


def _arguments(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int,
               places: Optional[int] = None) -> Tuple[Any, Any, int]:
    """The lengths as device values and the longest target, for either overload (from the
    alphas' ``places`` in the backward, where the forward read it)."""
    if log_probs.ndim != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.ndim}-dimensional tensor for "
                           f"argument #1 'log_probs'{_CHECKING}")
    if log_probs.dtype not in ("float32", "float64") or log_probs.shape[0] == 0:
        raise Unsupported("_ctc_loss: float32 or float64 log-probs over at least one step")
    if targets.dtype not in ("int64", "int32"):
        raise RuntimeError(f"Expected tensor for argument #2 'targets' to have scalar type Long; but got "
                           f"{targets.dtype} instead{_CHECKING}")
    if targets.ndim not in (1, 2):
        raise Unsupported("_ctc_loss: 1-D or 2-D targets")
    if isinstance(input_lengths, (list, tuple)):
        _check_on_host(log_probs, targets, input_lengths, target_lengths, blank)
        return _on_device(input_lengths), _on_device(target_lengths), max(target_lengths, default=0)
    if not 0 <= blank < log_probs.shape[2]:
        raise RuntimeError("blank must be in label range")
    if _check.ENABLED and places is None:  # the forward's call; the backward's is the same
        _check_on_device(log_probs, targets, input_lengths, target_lengths)
    if targets.ndim == 2:
        return input_lengths, target_lengths, targets.shape[1]
    batch = log_probs.shape[1]
    if places is not None:
        return input_lengths, target_lengths, (places - 1) // 2
    longest = 0 if batch == 0 else read_size(target_lengths.max(), "_ctc_loss", "the longest target")
    return input_lengths, target_lengths, longest


@lower(aten._ctc_loss.default, aten._ctc_loss.Tensor)
def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
             zero_infinity: bool = False) -> Any:
    il, tl, longest = _arguments(log_probs, targets, input_lengths, target_lengths, blank)
    batch = log_probs.shape[1]
    labels = _Labels(targets, tl, batch, longest, blank)
    emitted = _emissions(log_probs, labels)
    alphas = _alphas(emitted, labels)
    il, tl = il.astype("int64"), tl.astype("int64")
    last = (il - 1).clamp(0, None).reshape(-1, 1, 1).expand(batch, 1, labels.size)
    ends = gather(alphas, 1, last).reshape(batch, labels.size)
    at_end = gather(ends, 1, (2 * tl).unsqueeze(1))
    before_end = xp.where(tl.unsqueeze(1) > 0, gather(ends, 1, (2 * tl - 1).clamp(0, None).unsqueeze(1)), NEG_INF)
    nll = -_logaddexp(at_end, before_end).reshape(batch)
    # No step at all: an empty target has probability one, any other none (torch's rule).
    none = xp.where(tl == 0, xp.zeros_like(nll), xp.full_like(nll, float("inf")))
    nll = xp.where(il == 0, none, nll).astype(log_probs.dtype)
    step = xp.arange(0, log_probs.shape[0], 1, dtype="int64").reshape(1, -1, 1)
    log_alpha = xp.where(step < il.reshape(-1, 1, 1), alphas, NEG_INF)
    return nll, log_alpha


@lower(aten._ctc_loss_backward.default, aten._ctc_loss_backward.Tensor)
def ctc_loss_backward(grad: Any, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
                      nll: Any, log_alpha: Any, blank: int, zero_infinity: bool = False) -> Any:
    il, tl, longest = _arguments(log_probs, targets, input_lengths, target_lengths, blank, log_alpha.shape[-1])
    steps, batch, classes = log_probs.shape
    labels = _Labels(targets, tl, batch, longest, blank)
    if tuple(log_alpha.shape) != (batch, steps, labels.size):
        raise Unsupported("_ctc_loss_backward: alphas of another shape than this lowering's forward")
    emitted = _emissions(log_probs, labels)
    betas = _betas(emitted, labels, il)
    il = il.astype("int64")
    # Each place's share of the target's probability at each step, exp(alpha + beta - emitted)
    # over the target's: the posterior of its label there, added up per class.
    both = log_alpha + betas
    nll3 = nll.reshape(-1, 1, 1)
    share = xp.where(both == NEG_INF, NEG_INF, both - emitted + nll3).exp()
    b = xp.arange(0, batch, 1, dtype="int64").reshape(-1, 1, 1)
    t = xp.arange(0, steps, 1, dtype="int64").reshape(1, -1, 1)
    where_to = (b * steps + t) * classes + labels.labels.unsqueeze(1)
    posterior = (xp.zeros(batch * steps * classes, dtype=share.dtype)
                 .index_add(0, where_to.reshape(-1), share.reshape(-1))
                 .reshape(batch, steps, classes))
    by_batch = log_probs.transpose(0, 1)
    g = (by_batch.exp() - posterior) * grad.reshape(-1, 1, 1)
    impossible = nll3 == float("inf")
    # torch's formula meets inf - inf for a target of no probability, and zero_infinity zeroes it.
    g = xp.where(impossible, 0.0 if zero_infinity else float("nan"), g)
    g = xp.where(t < il.reshape(-1, 1, 1), g, 0.0)
    return g.transpose(0, 1).astype(log_probs.dtype)
