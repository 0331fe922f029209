"""torch.compile: switching the model to `eval()` for a validation pass fails the `training`
guard and compiles `forward` again.

Report: https://github.com/pytorch/pytorch/issues/110803 (toggling `model.train()` and
`model.eval()` on a compiled model caused guard failures every time).
"""
# expect: Recompile @planted | training
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.drop = torch.nn.Dropout(0.1)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(self.drop(self.a(x).relu()))


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
    if step == 2:
        model.eval()  # planted
        val = torch.nn.functional.mse_loss(compiled(torch.randn(8, 16)), torch.randn(8, 4))
        print("validation", val.item())
        model.train()
