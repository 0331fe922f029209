"""Neural-network ops: convolutions, normalizations, losses, dropout, attention.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import xlaprof as xp

from .common import Unsupported, aten, half_in_float, vjp
from .cumulative import cumsum
from .registry import declare, lower


@lower(aten.native_dropout.default)
def native_dropout(x: Any, p: float, train: Optional[bool]) -> Any:
    if not train or p == 0:
        return x.clone(), xp.ones(*x.shape, dtype="bool")
    keep = xp.rand(*x.shape) >= p
    return xp.where(keep, x * (1.0 / (1.0 - p)), xp.zeros_like(x)), keep


@lower(aten.native_dropout_backward.default)
def native_dropout_backward(grad: Any, mask: Any, scale: float) -> Any:
    return grad * mask.astype(grad.dtype) * scale


def _conv_transposed(x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int], output_padding: Sequence[int], groups: int) -> Any:
    """A transposed convolution as the plain one it is: the input spread by the stride (zeros
    between its elements), padded by dilation * (k - 1) - padding (cropped where negative, plus
    output_padding after), convolved at stride 1 with the kernel flipped and its in and out
    channels swapped within each group. ``w`` is [in, out / groups, *k]."""
    nd = x.ndim - 2
    k = list(w.shape[2:])
    low = [dilation[d] * (k[d] - 1) - padding[d] for d in range(nd)]
    high = [low[d] + output_padding[d] for d in range(nd)]
    pads = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)]
    x = x.pad(pads, 0.0, interior=[0, 0] + [s - 1 for s in stride])
    if any(lo < 0 or hi < 0 for lo, hi in zip(low, high)):
        x = x[(slice(None), slice(None)) + tuple(
            slice(max(-lo, 0), x.shape[2 + d] - max(-hi, 0)) for d, (lo, hi) in enumerate(zip(low, high)))]
    cin, cout_g = w.shape[0], w.shape[1]
    kernel = (w.reshape(groups, cin // groups, cout_g, *k).transpose(1, 2)
              .reshape(groups * cout_g, cin // groups, *k).flip(list(range(2, 2 + nd))))
    ones = [1] * nd
    return convolution(x, kernel, bias, ones, [0] * nd, dilation, False, [0] * nd, groups)


@lower(aten.convolution.default, autocast="lower_precision")
def convolution(x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int) -> Any:
    if w.ndim not in (3, 4, 5) or x.ndim != w.ndim:
        raise Unsupported("convolution: only 1-d, 2-d and 3-d convolutions are lowered")
    # torch lets one value stand for every spatial dim.
    nd = w.ndim - 2
    stride, padding, dilation = ([v[0]] * nd if len(v) == 1 else list(v) for v in (stride, padding, dilation))
    output_padding = [output_padding[0]] * nd if len(output_padding) == 1 else list(output_padding)
    if transposed:
        return _conv_transposed(x, w, bias, stride, padding, dilation, output_padding, groups)
    if w.ndim == 5:
        return _conv3d(x, w, bias, stride, padding, dilation, groups)
    if x.ndim == 3:  # 1-d: a 2-d convolution over a height of one
        out = xp.conv2d(x.unsqueeze(2), w.unsqueeze(2), bias, (1, stride[0]), (0, padding[0]),
                        (1, dilation[0]), groups)
        return out.squeeze(2)
    return xp.conv2d(x, w, bias, tuple(stride), tuple(padding), tuple(dilation), groups)


def _conv3d(x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
            dilation: Sequence[int], groups: int) -> Any:
    """A 3-D convolution as a sum over the kernel's depth of 2-D convolutions, each over the
    depth slices that kernel plane meets (as one batch)."""
    batched = x.ndim == 5
    if not batched:
        x = x.unsqueeze(0)
    n, c, depth = x.shape[0], x.shape[1], x.shape[2]
    kd = w.shape[2]
    sd, pd, dd = stride[0], padding[0], dilation[0]
    if pd:
        x = x.pad([(0, 0), (0, 0), (pd, pd), (0, 0), (0, 0)])
        depth += 2 * pd
    d_out = (depth - dd * (kd - 1) - 1) // sd + 1
    total = None
    for t in range(kd):
        start = t * dd
        planes = x[:, :, start:start + sd * (d_out - 1) + 1:sd]             # [N, C, Do, H, W]
        planes = planes.permute(0, 2, 1, 3, 4).reshape(n * d_out, c, *x.shape[3:])
        y = convolution(planes, w[:, :, t], None, list(stride[1:]), list(padding[1:]), list(dilation[1:]),
                        False, [0, 0], groups)                               # [N*Do, O, Ho, Wo]
        if y.dtype in ("bfloat16", "float16"):
            y = y.astype("float32")  # the planes' sum in float32, rounded once, as a convolution's
        total = y if total is None else total + y
    out = total.reshape(n, d_out, *total.shape[1:]).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    out = out.astype(x.dtype)
    return out if batched else out.squeeze(0)


@lower(aten.convolution_backward.default)
def convolution_backward(grad: Any, x: Any, w: Any, bias_sizes: Any, stride: Sequence[int],
                         padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int, output_mask: Sequence[bool]) -> Any:
    if w.ndim not in (3, 4, 5):
        raise Unsupported("convolution_backward: only 1-d, 2-d and 3-d convolutions are lowered")
    gx, gw = vjp(
        lambda a, b: convolution(a, b, None, stride, padding, dilation, transposed, output_padding, groups),
        [x, w],
        grad,
    )
    gb = grad.sum([0] + list(range(2, grad.ndim))) if output_mask[2] else None
    return (gx if output_mask[0] else None, gw if output_mask[1] else None, gb)


@lower(aten.native_layer_norm.default, autocast="float32")
@half_in_float
def native_layer_norm(x: Any, normalized_shape: Sequence[int], weight: Any, bias: Any, eps: float) -> Any:
    axes = list(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    rstd = ((centered * centered).mean(axes, keepdim=True) + eps).rsqrt()
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


@lower(aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
def native_batch_norm(x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: bool,
                      momentum: float, eps: float) -> Any:
    """Evaluation (normalized by the running statistics; torch's kernel then saves no statistics,
    so ``save_mean`` and ``save_invstd`` are empty). Training updates the running statistics in
    place: torch's decomposition does that."""
    if training or running_mean is None:
        raise Unsupported("batch norm in training (its decomposition updates the running statistics)")
    shape = [1, -1] + [1] * (x.ndim - 2)
    out = (x - running_mean.reshape(*shape)) * (running_var.reshape(*shape) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    empty = xp.zeros(0, dtype=x.dtype)
    return out.astype(x.dtype), empty, empty


@lower(aten.native_layer_norm_backward.default)
@half_in_float
def native_layer_norm_backward(grad: Any, x: Any, normalized_shape: Sequence[int], mean: Any, rstd: Any,
                               weight: Any, bias: Any, output_mask: Sequence[bool]) -> Any:
    axes = list(range(x.ndim - len(normalized_shape), x.ndim))
    lead = list(range(x.ndim - len(normalized_shape)))
    xhat = (x - mean) * rstd
    g = grad * weight if weight is not None else grad
    n = 1
    for s in normalized_shape:
        n *= s
    gx = (g - g.mean(axes, keepdim=True) - xhat * (g * xhat).mean(axes, keepdim=True)) * rstd
    # (With no leading dims nothing is summed: `sum([])` would sum every dim, as torch's does.)
    def over_lead(t: Any) -> Any:
        return t.sum(lead) if lead else t

    gw = over_lead(grad * xhat) if weight is not None and output_mask[1] else None
    gb = over_lead(grad) if bias is not None and output_mask[2] else None
    return (gx if output_mask[0] else None, gw, gb)


@lower(aten._weight_norm_interface_backward.default)
def _weight_norm_interface_backward(grad: Any, v: Any, g: Any, norms: Any, dim: int) -> Any:
    # w = v * g / |v| (norm over every dim but `dim`); torch has no decomposition of its backward
    # (weight_norm in wav2vec2's positional convolution reached the CPU fallback every step).
    others = [d for d in range(v.ndim) if d != dim % max(v.ndim, 1)]
    norms = norms.astype(g.dtype)
    grad_g = (grad * v).sum(others, keepdim=True) / norms if others else grad * v / norms
    grad_v = (g / norms) * (grad - v * (grad_g / norms))
    return grad_v.astype(v.dtype), grad_g.reshape(*g.shape).astype(g.dtype)


@lower(aten.nll_loss_forward.default)
def nll_loss_forward(logp: Any, target: Any, weight: Any, reduction: int, ignore_index: int) -> Any:
    picked, valid = _nll_picked(logp, target, weight, ignore_index)
    if reduction == 0:
        return -picked, xp.zeros((), dtype=logp.dtype)
    total = valid.sum()
    if reduction == 1:
        return -picked.sum() / total, total
    return -picked.sum(), total


def _nll_picked(logp: Any, target: Any, weight: Any, ignore_index: int) -> Any:
    classes = logp.shape[-1] if logp.ndim == 1 else logp.shape[1]
    valid_mask = target.ne(ignore_index)
    safe = xp.where(valid_mask, target, xp.zeros_like(target))
    hot = safe.astype("int64").one_hot(classes).astype(logp.dtype)
    if logp.ndim > 2:  # (N, C, d1, ...): classes on axis 1
        hot = hot.permute(0, hot.ndim - 1, *range(1, hot.ndim - 1))
        class_axis = 1
    else:
        class_axis = logp.ndim - 1
    w = valid_mask.astype(logp.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.reshape(-1)).reshape(*safe.shape)
    picked = (logp * hot).sum([class_axis]) * w
    return picked, w


@lower(aten.nll_loss_backward.default)
def nll_loss_backward(grad: Any, logp: Any, target: Any, weight: Any, reduction: int, ignore_index: int,
                      total_weight: Any) -> Any:
    return vjp(lambda lp: nll_loss_forward(lp, target, weight, reduction, ignore_index)[0], [logp], grad)[0]


def _pair(v: Sequence[int]) -> Any:
    v = list(v)
    return (v[0], v[0]) if len(v) == 1 else tuple(v)


@lower(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_cpu(q: Any, k: Any, v: Any, dropout_p: float = 0.0, is_causal: bool = False,
                        attn_mask: Any = None, scale: Any = None) -> Any:
    """Attention and the log-sum-exp of each query's scores ([..., L]), as torch's CPU kernel
    returns them; dropout is a training-time random op this kernel is not asked for here."""
    if dropout_p:
        raise Unsupported("flash attention with dropout")
    e = q.shape[-1]
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        lq, lk = q.shape[-2], k.shape[-2]
        keep = xp.arange(lk).reshape(1, lk) <= xp.arange(lq).reshape(lq, 1)
        scores = xp.where(keep, scores, -math.inf)
    if attn_mask is not None:
        scores = (xp.where(attn_mask, scores, -math.inf) if attn_mask.dtype == "bool"
                  else scores + attn_mask)
    top = scores.amax(-1, keepdim=True)
    lse = ((scores - top).exp().sum(-1, keepdim=True)).log() + top
    out = (scores - lse).exp() @ v
    return out, lse.squeeze(-1)


@lower(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def flash_attention_cpu_backward(grad: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, dropout_p: float,
                                 is_causal: bool, attn_mask: Any = None, scale: Any = None) -> Any:
    """The gradients of the attention above, by the engine's autograd of the same ops."""
    if dropout_p:
        raise Unsupported("flash attention's backward with dropout")
    return tuple(vjp(lambda a, b, c: flash_attention_cpu(a, b, c, 0.0, is_causal, attn_mask, scale)[0], [q, k, v], grad))


@lower(aten.native_group_norm.default)
@half_in_float
def native_group_norm(x: Any, weight: Any, bias: Any, n: int, c: int, hw: int, group: int, eps: float) -> Any:
    g = x.reshape(n, group, -1)
    mean = g.mean([2], keepdim=True)
    centered = g - mean
    rstd = ((centered * centered).mean([2], keepdim=True) + eps).rsqrt()
    out = (centered * rstd).reshape(*x.shape)
    shape = [1, c] + [1] * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out, mean.reshape(n, group), rstd.reshape(n, group)


def _reduced(loss: Any, reduction: int) -> Any:
    """A loss's elements reduced as aten's ``reduction`` says: 0 none, 1 mean, 2 sum."""
    return loss.mean() if reduction == 1 else loss.sum() if reduction == 2 else loss


@lower(aten.huber_loss.default, autocast="float32")
def huber_loss(x: Any, target: Any, reduction: int = 1, delta: float = 1.0) -> Any:
    d = (x - target).abs()
    loss = xp.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return _reduced(loss, reduction)


def _multi_margin(x: Any, target: Any, p: int, margin: float, weight: Any, reduction: int) -> Any:
    """``sum over j != y of max(0, margin - x[y] + x[j]) ** p * w[y] / C`` per sample: torch's
    decomposition of the forward, written here for the backward's gradient."""
    rows = x.reshape(-1, x.shape[-1] if x.ndim else 1)  # a 0-d input is one sample of one class
    classes = rows.shape[1]
    hot = target.reshape(-1).astype("int64").one_hot(classes).astype("bool")        # [N, C]
    picked = xp.where(hot, rows, xp.zeros_like(rows)).sum([1], keepdim=True)       # x[y]
    z = (rows - picked + margin).maximum(0.0)
    z = z * z if p == 2 else z
    if weight is not None:
        z = z * xp.where(hot, weight.reshape(1, classes), xp.zeros_like(rows)).sum([1], keepdim=True)
    per = xp.where(hot, xp.zeros_like(z), z).sum([1]) * (1.0 / classes)
    return _reduced(per if x.ndim == 2 else per.reshape(), reduction)


@lower(aten.multi_margin_loss_backward.default)
def multi_margin_loss_backward(grad: Any, x: Any, target: Any, p: int, margin: float, weight: Any = None,
                               reduction: int = 1) -> Any:
    """torch decomposes the forward but not its backward: the gradient of the same sum."""
    return vjp(lambda v: _multi_margin(v, target, p, margin, weight, reduction), [x], grad)[0]


def _multilabel_margin(x: Any, target: Any, reduction: int) -> Any:
    """``sum over labels k, non-labels j of max(0, 1 - (x[y_k] - x[j])) / C`` per sample, the
    labels being ``target``'s entries before its first -1."""
    rows = x.reshape(-1, x.shape[-1] if x.ndim else 1)  # a 0-d input is one sample of one class
    classes = rows.shape[1]
    t = target.reshape(-1, classes).astype("int64")
    valid = cumsum((t < 0).astype("int64"), 1).eq(0)                              # [N, K]
    label = t.maximum(0).one_hot(classes).astype("bool").logical_and(valid.unsqueeze(2))   # [N, K, C]
    is_target = label.astype("int64").sum([1]).gt(0)                              # [N, C]
    x_label = xp.where(label, rows.unsqueeze(1), xp.zeros_like(label.astype(x.dtype))).sum([2])   # [N, K]
    z = (rows.unsqueeze(1) - x_label.unsqueeze(2) + 1.0).maximum(0.0)            # [N, K, C]
    keep = valid.unsqueeze(2).logical_and(is_target.logical_not().unsqueeze(1))
    per = xp.where(keep, z, xp.zeros_like(z)).sum([1, 2]) * (1.0 / classes)
    return _reduced(per if x.ndim == 2 else per.reshape(), reduction)


@lower(aten.multilabel_margin_loss_backward.default)
def multilabel_margin_loss_backward(grad: Any, x: Any, target: Any, reduction: int, is_target: Any) -> Any:
    """torch decomposes the forward but not its backward: the gradient of the same sum."""
    return vjp(lambda v: _multilabel_margin(v, target, reduction), [x], grad)[0]


# torch's autocast lists for CUDA (aten/src/ATen/autocast_mode.cpp) name these ops, which torch
# decomposes into the ones lowered here.
declare("_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "prelu", "linear", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
        "scaled_dot_product_attention", autocast="lower_precision")
declare("layer_norm", "group_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
        "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "mse_loss",
        "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
        "multi_margin_loss", "binary_cross_entropy_with_logits", autocast="float32")
declare("bilinear", "grid_sampler", autocast="widest")
