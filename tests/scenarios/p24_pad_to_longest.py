"""Each batch padded to its own longest sequence (dynamic padding).

Report: https://github.com/facebookresearch/fairseq/issues/4198 (RoBERTa on torch-xla:
PT_XLA_DEBUG said "CompileTime too frequent: 429 counts during 493 steps"; pad_to_length=512
fixed it).
"""
# expect: RecompileStorm @planted | dimension 1
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
w = xp.tensor(rng.standard_normal((1, 8), dtype=np.float32) * 0.1, requires_grad=True)
opt = xp.optim.SGD([w], lr=0.01)


def pad_to_longest(seqs):
    longest = max(len(s) for s in seqs)
    return np.stack([np.pad(s, (0, longest - len(s))) for s in seqs]).astype(np.float32)


for i in range(8):
    seqs = [rng.standard_normal(rng.integers(5, 40)) for _ in range(4)]
    tokens = xp.tensor(pad_to_longest(seqs))  # planted
    h = tokens.unsqueeze(2) @ w
    loss = h.pow(2.0).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
