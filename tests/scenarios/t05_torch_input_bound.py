"""torch code on the xlaprof device: the input pipeline is slower than the step, so each step
waits for its batch (decoding in the loop's own process, no workers).

Report: https://github.com/pytorch/xla/issues/2574 (ResNet-50 on ImageNet: "for this model, the
main bottleneck is image loading"; the advice was DataLoader workers sized to the host's cores).
"""
# expect: DataWait @planted | waited for its input pipeline | num_workers
import time

import torch

import xlaprof.torch as xt


class SlowImages(torch.utils.data.Dataset):
    """Images decoded on the host: 2 ms each."""

    def __len__(self) -> int:
        return 8 * 16

    def __getitem__(self, i: int):
        time.sleep(0.002)
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 16, 16, generator=g), i % 10


dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(768, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(SlowImages(), batch_size=16)
for x, y in xt.DeviceLoader(loader):  # planted
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
