"""Profiles training the way PyTorch/XLA's profiling example does: the debug variables set, a
profiler server started, a detached trace into a log folder while training runs; each step under
a `StepTrace` and its forward under a `Trace`."""

import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.profiler as xp

os.environ["XLA_IR_DEBUG"] = "1"
os.environ["XLA_HLO_DEBUG"] = "1"

if __name__ == "__main__":
    logdir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
    assert os.path.exists(logdir)
    server = xp.start_server(9012)
    tracer = xp.trace_detached("localhost:9012", logdir, duration_ms=1500)
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
    for step in range(8):
        with xp.StepTrace("train_step", step_num=step):
            with xp.Trace("forward"):
                loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        xm.add_step_closure(lambda s, l: print(f"step: {s}, loss: {l.item():.8f}", flush=True), args=(step, loss))
    xm.mark_step()
    tracer.join()
    print("profiles:", sorted(os.listdir(logdir)))
