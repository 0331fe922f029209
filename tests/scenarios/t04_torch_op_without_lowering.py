"""torch code on the xlaprof device: an op the engine does not lower (bessel_j0, the Bessel function,
shaping the step's input on the device) runs on the CPU every step (PyTorch/XLA's `aten::` fallbacks).

Report: https://github.com/pytorch/xla/issues/2918 (BERT training 50x slower than native
PyTorch; the metrics report listed `aten::masked_select`, an op PyTorch/XLA ran on the CPU, until
the code stopped using it).
"""
# expect: HostFallback @planted | aten::special_bessel_j0
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    u = torch.rand(16, 32).to(dev)
    x = torch.special.bessel_j0(u * 1.8 - 0.9)  # planted
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
print(loss.item())
