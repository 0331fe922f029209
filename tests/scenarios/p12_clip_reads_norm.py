"""Gradient clipping that reads the total norm on the host to compute the scale.

Report: https://github.com/pytorch/xla/issues/2884 (TROUBLESHOOTING: "the control flow with
item() used in clip_grad_norm_ is problematic"; XLA patched it to stay on the device).
"""
# expect: HiddenSync @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
params = model.parameters()
opt = xp.optim.SGD(params, lr=0.1)

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    norm = sum((p.grad * p.grad).sum() for p in params).sqrt()
    scale = min(1.0, 0.5 / (norm.item() + 1e-6))  # planted
    for p in params:
        p.grad = p.grad * scale
    opt.step()
    xp.step()
