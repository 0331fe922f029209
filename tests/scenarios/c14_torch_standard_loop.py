"""torch code on the xlaprof device, written as PyTorch/XLA's guide says: fixed batch shapes,
SGD (no lazily created state without momentum), the loss read after the step, one step() each.

Report: https://github.com/pytorch/xla/issues/1368 ("How to tell if a graph recompilation is
happening?": the user diffed CompileTime counts to check a loop like this one compiled once).
"""
# expect: nothing
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
    losses.append(loss.detach())
print(sum(l.item() for l in losses) / len(losses))
