"""Training, then validation in its own loop under no_grad, then training again: each graph
compiles once at its own step() and is reused.

Report: https://github.com/pytorch/xla/issues/4532 ("Slow Validation": validation after
training was slow until it had its own mark_step).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)


def batch():
    return (xp.tensor(rng.standard_normal((16, 32), dtype=np.float32)),
            xp.tensor(rng.integers(0, 10, 16)))


for epoch in range(2):
    for i in range(4):
        x, y = batch()
        loss = xp.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xp.step()
    with xp.no_grad():
        losses = []
        for i in range(3):
            x, y = batch()
            losses.append(xp.cross_entropy(model(x), y))
            xp.step()
        print("validation loss", sum(loss.item() for loss in losses) / len(losses))
