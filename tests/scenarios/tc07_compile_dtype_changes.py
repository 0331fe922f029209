"""torch.compile: a compiled preprocessing function gets float64 data from NumPy after float32
batches; the dtype fails a guard.

Report: https://github.com/pytorch/pytorch/issues/148179 (guard failures on tensor properties
of the inputs recompiled `forward` again and again).
"""
# expect: Recompile @planted | dtype
import numpy as np
import torch


@torch.compile
def normalize(x):
    return (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-5)


torch.manual_seed(0)
total = 0.0
for step in range(6):
    if step < 3:
        batch = torch.randn(32, 8)
    else:
        batch = torch.from_numpy(np.random.default_rng(step).normal(size=(32, 8)))  # planted
    total += float(normalize(batch).abs().mean())
print(total)
