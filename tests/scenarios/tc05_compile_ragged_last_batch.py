"""torch.compile: the last batch of an epoch is smaller; its new size fails a guard.

Reports: https://github.com/pytorch/pytorch/issues/139474 (`size mismatch at index 2` recompiled
until the limit); https://github.com/pytorch/pytorch/issues/94640 (graph batches of varying size
recompiled every step).
"""
# expect: Recompile @planted | size mismatch
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
features, targets = torch.randn(52, 16), torch.randn(52, 4)
for epoch in range(2):
    for start in range(0, 52, 16):
        x = features[start : start + 16]  # planted
        y = targets[start : start + 16]
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
