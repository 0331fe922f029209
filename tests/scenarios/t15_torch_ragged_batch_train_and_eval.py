"""torch code on the xlaprof device: training and evaluation read batches from one helper, and
its last batch of each epoch is smaller; both the training step and the evaluation's sync compile
a graph for it, one cause at two lines.

Report: https://github.com/pytorch/xla/issues/2399 (a new graph for the last, smaller batch, in
training and again in evaluation, until `drop_last=True`).
"""
# expect: Recompile @planted | dimension 0 | 32 | 4 | drop_last
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
data = torch.randn(100, 32)
labels = torch.randint(0, 10, (100,))
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def batches():
    for i in range(0, 100, 32):
        yield data[i : i + 32].to(dev), labels[i : i + 32].to(dev)  # planted


for epoch in range(2):
    model.train()
    for x, y in batches():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xt.step()
    model.eval()
    hits = []
    with torch.no_grad():
        for x, y in batches():
            hits.append((model(x).argmax(1) == y).sum())
            xt.step()
    print(f"epoch {epoch}: {sum(h.item() for h in hits)} of 100 right")
