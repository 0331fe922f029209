"""A debugger or IDE variable view formats every local tensor while the step is paused.

Report: https://github.com/pytorch/xla/issues/1572 (inspecting XLA tensors at a breakpoint in
PyCharm or VS Code timed out: the variable view forced compilations).
"""
# expect: HiddenSync @planted
import sys

import numpy as np

import xlaprof as xp


def variable_view(frame):
    """What an IDE does at a breakpoint: show each local's value."""
    shown = {}
    for name, value in frame.f_locals.items():
        if isinstance(value, xp.Tensor):
            shown[name] = str(value)  # planted
    return shown


rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(4):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    logits = model(x)
    variable_view(sys._getframe())
    loss = xp.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
