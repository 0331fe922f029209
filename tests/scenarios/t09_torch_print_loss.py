"""torch code on the xlaprof device: printing the loss tensor inside the step.

Report: https://github.com/pytorch/xla/issues/7596 ("Print(tensor) takes a very long time!":
print ran the whole pending graph; a mark_step before the print fixed it).
"""
# expect: HiddenSync @planted
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    print(f"step {step}: loss {loss}")  # planted
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
