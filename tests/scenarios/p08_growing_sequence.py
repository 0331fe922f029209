"""Greedy decoding that appends one token per step: the sequence grows every step.

Report: https://github.com/pytorch/xla/issues/8901 (GPT-2 `generate` on XLA finished with 5 new
tokens but seemed stuck with 50: every new length compiled a new graph).
"""
# expect: RecompileStorm @planted | dimension 1 | preallocate
import xlaprof as xp

emb = xp.nn.Linear(1, 16, seed=1)
head = xp.nn.Linear(16, 1, seed=2)
seq = xp.ones(1, 4)

with xp.no_grad():
    for i in range(8):
        h = emb(seq.reshape(-1, 1)).tanh()
        nxt = head(h).reshape(1, -1)[:, -1:]
        seq = xp.cat([seq, nxt], dim=1)  # planted
        xp.step()
