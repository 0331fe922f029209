"""Trains an MNIST classifier the way PyTorch/XLA's MNIST training script does (with its
`--fake_data`): `torch_xla.launch`, `xm.optimizer_step`, `MpDeviceLoader` for training and test,
step closures printing through `test_utils`, `mesh_reduce` of the accuracy, the metrics report.
`--ddp` wraps the model in DDP over the `xla` process group; `--syncfree` trains with a gradient
scaler and a sync-free optimizer; `--fallback` calls an op with no lowering (its CPU fallback is
counted as `aten::` in the metrics)."""

import argparse
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_backend  # noqa: F401  (the `xla` process group)
import torch_xla.test.test_utils as test_utils
import torch_xla.utils.utils as xu
from torch.nn.parallel import DistributedDataParallel as DDP
from torch_xla import runtime as xr
from torch_xla.amp import GradScaler, syncfree


class MNIST(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, kernel_size=5)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc1 = nn.Linear(128, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.bn1(F.relu(F.max_pool2d(self.conv1(x), 2)))
        x = self.bn2(F.relu(F.max_pool2d(self.conv2(x), 2)))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def _train_update(device, step, loss, tracker, epoch):
    test_utils.print_training_update(device, step, loss.item(), tracker.rate(), tracker.global_rate(), epoch)


def fake_loader(flags, count, seed):
    g = torch.Generator().manual_seed(seed)
    return xu.SampleGenerator(
        data=(torch.randn(flags.batch_size, 1, 28, 28, generator=g), torch.randint(0, 10, (flags.batch_size,), generator=g)),
        sample_count=count)


def train_mnist(flags):
    if flags.ddp:
        dist.init_process_group("xla", init_method="xla://")
    torch.manual_seed(1)
    train_loader = fake_loader(flags, flags.train_steps, 1)
    test_loader = fake_loader(flags, 3, 2)
    device = torch_xla.device()
    model = MNIST().to(device)
    xm.broadcast_master_param(model)
    if flags.ddp:
        model = DDP(model, gradient_as_bucket_view=True)
    lr = flags.lr * xr.world_size()
    if flags.syncfree:
        optimizer = syncfree.SGD(model.parameters(), lr=lr, momentum=0.5)
        scaler = GradScaler()
    else:
        optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.5)
    loss_fn = nn.NLLLoss()

    def train_loop_fn(loader, epoch):
        tracker = xm.RateTracker()
        model.train()
        for step, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            output = model(data)
            if flags.fallback:
                output = output + torch.special.airy_ai(torch.zeros_like(output))
            loss = loss_fn(output, target)
            if flags.syncfree:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            elif flags.ddp:
                loss.backward()
                optimizer.step()
            else:
                loss.backward()
                xm.optimizer_step(optimizer)
            tracker.add(flags.batch_size)
            xm.add_step_closure(_train_update, args=(device, step, loss, tracker, epoch))

    def test_loop_fn(loader):
        total_samples, correct = 0, 0
        model.eval()
        for data, target in loader:
            output = model(data)
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum()
            total_samples += data.size()[0]
        accuracy = 100.0 * correct.item() / total_samples
        return xm.mesh_reduce("test_accuracy", accuracy, np.mean)

    train_device_loader = pl.MpDeviceLoader(train_loader, device)
    test_device_loader = pl.MpDeviceLoader(test_loader, device)
    for epoch in range(1, flags.num_epochs + 1):
        xm.master_print(f"Epoch {epoch} train begin {test_utils.now()}")
        train_loop_fn(train_device_loader, epoch)
        xm.master_print(f"Epoch {epoch} train end {test_utils.now()}")
        accuracy = test_loop_fn(test_device_loader)
        xm.master_print(f"Epoch {epoch} test end {test_utils.now()}, Accuracy={accuracy:.2f}")
    if flags.metrics_debug:
        xm.master_print(met.metrics_report())
    return accuracy


def _mp_fn(index, flags):
    torch.set_default_dtype(torch.float32)
    accuracy = train_mnist(flags)
    if accuracy < flags.target_accuracy:
        print(f"Accuracy {accuracy} is below target {flags.target_accuracy}")
        sys.exit(21)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--train_steps", type=int, default=8)
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--num_cores", type=int, default=1)
    parser.add_argument("--target_accuracy", type=float, default=0.0)
    parser.add_argument("--metrics_debug", action="store_true")
    parser.add_argument("--ddp", action="store_true")
    parser.add_argument("--syncfree", action="store_true")
    parser.add_argument("--fallback", action="store_true")
    flags = parser.parse_args()
    torch_xla.launch(_mp_fn, args=(flags,), debug_single_process=flags.num_cores == 1)
