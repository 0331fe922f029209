"""torch.compile: the optimizer step and an LR scheduler compiled together, with the learning
rate a tensor, as PyTorch's recipe says. Nothing to report (PyTorch's own deliberate breaks
around the optimizer's step are not the program's).

Reports: https://github.com/pytorch/tutorials/pull/2874 (the recipe: a tensor learning rate so
the scheduler does not recompile the step); https://github.com/pytorch/pytorch/issues/130467.
"""
# expect: nothing
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-2))
sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=5)


@torch.compile(fullgraph=False)
def update():
    opt.step()
    sched.step()


for step in range(8):
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = torch.nn.functional.mse_loss(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    update()
