"""torch.compile: an input starts requiring grad halfway (a frozen embedding unfrozen); the
`requires_grad` guard fails.

Report: https://github.com/pytorch/pytorch/issues/131975 (`a.requires_grad_(True)` between two
calls recompiled: "tensor 'L['a']' requires_grad mismatch").
"""
# expect: Recompile @planted | requires_grad
import torch


@torch.compile
def score(queries, keys):
    return torch.softmax(queries @ keys.T / 4.0, dim=-1).sum(dim=0)


torch.manual_seed(0)
keys = torch.randn(16, 8)
total = 0.0
for step in range(6):
    queries = torch.randn(4, 8)
    if step == 3:
        keys.requires_grad_(True)  # planted
    out = score(queries, keys)
    total += float(out.sum())
print(total)
