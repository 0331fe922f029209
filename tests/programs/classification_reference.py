"""An image classifier trained in the manner of torchvision's classification reference
(`references/classification/train.py`): a small residual network, SGD with momentum and
weight decay, label smoothing, a warm-up then cosine learning-rate schedule stepped every
iteration, bfloat16 autocast, an exponential moving average of the weights updated every
few iterations, and a metric logger that reads the loss and the accuracy every iteration.

    python classification_reference.py --mode lazy|inductor|xlaprof

An expert reading its profile, run lazily: two reads split every step, the metric logger's
`loss.item()` and `acc1.item()` before the step ends, and, every other step, the EMA's
`update_parameters`, which reads `n_averaged` on the host twice (`== 0`, then `> 0`: two reads,
two small graphs, not a recompile). The EMA's update every `model_ema_steps` makes two kinds of
step, each a graph compiled once and reused (a one-time cost). SGD's momentum buffers are made
by the first step (warm-up, once). The learning rate is a Python float the scheduler writes
into the param groups: no recompile. Under torch.compile the model's graph is compiled once
(forward and backward, bfloat16 autocast included), and the EMA's update runs eagerly beside it.
"""
# expect[all]: steps 12
# expect[lazy]: HiddenSync @metric_read
# expect[lazy]: HiddenSync @ema_update
# expect[lazy]: LazyState @step_end | @optimizer_step
# expect[lazy]: Recompile @step_end | one-time cost | more ops at | every k steps
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

epochs, iters_per_epoch, batch_size, num_classes = 2, 6, 8, 10
lr, momentum, weight_decay, label_smoothing = 0.1, 0.9, 1e-4, 0.1
lr_warmup_epochs, model_ema_steps, model_ema_decay, print_freq = 1, 2, 0.998, 3

if mode == "lazy":
    import xlaprof.torch as xt

    device, amp_device = xt.device(), "xlaprof"
else:
    device, amp_device = torch.device("cpu"), "cpu"


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ExponentialMovingAverage(AveragedModel):
    """The reference's EMA: an `AveragedModel` whose average decays."""

    def __init__(self, model, decay, device):
        def ema_avg(avg, param, num_averaged):
            return decay * avg + (1 - decay) * param

        super().__init__(model, device, ema_avg, use_buffers=True)


class MetricLogger:
    def __init__(self):
        self.totals, self.counts = {}, {}

    def update(self, **values):
        for k, v in values.items():
            self.totals[k] = self.totals.get(k, 0.0) + v
            self.counts[k] = self.counts.get(k, 0) + 1

    def __str__(self):
        return "  ".join(f"{k}: {self.totals[k] / self.counts[k]:.4f}" for k in self.totals)


def accuracy(output, target):
    with torch.no_grad():
        return (output.argmax(1) == target).float().mean() * 100


torch.manual_seed(0)
images = torch.randn(epochs * iters_per_epoch * batch_size, 3, 16, 16)
labels = torch.randint(0, num_classes, (epochs * iters_per_epoch * batch_size,))

model = ResNet().to(device)
criterion = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=lr_warmup_epochs * iters_per_epoch)
cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=(epochs - lr_warmup_epochs) * iters_per_epoch)
lr_scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine],
                                                     milestones=[lr_warmup_epochs * iters_per_epoch])
model_ema = ExponentialMovingAverage(model, decay=model_ema_decay, device=device)
train_model = model if mode == "lazy" else torch.compile(model, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))


def train_one_epoch(epoch):
    model.train()
    logger = MetricLogger()
    for i in range(iters_per_epoch):
        start = (epoch * iters_per_epoch + i) * batch_size
        image = images[start:start + batch_size].to(device)
        target = labels[start:start + batch_size].to(device)
        with torch.autocast(amp_device, dtype=torch.bfloat16):
            output = train_model(image)
            loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # optimizer_step
        if i % model_ema_steps == 0:
            model_ema.update_parameters(model)  # ema_update
        lr_scheduler.step()
        logger.update(loss=loss.item(), acc1=accuracy(output, target).item())  # metric_read
        if mode == "lazy":
            xt.step()  # step_end
        if i % print_freq == 0:
            print(f"Epoch: [{epoch}] [{i}/{iters_per_epoch}]  {logger}  lr: {optimizer.param_groups[0]['lr']:.5f}")


for epoch in range(epochs):
    train_one_epoch(epoch)
