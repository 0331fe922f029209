"""torch.compile: the compiled optimizer step reads a float learning rate that an LR scheduler
changes every step: the guard on `param_groups[0]['lr']` fails.

Report: https://github.com/pytorch/pytorch/issues/120934 (adding an LR scheduler to a compiled
step hit the recompile limit: "last reason: L['self'].param_groups[0]['lr'] == 4.83e-05").
"""
# expect: Recompile @planted | lr
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=5)


@torch.compile(fullgraph=False)
def update():
    opt.step()
    sched.step()  # planted


for step in range(6):
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    update()
