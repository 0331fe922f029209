"""What taking a view costs on the host on the xlaprof device, beside torch's CPU eager in the
same run. A view on the device is recorded lazily and reports torch's layout (its strides and
storage offset in its root): a reshape, a transpose, a permute, an unsqueeze, an alias, a slice
or a select (and so the pieces of a split or an unbind) is made and laid out by the native
dispatcher, whatever its base's layout; a diagonal by its Python lowering and torch's rule; any
other view op by running it on a meta tensor laid out as its argument.

For each view expression of a 64x48x32 float tensor: the median time to take it (microseconds,
over REPEATS takes, nothing computed), and the ratio to CPU eager. Prints one table.

    .venv/bin/python notebook_ext/bench/torch_views.py [REPEATS]
"""
import statistics
import sys
import time

import torch

import xlaprof.torch as xt

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000

VIEWS = [
    "x[1]", "x[:, 3:9]", "x.transpose(0, 2)", "x.permute(2, 0, 1)",
    "x.diagonal(0, 1, 2)", "x[1].t()", "x.transpose(0, 1)[2]", "x.unfold(2, 4, 4)",
    "x.unbind(0)", "x.split(8, 1)", "x.view(64, -1)", "x + 1",
]


def per_take_us(expr, x):
    code = compile(expr, "<view>", "eval")
    env = {"x": x}
    for _ in range(50):
        eval(code, env)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(REPEATS // 5):
            eval(code, env)
        times.append((time.perf_counter() - start) / (REPEATS // 5) * 1e6)
    return statistics.median(times)


def main():
    cpu = torch.randn(64, 48, 32)
    dev = cpu.to(xt.device())
    print(f"{'view':<24}{'xlaprof us':>12}{'CPU eager us':>14}{'ratio':>8}")
    for expr in VIEWS:
        ours, eager = per_take_us(expr, dev), per_take_us(expr, cpu)
        print(f"{expr:<24}{ours:>12.1f}{eager:>14.1f}{ours / eager:>8.1f}")


if __name__ == "__main__":
    main()
