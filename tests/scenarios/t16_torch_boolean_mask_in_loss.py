"""torch code on the xlaprof device: the loss keeps the real tokens by a boolean mask
(`per_token[keep]`), and the number of real tokens changes with the batch's padding. The mask's
count is read from the device every step (a sync inside the step), and each new count is a graph
of its own.

Reports: https://github.com/pytorch/xla/issues/4248 (`dest[mask] = ...` runs the mask early, and
the indices' size is data dependent); https://github.com/google/torchax/pull/96 (multimodal
models whose boolean masks' counts vary per request recompiled for 13-15 s each).
"""
# expect: DataDependentShape @planted | aten::index | sizes
import torch
import torch.nn.functional as F

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(8):
    ids = torch.randint(1, 50, (4, 12))
    ids[:, 12 - (step % 4) * 2:] = 0  # padding, a different amount each batch
    ids = ids.to(dev)
    per_token = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten(), reduction="none")
    keep = ids.flatten() != 0
    loss = per_token[keep].mean()  # planted
    loss.backward()
    opt.step()
    opt.zero_grad()
    xt.step()
print(loss.item())
