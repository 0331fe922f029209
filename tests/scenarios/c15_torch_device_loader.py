"""torch code on the xlaprof device, clean: batches already in memory, moved onto the device by
`DeviceLoader` ahead of the loop, which marks each step when it asks for the next batch
(PyTorch/XLA's `MpDeviceLoader` pattern from its ResNet training example). Nothing to report.
"""
# expect: nothing
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
data = [(torch.randn(16, 32), torch.randint(0, 10, (16,))) for _ in range(10)]
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in xt.DeviceLoader(data):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
