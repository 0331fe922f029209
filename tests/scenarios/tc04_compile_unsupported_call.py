"""torch.compile: a call Dynamo cannot trace (`copy.deepcopy` of a tensor) splits `forward`.

Report: https://github.com/pytorch/torchdynamo/issues/943 (third-party and standard-library calls,
`copy.deepcopy` among them, are the most common graph breaks of TorchBench models).
"""
# expect: GraphBreak @planted | deepcopy
import copy

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.a(x).relu()
        skip = copy.deepcopy(h.detach())  # planted
        return self.b(h + skip)


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(6):
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = torch.nn.functional.mse_loss(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
