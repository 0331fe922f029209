"""torch code on the xlaprof device: the last batch of each epoch is smaller.

Report: https://github.com/pytorch/xla/pull/1279 (without drop_last the last MNIST batch was
[96, 1, 28, 28] instead of [128, ...], a new graph in the epoch's last step).
"""
# expect: Recompile @planted | dimension 0 | 32 | 4 | drop_last
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
data = torch.randn(100, 32)
labels = torch.randint(0, 10, (100,))
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(2):
    for i in range(0, 100, 32):
        x = data[i : i + 32].to(dev)  # planted
        y = labels[i : i + 32].to(dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xt.step()
