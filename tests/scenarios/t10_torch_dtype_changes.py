"""torch code on the xlaprof device: some batches arrive as float64 (NumPy's default, through
`torch.from_numpy`), others as float32, and are moved as they come.

Report: https://github.com/jax-ml/jax/issues/4274 ("How to detect recompilation reason?": an
argument's type changed and the function compiled a second time).
"""
# expect: Recompile @planted | dtype | f64
import numpy as np
import torch

import xlaprof.torch as xt

dev = xt.device()
rng = np.random.default_rng(0)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    batch = rng.standard_normal((16, 32))
    if step % 2 == 0:
        batch = batch.astype(np.float32)
    x = torch.from_numpy(batch).to(dev).float()  # planted
    y = torch.from_numpy(rng.integers(0, 10, 16)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
