"""torch code on the xlaprof device: gradient clipping that reads the total norm on the host to
decide whether to scale (`if norm > max_norm:` on a tensor).

Report: https://github.com/pytorch/xla/issues/2884 (TROUBLESHOOTING: "the control flow with
item() used in clip_grad_norm_ is problematic"; torch's own clip_grad_norm_ stays on the device).
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
    opt.zero_grad()
    loss.backward()
    norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
    if norm > 0.5:  # planted
        for p in model.parameters():
            p.grad.mul_(0.5 / norm)
    opt.step()
    xt.step()
