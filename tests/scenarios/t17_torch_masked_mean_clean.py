"""torch code on the xlaprof device: the fix of t16, the padded tokens left out of the loss by
multiplying with the mask, not selecting by it: one graph for every batch, however much padding
it has, and no read inside the step.

Report: https://github.com/pytorch/xla/issues/4248 (`torch.where(mask, ...)` in place of
indexing by the mask).
"""
# expect: nothing
import torch
import torch.nn.functional as F

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(8):
    ids = torch.randint(1, 50, (4, 12))
    ids[:, 12 - (step % 4) * 2:] = 0
    ids = ids.to(dev)
    per_token = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten(), reduction="none")
    keep = (ids.flatten() != 0).float()
    loss = (per_token * keep).sum() / keep.sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    xt.step()
print(loss.item())
