"""Position ids made with `arange(length)` on the device, the length growing each step.

Report: https://github.com/huggingface/transformers/pull/31129 (a KV cache and positions that
grow with every decoded token recompile each step; a static cache indexed in place does not).
"""
# expect: RecompileStorm @planted | dimension 0 | iota | preallocate
import xlaprof as xp

table = xp.nn.Linear(1, 8, seed=3)
total = xp.zeros(8)

with xp.no_grad():
    for i in range(8):
        positions = xp.arange(0, 4 + i)  # planted
        total = total + table(positions.reshape(-1, 1)).sum(0)
        xp.step()
