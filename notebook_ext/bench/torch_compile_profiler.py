"""What profiling costs a torch.compile program: the GPT-2 training step of samples/torch (small
config, AdamW), compiled by inductor, with the profiler watching (recording into a profile) and
without, in the same process.

Two copies of the model with the same weights are compiled: one before the profiler watches
(its graphs' runs report nothing), one while it records (each run of a captured graph is timed
and recorded, each optimizer step is a step of the profile). Their steady steps are timed in
alternating rounds so both see the same machine; the ratio is the profiler's cost. Their first
steps (Dynamo, AOTAutograd and inductor's C++ compile, caches off) are timed too: the watch reads
torch's structured compile trace, which makes torch describe what it compiles.

    .venv/bin/python notebook_ext/bench/torch_compile_profiler.py
"""

import os

# Both first steps compile from scratch (inductor would otherwise find the first model's code
# in its cache for the second).
os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"

import pathlib  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import xlaprof as xp  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "samples" / "torch"))
from models import MODELS  # noqa: E402

build, make_batch, loss_of = MODELS["gpt2"]


def trainer(options: dict):
    torch.manual_seed(0)
    model = build()
    # Inductor with the same settings, a backend of its own (`options`): Dynamo compiles the
    # second model anew instead of reusing the first one's code.
    compiled = torch.compile(model, options=options)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = make_batch(torch.Generator().manual_seed(1))

    def step():
        loss = loss_of(compiled, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


ROUNDS = 30


def timed(fn, n: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def first_step(watched: bool) -> float:
    """The first step in a process of its own: what compiling costs, with the profiler
    watching or not (in one process the second model's compile reuses the first one's work)."""
    import subprocess

    code = (
        "import sys, time; sys.argv = ['x']; import torch_compile_profiler as b; import xlaprof as xp\n"
        f"ctx = xp.profile() if {watched} else __import__('contextlib').nullcontext()\n"
        "with ctx:\n    step = b.trainer({})\n    print(b.timed(step))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    off = trainer({})
    for _ in range(3):
        off()
    with xp.profile() as p:
        on = trainer({"max_autotune": False})
        for _ in range(3):
            on()
    rounds_off, rounds_on = [], []
    for _ in range(ROUNDS):
        rounds_off.append(timed(off, 10))
        # A profile of its own each round: recording, the graphs' runs and the steps in it.
        with xp.profile() as p:
            rounds_on.append(timed(on, 10))
    s = p.summary()
    c = s["torch_compile"]
    step_off, step_on = statistics.median(rounds_off), statistics.median(rounds_on)
    first_off, first_on = first_step(False), first_step(True)
    print("GPT-2 (2 layers, d=64, seq 32, batch 4) AdamW step, torch.compile (inductor), CPU, "
          f"{torch.get_num_threads()} threads; medians of {ROUNDS} rounds of 10 steps, alternating:")
    print(f"  steady step   profiler off {step_off * 1e3:.3f} ms, recording {step_on * 1e3:.3f} ms "
          f"(cost {100 * (step_on / step_off - 1):+.2f} %, {(step_on - step_off) * 1e6:+.1f} us)")
    print(f"  first step    profiler off {first_off:.2f} s, recording {first_on:.2f} s (each in a process of its own) "
          f"(cost {100 * (first_on / first_off - 1):+.1f} %)")
    assert c is not None and c["runs"] > 0, "the profiler saw no compile"
    print(f"  last round    {c['runs']} graph runs and {s['steps']} steps recorded")


if __name__ == "__main__":
    main()
