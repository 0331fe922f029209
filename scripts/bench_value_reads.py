"""What a value read inside a step costs on the xlaprof device, beside torch's CPU eager in the
same run. A value read computes what it needs at once; the live tensors its graph computes on the
way become device data with it, so the rest of the step does not compute them again.

- LBFGS (strong Wolfe line search, 20 inner iterations a step) fitting a 512x256 linear map: each
  iteration reads values on the host between in-place updates of the parameters.
- An MLP (784-1024-1024-10, batch 256) trained with AdamW, its loss read with `.item()` after
  the step (where it costs nothing: already computed) or before `backward()` (a hidden sync).

For each: the median wall time of a step (after warm-up steps, each step waited for), the
syncs, compiles and graph nodes computed per step (from the profile). Prints one table.

    python scripts/bench_value_reads.py [STEPS]
"""
import statistics
import sys
import time

import torch

import xlaprof as xp
import xlaprof.torch as xt

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
WARMUP = 3


def lbfgs_problem(device):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(256, 512, generator=g).mul_(0.05).to(device).requires_grad_()
    x = torch.randn(1024, 512, generator=g).to(device)
    y = torch.randn(1024, 256, generator=g).to(device)
    # No early stop: every step runs its 20 iterations, whatever the progress.
    opt = torch.optim.LBFGS([w], line_search_fn="strong_wolfe", tolerance_grad=-1.0, tolerance_change=-1.0)

    def closure():
        opt.zero_grad()
        loss = (x @ w.T - y).pow(2).mean() + 1e-3 * w.pow(2).sum()
        loss.backward()
        return loss

    return lambda: opt.step(closure)


def mlp_problem(device, read_early):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 784, generator=g).to(device)
    y = torch.randint(0, 10, (256,), generator=g).to(device)

    def step():
        loss = torch.nn.functional.cross_entropy(net(x), y)
        if read_early:
            loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if device != "cpu":
            xt.step()
        return loss.item()

    return step


def timed(step, device):
    for _ in range(WARMUP):
        step()
    if device != "cpu":
        xt.wait()
    times = []
    with xp.profile() as p:
        for _ in range(STEPS):
            t = time.perf_counter()
            step()
            if device != "cpu":
                xt.wait()
            times.append(time.perf_counter() - t)
    per_step = None
    if device != "cpu":
        s = p.summary()
        nodes = sum(m["total"] for m in p.metrics()["metrics"] if m["name"] == "GraphSize")
        per_step = (s["syncs"] / STEPS, s["compiles"] / STEPS, nodes / STEPS)
    return statistics.median(times), per_step


def main():
    dev = xt.device()
    rows = []
    for name, make in [("LBFGS strong Wolfe", lbfgs_problem),
                       ("MLP, loss read after the step", lambda d: mlp_problem(d, False)),
                       ("MLP, loss read before backward", lambda d: mlp_problem(d, True))]:
        lazy, counts = timed(make(dev), dev)
        eager, _ = timed(make("cpu"), "cpu")
        rows.append((name, lazy, eager, counts))
    print(f"{'workload':34} {'xlaprof':>10} {'CPU eager':>10} {'ratio':>6} {'syncs':>6} {'compiles':>8} {'nodes':>7}  (per step)")
    for name, lazy, eager, (syncs, compiles, nodes) in rows:
        print(f"{name:34} {lazy * 1e3:8.2f}ms {eager * 1e3:8.2f}ms {lazy / eager:5.2f}x {syncs:6.1f} {compiles:8.1f} {nodes:7.0f}")


if __name__ == "__main__":
    main()
