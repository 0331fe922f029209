"""A classifier trained with DistributedDataParallel under torchrun, in the manner of PyTorch's
ImageNet example run with `--multiprocessing-distributed`: each rank reads its shard of the data
through a `DistributedSampler` (`set_epoch` at each epoch), the model is wrapped in DDP, each
iteration's loss and accuracy are kept in `AverageMeter`s (`losses.update(loss.item(), n)`), and
each epoch ends with a validation under `torch.no_grad()` whose counts are summed over the ranks
with `all_reduce`. Lazily it runs as PyTorch/XLA's users run DDP: `init_process_group("xla")`,
the device from `torch_xla`, the loader in `MpDeviceLoader`.

    torchrun --nproc_per_node 2 ddp_imagenet_style.py --mode inductor|xlaprof
    torchrun --nproc_per_node 2 -m xlaprof.torch_xla ddp_imagenet_style.py --mode lazy

`# name` marks the lines the job's tests look for.

An expert reading the job's profile: the ranks keep pace (no straggler, no rank that diverged,
every collective joined by both). Under torch.compile, DDP's bookkeeping before each forward
breaks no graph of the model (its logger runs as Python around it), and the validation under
`no_grad()` compiles the wrapper and the model once more, once: both expected, nothing to fix.
Lazily, `loss.item()` for the meter reads the loss inside every step, and DDP's gradient bucket,
reduced through the host during `backward()`, runs the backward as a graph of its own at every
step.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

if mode == "lazy":
    import torch_xla
    import torch_xla.distributed.parallel_loader as pl
    import torch_xla.distributed.xla_backend  # noqa: F401  (the "xla" process group)

    dist.init_process_group("xla", init_method="xla://")
    device = torch_xla.device()
else:
    dist.init_process_group("gloo")
    device = torch.device("cpu")
rank, world = dist.get_rank(), dist.get_world_size()

epochs, batch_size = 3, 8


class AverageMeter:
    """The running mean of a value over an epoch, as the example keeps its loss and accuracy."""

    def __init__(self) -> None:
        self.sum, self.count = 0.0, 0

    def update(self, value: float, n: int = 1) -> None:
        self.sum += value * n
        self.count += n

    @property
    def avg(self) -> float:
        return self.sum / max(self.count, 1)


class SmallNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def fake_images(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 3, 16, 16, generator=g), torch.randint(0, 10, (n,), generator=g))


def loader_of(data: TensorDataset, sampler: DistributedSampler):
    loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
    return pl.MpDeviceLoader(loader, device) if mode == "lazy" else loader


torch.manual_seed(0)
train_set, val_set = fake_images(4 * batch_size * world, 1), fake_images(batch_size * world, 2)
train_sampler = DistributedSampler(train_set, world, rank, shuffle=True)
val_sampler = DistributedSampler(val_set, world, rank, shuffle=False)

model = DDP(SmallNet().to(device))  # wrap
if mode != "lazy":
    model = torch.compile(model, backend=mode)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def validate() -> float:
    model.eval()
    correct = torch.zeros((), device=device)
    seen = torch.zeros((), device=device)
    with torch.no_grad():
        for images, target in loader_of(val_set, val_sampler):
            output = model(images)  # eval_call
            correct += (output.argmax(1) == target).sum()
            seen += target.numel()
    counts = torch.stack([correct, seen])
    dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()


for epoch in range(epochs):
    train_sampler.set_epoch(epoch)
    model.train()
    losses = AverageMeter()
    for images, target in loader_of(train_set, train_sampler):
        output = model(images)  # train_call
        loss = F.cross_entropy(output, target)
        losses.update(loss.item(), images.size(0))  # meter
        optimizer.zero_grad()
        loss.backward()  # backward
        optimizer.step()
    accuracy = validate()
    if rank == 0:
        print(f"epoch {epoch}: loss {losses.avg:.4f}, accuracy {accuracy:.3f}", flush=True)

dist.barrier()
dist.destroy_process_group()
