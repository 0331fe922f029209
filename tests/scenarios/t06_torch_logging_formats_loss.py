"""torch code on the xlaprof device: the loss handed to `logging` inside the step. The logging
module formats the message itself (`str(loss)`, a value read) deep in the standard library; the
read is the user's `logging.info` line, with the library's line kept as detail.

Report: https://github.com/pytorch/xla/issues/1777 (per-step reads of the loss for logging forced
graph executions every iteration); logging a tensor is the common form of it.
"""
# expect: HiddenSync @planted | via
import logging
import sys

import torch

import xlaprof.torch as xt

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    logging.info("step %d loss %s", step, loss)  # planted
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
