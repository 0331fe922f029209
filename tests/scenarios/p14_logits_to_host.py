"""Every step's logits copied to the host for metrics computed later.

Report: https://github.com/huggingface/transformers/pull/16029 (metrics in the language-model
examples were turned off on TPU because gathering the logits every step was the problem).
"""
# expect: HostRead @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 512, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
kept = []

for i in range(6):
    x = xp.tensor(rng.standard_normal((64, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 512, 64))
    logits = model(x)
    loss = xp.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
    kept.append(logits.numpy())  # planted
