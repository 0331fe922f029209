"""Validation run through the training loop's own step function: one call site alternates
between the training graph and a second, evaluation graph every few steps.

Report: https://github.com/pytorch/xla/issues/2065 ("Maintain several computation graphs":
training, then validation, then training again each waited for a compile).
"""
# expect: Recompile @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)


def run_batch(train):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    if train:
        opt.zero_grad()
        loss.backward()  # planted
        opt.step()
    xp.step()
    return loss


for i in range(9):
    run_batch(train=(i % 3 != 2))
