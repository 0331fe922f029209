"""The batch size changes from step to step, and the batch is made on the device.

Report: https://github.com/pytorch/xla/issues/2120 (a Reformer loop became very slow; the
maintainers found the input shapes varied every step and advised bucketing).
"""
# expect: RecompileStorm @planted | dimension 0 | randn
import xlaprof as xp

model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.05)
sizes = [16, 12, 9, 14, 7, 11]

for i in range(8):
    bs = sizes[i % len(sizes)]
    x = xp.randn(bs, 32, seed=i)  # planted
    target = x.sum(1, keepdim=True) * 0.1
    loss = ((model(x)[:, :1] - target) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
