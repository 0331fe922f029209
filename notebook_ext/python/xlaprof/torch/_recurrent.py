"""torch's recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` and their cells) on the device.

torch builds these layers in C++ above autograd, and on any device other than the CPU its LSTM
and GRU cells call fused kernels written for GPUs (``_thnn_fused_lstm_cell``), which no CPU
kernel backs, so neither a lowering nor the CPU fallback could run them. At the device's autograd
key the layers are instead torch's own decompositions (``torch._decomp``) and the cells the
formulas of torch's CPU cells: ordinary ops, recorded with their gradients like any others.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import torch

from ._decomposed import KEY, decompose_at_autograd_key

aten = torch.ops.aten


def register(lib: torch.library.Library) -> None:
    """Registers the layers and cells in the device's aten library (`_device.register`)."""
    decompose_at_autograd_key(lib, (aten.lstm, aten.gru, aten.rnn_tanh, aten.rnn_relu))
    lib.impl(aten.lstm_cell.default, lstm_cell, KEY)
    lib.impl(aten.gru_cell.default, gru_cell, KEY)


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
