"""Variable-length sequences padded to one fixed length.

Report: https://github.com/facebookresearch/fairseq/issues/4198 (the fix for 429 compiles in
493 steps: `pad_to_length=512`).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
w = xp.tensor(rng.standard_normal((1, 8), dtype=np.float32) * 0.1, requires_grad=True)
opt = xp.optim.SGD([w], lr=0.01)

for i in range(8):
    seqs = [rng.standard_normal(rng.integers(5, 40)) for _ in range(4)]
    batch = np.stack([np.pad(s, (0, 40 - len(s))) for s in seqs]).astype(np.float32)
    tokens = xp.tensor(batch)
    loss = (tokens.unsqueeze(2) @ w).pow(2.0).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
