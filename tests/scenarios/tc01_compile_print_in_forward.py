"""torch.compile: a print inside `forward` breaks the graph at every call.

Reports: https://github.com/pytorch/pytorch/pull/116981 (a print in a compiled loop broke the
graph, and the break went unreported); https://github.com/pytorch/torchdynamo/issues/943 (most
graph breaks seen in TorchBench: numpy, `.item()`/`.tolist()`, printing).
"""
# expect: GraphBreak @planted | print
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.a(x).relu()
        print("hidden mean", float(h.detach().mean()))  # planted
        return self.b(h)


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
