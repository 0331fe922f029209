"""torch.compile: stochastic depth picks how many blocks run with a Python int; each new depth
fails a guard until the function hits the recompile limit and runs eagerly from then on.

Reports: https://github.com/pytorch/pytorch/issues/120934 ("torch._dynamo hit
config.cache_size_limit (8)" from a value the loop changed each step, then silently slower);
https://github.com/pytorch/pytorch/issues/135458 (past the limit the whole frame runs eagerly).
"""
# expect: RecompileLimit @planted | depth
import random

import torch


class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(12))
        self.head = torch.nn.Linear(16, 4)
        self.depth = 12

    def forward(self, x):
        for block in self.blocks[: self.depth]:
            x = x + block(x).relu()
        return self.head(x)


torch.manual_seed(0)
random.seed(0)
model = Deep()
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(12):
    model.depth = 12 - step  # planted
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = torch.nn.functional.mse_loss(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
