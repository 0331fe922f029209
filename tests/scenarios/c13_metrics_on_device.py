"""Accuracy accumulated as a tensor on the device and read once at the end.

Report: https://github.com/pytorch/xla/issues/2231 (keep losses and accuracies on the TPU,
bring them to the CPU only at the end).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
correct = xp.zeros((), dtype="int64")
xp.sync()

for i in range(8):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    logits = model(x)
    correct = correct + (logits.argmax(1) == y).long().sum()
    loss = xp.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
print("accuracy", correct.item() / 128)
