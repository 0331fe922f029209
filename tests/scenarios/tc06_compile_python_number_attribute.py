"""torch.compile: a Python float attribute read in `forward` (a temperature annealed by the loop)
is a constant of the graph; its new value fails a guard.

Report: https://github.com/pytorch/pytorch/issues/114293 (a Python number passed each step,
`L['end'] == 10`, recompiled at every new value).
"""
# expect: Recompile @planted | temperature
import torch


class Distiller(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 10)
        self.temperature = 4.0

    def forward(self, x):
        return torch.log_softmax(self.net(x) / self.temperature, dim=-1)


torch.manual_seed(0)
model = Distiller()
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(6):
    model.temperature = 4.0 - 0.5 * step  # planted
    x, target = torch.randn(8, 16), torch.randint(0, 10, (8,))
    loss = torch.nn.functional.nll_loss(compiled(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
