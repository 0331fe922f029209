"""An image classifier trained in the manner of PyTorch's "Training a Classifier" tutorial: the
tutorial's small CNN (two convolutions, two poolings, three linear layers), cross entropy, SGD with
momentum, a `DataLoader` over the training set, and the loss summed for the log with
`running_loss += loss.item()` at every iteration, printed every few. The set's size is not a
multiple of the batch size, so each epoch ends on a smaller batch.

    python cifar_tutorial.py --mode lazy|inductor|xlaprof

An expert reading its profile, run lazily: `running_loss += loss.item()` reads the loss inside
every step (the fix is one word: `loss.detach()`, summed on the device and read when printed),
and the epoch's last, smaller batch compiles the step once more (`drop_last=True` on the
loader). SGD's momentum buffers, made at the first update, compile the second step once
(expected). Under torch.compile, the smaller batch makes Dynamo compile the model again, the same
fix; the loss read is of a CPU tensor there and costs nothing.
"""
# expect[all]: steps 12
# expect[lazy]: HiddenSync @running_loss | -> running_loss += loss.detach()
# expect[lazy]: Recompile @to_device | @loader | shuffle=True, drop_last=True)
# expect[lazy]: LazyState @step_end | @optimizer_step
# expect[inductor,xlaprof]: Recompile @net_call | @loader | shuffle=True, drop_last=True)
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")

batch_size, epochs, samples, log_every = 8, 2, 44, 3  # 44 images: five batches of 8, one of 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


torch.manual_seed(0)
trainset = TensorDataset(torch.randn(samples, 3, 32, 32), torch.randint(0, 10, (samples,)))
trainloader = DataLoader(trainset, batch_size=batch_size, shuffle=True)  # loader

net = Net().to(device)
model = net if mode == "lazy" else torch.compile(net, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

for epoch in range(epochs):
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data
        inputs, labels = inputs.to(device), labels.to(device)  # to_device
        optimizer.zero_grad()
        outputs = model(inputs)  # net_call
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()  # optimizer_step
        running_loss += loss.item()  # running_loss
        if i % log_every == log_every - 1:
            print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / log_every:.3f}")
            running_loss = 0.0
        if mode == "lazy":
            xt.step()  # step_end
