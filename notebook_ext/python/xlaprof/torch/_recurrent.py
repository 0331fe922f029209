"""torch's recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` and their cells) on the device.

torch builds these layers in C++ above autograd, and on any device other than the CPU its LSTM
and GRU cells call fused kernels written for GPUs (``_thnn_fused_lstm_cell``), which no CPU
kernel backs, so neither a lowering nor the CPU fallback could run them. At the device's autograd
key they are instead built here, layer by layer and direction by direction, from ordinary ops
recorded with their gradients like any others:

- an LSTM layer (no projection, a padded batch) is one loop of the engine's over time
  (``lstm_loop``) and its backward another (``lstm_loop_backward``), with the input's projection,
  the recurrent weight's gradient and the input's as whole-sequence products around them, as
  cuDNN runs it. Recorded a step after another, the cell's state gradient is elementwise from step
  to step, and XLA fuses that chain into every step's kernel: a 50-step layer compiled for 50 s
  on a CPU, and the compile grew with the square of the steps;
- so is a GRU layer (``gru_loop``, ``gru_loop_backward``), whose state gradient is as elementwise
  from step to step (50 steps compiled for 25 s);
- so is an ``nn.RNN`` layer (``rnn_loop``, ``rnn_loop_backward``): unrolled over 200 steps it
  compiled for 12.6 s, and a training step took 4.4 times CPU eager's;
- LSTMs with projections, and layers over packed sequences, run each step as torch's own
  decompositions of the cells (``torch._decomp``), unrolled.

Between layers, dropout is applied in training, as torch's CPU and CUDA kernels apply it (torch's
decompositions leave it out, so a model trained with it on the device silently trained without).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch._decomp import decompositions as torch_decomp

from ._decomposed import KEY
from ._tensor import value, wrap

aten = torch.ops.aten


def register(lib: torch.library.Library) -> None:
    """Registers the layers and cells in the device's aten library (`_device.register`)."""
    lib.impl(aten.lstm.input, lstm, KEY)
    lib.impl(aten.lstm.data, lstm_packed, KEY)
    lib.impl(aten.gru.input, partial(_rnn, _gru_layer), KEY)
    lib.impl(aten.rnn_tanh.input, partial(_rnn, partial(_elman_layer, False)), KEY)
    lib.impl(aten.rnn_relu.input, partial(_rnn, partial(_elman_layer, True)), KEY)
    for packet, cell in ((aten.gru, torch_decomp.gru_cell_data),
                         (aten.rnn_tanh, torch_decomp.rnn_cell_data(torch.tanh)),
                         (aten.rnn_relu, torch_decomp.rnn_cell_data(torch.relu))):
        lib.impl(packet.data, partial(_rnn_packed, cell), KEY)
    lib.impl(aten.lstm_cell.default, lstm_cell, KEY)
    lib.impl(aten.gru_cell.default, gru_cell, KEY)


# ---- layers ------------------------------------------------------------------------------------

Layer = Callable[..., Tuple[torch.Tensor, Any]]


def _layers(x: torch.Tensor, hidden: Sequence[Any], params: Sequence[Tuple[torch.Tensor, ...]], has_biases: bool,
            num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool,
            layer: Layer) -> Tuple[torch.Tensor, List[Any]]:
    """Every layer and direction in order (``params`` and ``hidden`` per layer and direction),
    each layer's output the next one's input, with dropout between layers in training."""
    x = x.transpose(0, 1) if batch_first else x
    directions = 2 if bidirectional else 1
    finals: List[Any] = []
    for i in range(num_layers):
        outs = []
        for d in range(directions):
            k = i * directions + d
            out, final = layer(x, hidden[k], params[k], has_biases, reverse=d == 1)
            outs.append(out)
            finals.append(final)
        x = torch.cat(outs, x.dim() - 1) if bidirectional else outs[0]
        if dropout != 0 and train and i < num_layers - 1:
            x = torch.dropout(x, dropout, train=True)
    return (x.transpose(0, 1) if batch_first else x), finals


def _stacked(finals: List[Any]) -> Tuple[torch.Tensor, torch.Tensor]:
    hs, cs = zip(*finals)
    return torch.stack(hs, 0), torch.stack(cs, 0)


def lstm(x: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor], has_biases: bool,
         num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> Any:
    projections = hx[0].size(2) != hx[1].size(2)
    groups = torch_decomp.gather_params(params, has_biases, projections)
    layer = torch_decomp.one_layer_lstm if projections else _lstm_layer
    out, finals = _layers(x, list(zip(hx[0], hx[1])), groups, has_biases, num_layers, dropout, train,
                          bidirectional, batch_first, layer)
    return (out, *_stacked(finals))


