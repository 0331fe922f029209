"""torch code on the xlaprof device: torch.optim.AdamW creates its moments on its first step.

Report: https://github.com/pytorch/pytorch/pull/98647 (Adam's state is created on the first
step, so tracing takes the init path once and a different path on the second try).
"""
# expect: LazyState @planted
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()  # planted
    opt.zero_grad()
    xt.step()
print(loss.item())
