"""Trains a small residual network the way PyTorch/XLA's ResNet examples do: fake images from
`SampleGenerator`, `MpDeviceLoader`, the step under `torch_xla.compile`, `RateTracker`, step
closures, `master_print`. `--amp` runs the forward under `torch_xla.amp.autocast` (bfloat16),
`--spmd` splits each batch over every device (`xr.use_spmd()`, a mesh, `input_sharding`)."""

import argparse
import itertools
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.utils.utils as xu
from torch_xla import runtime as xr
from torch_xla.amp import autocast


class Block(nn.Module):
    def __init__(self, channels, stride=1):
        super().__init__()
        out = channels * stride
        self.conv1 = nn.Conv2d(channels, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut = nn.Sequential()
        if stride != 1:
            self.shortcut = nn.Sequential(nn.Conv2d(channels, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(Block(8), Block(8, 2), Block(16, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class TrainResNet:
    def __init__(self, args):
        self.args = args
        self.img_dim = args.img_dim
        self.batch_size = args.batch_size
        self.num_steps = args.num_steps
        self.device = torch_xla.device()
        g = torch.Generator().manual_seed(3)
        data = (torch.randn(self.batch_size, 3, self.img_dim, self.img_dim, generator=g),
                torch.randint(0, 10, (self.batch_size,), generator=g))
        self.train_loader = xu.SampleGenerator(data=data, sample_count=self.num_steps)
        self.train_device_loader = pl.MpDeviceLoader(self.train_loader, self.device)
        self.model = SmallResNet().to(self.device)
        self.optimizer = optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        self.loss_fn = nn.CrossEntropyLoss()
        self.compiled_step_fn = torch_xla.compile(self.step_fn, full_graph=True, name="resnet_step_fn")

    def _train_update(self, step, loss, tracker, epoch):
        print(f"epoch: {epoch}, step: {step}, loss: {loss}, rate: {tracker.rate():.1f}", flush=True)

    def step_fn(self, data, target):
        self.optimizer.zero_grad()
        if self.args.amp:
            with autocast(torch_xla.device()):
                output = self.model(data)
                loss = self.loss_fn(output, target)
        else:
            output = self.model(data)
            loss = self.loss_fn(output, target)
        loss.backward()
        self.optimizer.step()
        return loss

    def train_loop_fn(self, loader, epoch):
        tracker = xm.RateTracker()
        self.model.train()
        for step, (data, target) in enumerate(itertools.islice(loader, self.num_steps)):
            loss = self.compiled_step_fn(data, target)
            tracker.add(self.batch_size)
            xm.add_step_closure(self._train_update, args=(step, loss, tracker, epoch))

    def start_training(self):
        xm.master_print(f"Epoch 1 train begin {time.strftime('%H:%M:%S')}")
        self.train_loop_fn(self.train_device_loader, 1)
        xm.master_print(f"Epoch 1 train end {time.strftime('%H:%M:%S')}")
        xm.wait_device_ops()


class TrainResNetSpmd(TrainResNet):
    def __init__(self, args):
        super().__init__(args)
        n = xr.global_runtime_device_count()
        mesh = xs.Mesh(np.arange(n), (n,), ("data",))
        self.train_device_loader = pl.MpDeviceLoader(
            self.train_loader, self.device, input_sharding=xs.ShardingSpec(mesh, ("data", None, None, None)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--img-dim", type=int, default=16)
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--spmd", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.spmd:
        xr.use_spmd()
    (TrainResNetSpmd if args.spmd else TrainResNet)(args).start_training()
