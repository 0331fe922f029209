"""torch code on the xlaprof device: the batch size changes from step to step (a sampler that
yields variable-sized batches), every batch moved as it comes.

Report: https://github.com/pytorch/xla/issues/2120 (a Reformer loop became very slow; the
maintainers found the input shapes varied every step and advised bucketing).
"""
# expect: RecompileStorm @planted | dimension 0 | bucket
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sizes = [16, 12, 9, 14, 7, 11]
for step in range(8):
    x = torch.randn(sizes[step % len(sizes)], 32).to(dev)  # planted
    y = torch.randint(0, 10, (x.shape[0],)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
