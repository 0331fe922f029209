"""Adam from the engine: its moments exist from the start, so step 2 reuses step 1's graph.

Report: https://github.com/pytorch/pytorch/pull/98647 (lazily created Adam state makes the
first traced step differ from the rest; state made up front does not).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.GELU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.AdamW(model.parameters(), lr=1e-3)

for i in range(8):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
