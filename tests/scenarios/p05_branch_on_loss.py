"""A Python `if` on a tensor's value inside the step.

Report: https://github.com/pytorch/xla/issues/2855 ("If Statement Very Slow": `if
torch.argmax(t) == t1:` forced a compile and an execution on the TPU).
"""
# expect: HiddenSync @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
skipped = 0

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    if loss > 100.0:  # planted
        skipped += 1
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
