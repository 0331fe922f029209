"""torch.compile: a standard compiled training loop (fixed batch size, model compiled once,
eager AdamW). Nothing to report.

Reference: PyTorch's torch.compile tutorial (https://pytorch.org/tutorials/intermediate/torch_compile_tutorial.html).
"""
# expect: nothing
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(8):
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = torch.nn.functional.mse_loss(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 4 == 0:
        print(step, loss.item())
