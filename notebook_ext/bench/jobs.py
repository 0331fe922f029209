"""What profiling a job of several processes costs, and how fast its profile opens:

- recording a collective, the process recorded to a file (the call reported on entry and on
  leaving, each written out): a function of ``all_reduce``'s signature doing nothing, wrapped as
  torch.distributed's collectives are, against the bare call, in blocks taking turns to go first
  (the median of the blocks' differences); and in context, a real ``all_reduce`` of one float on a
  gloo group of one process, both ways;
- opening a job: ``tests/jobs/train_ddp.py`` run for 200 steps under torchrun with 4 ranks (gloo,
  CPU eager), then ``xlaprof report job.xlaprof`` (the command, when built) and
  ``xp.load_job`` (the ranks' files read, each analysed, the job analysed), best of 3.

    .venv/bin/python notebook_ext/bench/jobs.py
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The whole process recorded to a file, as a job's rank is (every collective written out).
_SCRATCH = tempfile.mkdtemp()
os.environ["XLAPROF_PROFILE"] = os.path.join(_SCRATCH, "bench.xlaprof")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import xlaprof as xp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def per_call_us(fn, calls=2000):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def in_turn(calls):
    """Per-call times of each of `calls` (name: function), 16 blocks of 2,000 each, taking turns
    to go first (the one measured first in a block pays for what the last one left)."""
    timed = {name: [] for name in calls}
    names = list(calls)
    for block in range(16):
        for name in (names if block % 2 else names[::-1]):
            timed[name].append(per_call_us(calls[name]))
    return timed


def collective_cost():
    from xlaprof import _distributed

    x = torch.ones(1)

    # The recording itself: torch's all_reduce signature around nothing, wrapped as
    # torch.distributed's collectives are, against the bare call.
    def bare(tensor, op=None, group=None, async_op=False):
        return None

    wrapped_bare = _distributed._wrap("all_reduce", "tensor", bare)
    timed = in_turn({"recorded": lambda: wrapped_bare(x), "bare": lambda: bare(x)})
    paired = sorted(r - b for r, b in zip(timed["recorded"], timed["bare"]))
    print(f"recording a collective (entered and left, each written to the profile file): "
          f"{statistics.median(paired):.2f} us per call (median of 16 blocks of 2,000; quartiles "
          f"{paired[4]:.2f} to {paired[11]:.2f})")

    # In context: a real all_reduce of one float on a gloo group of one process, whose own time
    # varies by more than the recording costs.
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    wrapped = dist.all_reduce
    plain = dist.distributed_c10d.all_reduce.__wrapped__
    assert getattr(wrapped, "_xlaprof", False), "the collectives are wrapped while a profile records"
    for _ in range(200):
        wrapped(x)
        plain(x)
    timed = in_turn({"recorded": lambda: wrapped(x), "plain": lambda: plain(x)})
    dist.destroy_process_group()
    print(f"  in context, all_reduce of 1 float on gloo, 1 process: {statistics.median(timed['plain']):.2f} us "
          f"plain, {statistics.median(timed['recorded']):.2f} us recorded (medians of 16 blocks)")


def job_open():
    binary = ROOT / "target" / "release" / "xlaprof"
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, XLAPROF_PROFILE=str(Path(d) / "job.xlaprof"))
        start = time.perf_counter()
        subprocess.run([torchrun, "--standalone", "--nproc_per_node", "4", str(ROOT / "tests" / "jobs" / "train_ddp.py"),
                        "--steps", "200"], env=env, cwd=d, check=True, capture_output=True)
        ran = time.perf_counter() - start
        files = sorted(Path(d).glob("job.rank*.xlaprof"))
        size = sum(f.stat().st_size for f in files)
        print(f"a 4-rank, 200-step DDP job ran in {ran:.1f} s; its profile: {len(files)} files, {size / 1024:.0f} KiB")
        if binary.exists():
            times = []
            for _ in range(3):
                start = time.perf_counter()
                subprocess.run([str(binary), "report", str(Path(d) / "job.xlaprof")], check=True,
                               capture_output=True)
                times.append(time.perf_counter() - start)
            print(f"  xlaprof report job.xlaprof: {min(times):.3f} s (best of 3)")
        times = []
        for _ in range(3):
            start = time.perf_counter()
            job = xp.load_job(str(Path(d) / "job.xlaprof"))
            times.append(time.perf_counter() - start)
        print(f"  xp.load_job: {min(times):.3f} s (best of 3); {job.collectives_in_common} collectives in "
              f"common, {len(job.findings)} findings across ranks")


if __name__ == "__main__":
    collective_cost()
    job_open()
