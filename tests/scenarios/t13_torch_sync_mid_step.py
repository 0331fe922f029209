"""torch code on the xlaprof device: an extra sync between the forward and the backward pass.

Report: https://github.com/huggingface/transformers/pull/13896 (review: `xm.mark_step()` "is not
meant to be called more than once per iteration").
"""
# expect: MidStepSync @planted
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
    xt.sync()  # planted
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
