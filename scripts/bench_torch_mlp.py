"""PyTorch's figures for `xlaprof bench`'s MLP workload, to set beside ours in the same run.

MLP 784-512-512-10 (ReLU), batch 64, softmax cross entropy (mean over the batch), plain SGD with
lr 0.01: the JAX peer's `bench_c_mlp.py` workload. Timed as JAX's peer times it: the first step
(for torch.compile: tracing and compiling included), then the median wall time of steps 5..N,
each step waited for (`torch.cuda.synchronize` on a GPU). Prints one JSON object.

    python scripts/bench_torch_mlp.py [STEPS] [--device cuda|cpu] [--no-compile]
"""
import json
import statistics
import sys
import time

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 30
DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else (
    "cuda" if torch.cuda.is_available() else "cpu")
SIZES = [784, 512, 512, 10]
BATCH, LR = 64, 0.01


def wait():
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def model():
    torch.manual_seed(0)
    layers = []
    for i, (din, dout) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(torch.nn.Linear(din, dout))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(DEVICE)


def timed(compiled):
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = torch.compile(step)
    gen = torch.Generator().manual_seed(0)
    xs = torch.randn(STEPS + 1, BATCH, 784, generator=gen).to(DEVICE)
    ys = torch.randint(0, 10, (STEPS + 1, BATCH), generator=gen).to(DEVICE)
    wait()
    times = []
    for i in range(STEPS + 1):
        t = time.perf_counter()
        step(xs[i], ys[i])
        wait()
        times.append((time.perf_counter() - t) * 1e3)
    return {"first_step_ms": times[0], "median_step_ms_steps5_n": statistics.median(times[5:])}


result = {"torch": torch.__version__, "device": DEVICE, "steps": STEPS}
if DEVICE.startswith("cuda"):
    result["device_name"] = torch.cuda.get_device_name()
result["eager"] = timed(False)
if "--no-compile" not in sys.argv:
    try:
        result["compile"] = timed(True)
    except Exception as e:  # torch.compile needs a C compiler and Triton; say why it is missing
        result["compile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
print(json.dumps(result))
