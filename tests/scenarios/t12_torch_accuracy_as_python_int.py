"""torch code on the xlaprof device: accuracy accumulated as a Python number inside the step.

Report: https://github.com/pytorch/xla/issues/1412 ("IR Compilation takes 25 minutes each time":
23562 `item()` calls in 232 steps from progress logging).
"""
# expect: HiddenSync @planted
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
correct = 0
for step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    logits = model(x)
    correct += (logits.argmax(1) == y).sum().item()  # planted
    loss = torch.nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
print("accuracy", correct / 96)
