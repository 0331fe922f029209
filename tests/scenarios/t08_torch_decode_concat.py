"""torch code on the xlaprof device: greedy decoding that appends each new token to the sequence
with `torch.cat`, a step per token: the sequence grows at the concatenation's line, and every
length is a new graph.

Report: https://github.com/pytorch/xla/issues/8901 (GPT-2 `generate` on XLA: every new length
compiled a new graph); the remedy is a preallocated buffer or a static cache.
"""
# expect: RecompileStorm @planted | dimension 1 | grows step by step | preallocate
import torch

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
embed = torch.nn.Embedding(32, 16).to(dev)
head = torch.nn.Linear(16, 32).to(dev)
seq = torch.zeros(1, 2, dtype=torch.long).to(dev)
with torch.no_grad():
    for _ in range(8):
        logits = head(embed(seq).mean(dim=1))
        next_token = logits.argmax(dim=-1, keepdim=True)
        seq = torch.cat([seq, next_token], dim=1)  # planted
        xt.step()
print(seq.cpu().tolist())