def lstm_packed(data: torch.Tensor, batch_sizes: torch.Tensor, hx: Sequence[torch.Tensor],
                params: Sequence[torch.Tensor], has_biases: bool, num_layers: int, dropout: float, train: bool,
                bidirectional: bool) -> Any:
    groups = torch_decomp.gather_params(params, has_biases, hx[0].size(2) != hx[1].size(2))
    layer = partial(torch_decomp.one_layer_lstm_data, batch_sizes=batch_sizes)
    out, finals = _layers(data, list(zip(hx[0], hx[1])), groups, has_biases, num_layers, dropout, train,
                          bidirectional, False, layer)
    return (out, *_stacked(finals))


def _rnn(layer: Layer, x: torch.Tensor, hx: torch.Tensor, params: Sequence[torch.Tensor], has_biases: bool,
         num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> Any:
    groups = torch_decomp.gather_params(params, has_biases, False)
    out, finals = _layers(x, hx.unbind(0), groups, has_biases, num_layers, dropout, train, bidirectional,
                          batch_first, layer)
    return out, torch.stack(finals, 0)


def _rnn_packed(cell: Any, data: torch.Tensor, batch_sizes: torch.Tensor, hx: torch.Tensor,
                params: Sequence[torch.Tensor], has_biases: bool, num_layers: int, dropout: float, train: bool,
                bidirectional: bool) -> Any:
    layer = partial(torch_decomp.one_layer_rnn_data, batch_sizes=batch_sizes, hidden_fn=cell)
    return _rnn(layer, data, hx, params, has_biases, num_layers, dropout, train, bidirectional, False)


def _projected(x: torch.Tensor, params: Tuple[torch.Tensor, ...], has_biases: bool, reverse: bool,
               both_biases: bool) -> torch.Tensor:
    """A layer's input projected for every step at once, [time, batch, gates * hidden], with its
    bias (and the recurrent bias, where that adds outside the cell: ``both_biases``), in time
    order for the direction; in the projection's dtype, which autocast chooses."""
    projected = torch.nn.functional.linear(x, params[0], params[2] if has_biases else None)
    if has_biases and both_biases:
        projected = projected + params[3].to(projected.dtype)
    return projected.flip(0) if reverse else projected


def _lstm_layer(x: torch.Tensor, hidden: Tuple[torch.Tensor, torch.Tensor], params: Tuple[torch.Tensor, ...],
                has_biases: bool, reverse: bool = False) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """One direction of an LSTM layer over ``x`` [time, batch, input], the engine's loop."""
    projected = _projected(x, params, has_biases, reverse, both_biases=True)
    dtype = projected.dtype
    hs, c_last = _LstmLoop.apply(projected, params[1].to(dtype), hidden[0].to(dtype), hidden[1].to(dtype))
    return (hs.flip(0) if reverse else hs), (hs[-1], c_last)


class _LstmLoop(torch.autograd.Function):
    """The engine's LSTM loop over time and, for the backward, its loop back: every step's
    hidden state and the last cell state, from the projected inputs (both biases added), the
    recurrent weight and the initial states."""

    @staticmethod
    def forward(ctx: Any, projected: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor,
                c0: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        states = wrap(value(projected)._lstm_loop(value(w_hh), value(h0), value(c0)))
        ctx.save_for_backward(projected, w_hh, h0, c0, states)
        hidden = h0.shape[-1]
        return states[:, :, :hidden].clone(), states[-1, :, hidden:].clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, d_hiddens: Optional[torch.Tensor],
                 d_cell: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        projected, w_hh, h0, c0, states = ctx.saved_tensors
        steps, batch, gates = projected.shape
        hidden = gates // 4
        if d_hiddens is None:
            d_hiddens = projected.new_zeros(steps, batch, hidden)
        if d_cell is None:
            d_cell = torch.zeros_like(c0)
        out = wrap(value(projected)._lstm_loop_backward(value(w_hh), value(h0), value(c0), value(states),
                                                        value(d_hiddens.contiguous()), value(d_cell.contiguous())))
        d_gates = out[:steps]
        h_before = torch.cat([h0.unsqueeze(0), states[:-1, :, :hidden]], 0)
        d_w_hh = d_gates.reshape(steps * batch, gates).t() @ h_before.reshape(steps * batch, hidden)
        return d_gates, d_w_hh, out[steps, :, :hidden], out[steps, :, hidden:2 * hidden]


def _gru_layer(x: torch.Tensor, h0: torch.Tensor, params: Tuple[torch.Tensor, ...], has_biases: bool,
               reverse: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """One direction of a GRU layer over ``x`` [time, batch, input], the engine's loop (the
    recurrent bias inside it: the reset gate scales part of it)."""
    projected = _projected(x, params, has_biases, reverse, both_biases=False)
    dtype = projected.dtype
    b_hh = params[3].to(dtype) if has_biases else projected.new_zeros(projected.shape[-1])
    hs = _GruLoop.apply(projected, params[1].to(dtype), b_hh, h0.to(dtype))
    return (hs.flip(0) if reverse else hs), hs[-1]


class _GruLoop(torch.autograd.Function):
    """The engine's GRU loop over time and, for the backward, its loop back: every step's
    hidden state from the projected inputs (their bias added), the recurrent weight and bias
    (inside the loop: the reset gate scales the new state's part of it) and the initial state."""

    @staticmethod
    def forward(ctx: Any, projected: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor,
                h0: torch.Tensor) -> torch.Tensor:
        hs = wrap(value(projected)._gru_loop(value(w_hh), value(b_hh), value(h0)))
        ctx.save_for_backward(projected, w_hh, b_hh, h0, hs)
        return hs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, d_hiddens: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        projected, w_hh, b_hh, h0, hs = ctx.saved_tensors
        steps, batch, gates = projected.shape
        hidden = gates // 3
        out = wrap(value(projected)._gru_loop_backward(value(w_hh), value(b_hh), value(h0), value(hs),
                                                       value(d_hiddens.contiguous())))
        grads = out[:steps]
        r_z, d_new, d_recurrent_new = grads[:, :, :2 * hidden], grads[:, :, 2 * hidden:3 * hidden], grads[:, :, 3 * hidden:]
        d_projected = torch.cat([r_z, d_new], 2)
        d_recurrent = torch.cat([r_z, d_recurrent_new], 2).reshape(steps * batch, gates)
        h_before = torch.cat([h0.unsqueeze(0), hs[:-1]], 0).reshape(steps * batch, hidden)
        return d_projected, d_recurrent.t() @ h_before, d_recurrent.sum(0), out[steps, :, :hidden]


def _elman_layer(relu: bool, x: torch.Tensor, h0: torch.Tensor, params: Tuple[torch.Tensor, ...],
                 has_biases: bool, reverse: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """One direction of an ``nn.RNN`` layer over ``x`` [time, batch, input], the engine's loop."""
    projected = _projected(x, params, has_biases, reverse, both_biases=True)
    dtype = projected.dtype
    hs = _ElmanLoop.apply(projected, params[1].to(dtype), h0.to(dtype), relu)
    return (hs.flip(0) if reverse else hs), hs[-1]


class _ElmanLoop(torch.autograd.Function):
    """The engine's ``nn.RNN`` loop over time (tanh or relu) and, for the backward, its loop back."""

    @staticmethod
    def forward(ctx: Any, projected: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor, relu: bool) -> torch.Tensor:
        hs = wrap(value(projected)._rnn_loop(value(w_hh), value(h0), relu))
        ctx.save_for_backward(w_hh, h0, hs)
        ctx.relu = relu
        return hs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, d_hiddens: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        w_hh, h0, hs = ctx.saved_tensors
        steps, batch, hidden = hs.shape
        out = wrap(value(hs)._rnn_loop_backward(value(w_hh), value(d_hiddens.contiguous()), ctx.relu))
        d_pre = out[:steps]
        h_before = torch.cat([h0.unsqueeze(0), hs[:-1]], 0).reshape(steps * batch, hidden)
        return d_pre, d_pre.reshape(steps * batch, hidden).t() @ h_before, out[steps], None


# ---- cells -------------------------------------------------------------------------------------


def _gates(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
           b_ih: Optional[torch.Tensor], b_hh: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    return torch.nn.functional.linear(x, w_ih, b_ih), torch.nn.functional.linear(h, w_hh, b_hh)


def lstm_cell(x: torch.Tensor, hx: Sequence[torch.Tensor], w_ih: torch.Tensor, w_hh: torch.Tensor,
              b_ih: Optional[torch.Tensor] = None, b_hh: Optional[torch.Tensor] = None) -> Any:
    h, c = hx
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh)
    i, f, g, o = (gi + gh).chunk(4, 1)
    cy = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(cy), cy


def gru_cell(x: torch.Tensor, hx: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
             b_ih: Optional[torch.Tensor] = None, b_hh: Optional[torch.Tensor] = None) -> torch.Tensor:
    gi, gh = _gates(x, hx, w_ih, w_hh, b_ih, b_hh)
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    reset, update = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    new = torch.tanh(i_n + reset * h_n)
    return new + update * (hx - new)
