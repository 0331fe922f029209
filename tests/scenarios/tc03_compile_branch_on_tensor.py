"""torch.compile: a Python `if` on a tensor's value (data-dependent control flow) breaks the graph.

Reports: https://github.com/pytorch/pytorch/issues/119186 (a conditional on a computed value split
the function; no log said so); https://github.com/pytorch/torchdynamo/issues/1883 (`if y < 0`
on `x.sum()`: data-dependent control flow).
"""
# expect: GraphBreak @planted
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.a(x)
        if h.mean() > 0:  # planted
            h = h * 0.5
        return self.b(h.relu())


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
