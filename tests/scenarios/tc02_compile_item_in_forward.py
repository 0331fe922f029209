"""torch.compile: `.item()` inside `forward` (a scale read as a Python number) breaks the graph.

Report: https://github.com/pytorch/torchdynamo/issues/943 (`.item()` and `.tolist()` among the
most common graph breaks); PyTorch/XLA's counterpart is the hidden sync of a value read.
"""
# expect: GraphBreak @planted | item
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.a(x)
        scale = h.abs().max().item()  # planted
        return self.b(torch.tanh(h / scale))


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
