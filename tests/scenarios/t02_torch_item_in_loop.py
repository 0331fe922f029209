"""torch code on the xlaprof device: `loss.item()` every step, before the step ends.

Report: https://github.com/pytorch/xla/issues/1777 (Adafactor ~10 s per iteration: a Python
sqrt of a tensor and `loss.item()` every step forced graph executions).
"""
# expect: HiddenSync @planted
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0.0
for step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    total += loss.item()  # planted
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
print(total / 6)
