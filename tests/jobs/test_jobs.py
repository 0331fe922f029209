"""Jobs of several processes, profiled as one: `train_ddp.py` under torchrun with 4 ranks on gloo
(eager, inductor, and the lazy device through PyTorch/XLA's API), clean and with one cause
planted on one rank. The job's profile (`XLAPROF_PROFILE=job.xlaprof`: each rank writes `job.rankN.xlaprof`)
must name the rank and the line, and say nothing across ranks of a clean job."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xlaprof as xp

HERE = Path(__file__).parent
SCRIPT = HERE / "train_ddp.py"
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
RANKS = 4


def planted_line(text: str) -> int:
    """The line of `train_ddp.py` holding `text` and the `# planted` mark."""
    for n, line in enumerate(SCRIPT.read_text().splitlines(), 1):
        if text in line and "# planted" in line:
            return n
    raise AssertionError(f"no planted line with {text!r}")


def torchrun(tmp_path: Path, *args: str, lazy: bool = False) -> list:
    # (--standalone: a free port of its own, beside other tests running jobs)
    command = [TORCHRUN, "--standalone", "--nproc_per_node", str(RANKS)]
    command += ["-m", "xlaprof.torch_xla", str(SCRIPT), "--xla"] if lazy else [str(SCRIPT)]
    return command + list(args)


def run_job(tmp_path: Path, *args: str, lazy: bool = False) -> "xp.Job":
    env = dict(os.environ, XLAPROF_PROFILE=str(tmp_path / "job.xlaprof"))
    done = subprocess.run(torchrun(tmp_path, *args, lazy=lazy), capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "mean loss" in done.stdout, done.stdout
    return xp.load_job(str(tmp_path / "job.xlaprof"))


def test_a_clean_job_is_one_profile_of_its_ranks_with_nothing_across_them(tmp_path):
    job = run_job(tmp_path)
    # One file per rank, none for the launcher; the job reads them in rank order.
    assert [Path(f).name for f in job.files] == [f"job.rank{r}.xlaprof" for r in range(RANKS)]
    assert not (tmp_path / "job.xlaprof").exists()
    assert [r["rank"] for r in job.ranks] == list(range(RANKS))
    # DDP's set-up (the parameters broadcast from rank 0), 12 steps of one DDP bucket each, the
    # loss's all_reduce, the barrier before teardown: every one matched, left by all.
    assert job.collectives_in_common == 15, job.report()
    assert job.findings == [], job.report()
    assert "Across ranks: nothing to report" in job.report()
    for p in job.profiles():
        assert "the file ends" not in p.report()
    # The notebook's page: the job, then each rank's own page.
    page = job._repr_html_()
    assert "Job: 4 ranks, 15 collectives in common" in page and "nothing to report" in page
    assert all(f"<summary>rank {r}</summary>" in page for r in range(RANKS))


def test_a_rank_slowed_by_its_data_is_named_with_the_loaders_line(tmp_path):
    job = run_job(tmp_path, "--slow-rank", "2")
    stragglers = [f for f in job.findings if f["kind"] == "Straggler"]
    assert len(stragglers) == 1, job.report()
    s = stragglers[0]
    assert s["rank"] == 2, job.report()
    loop = next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1)
                if "in enumerate(loader)" in line)
    assert "waiting for data" in s["message"] and f"train_ddp.py:{loop}" in s["message"], s["message"]
    assert "workers" in s["advice"]
    assert "straggler" in job.html() and "rank 2 is the straggler" in job.html()
    assert not [f for f in job.findings if f["kind"] != "Straggler"], job.report()


def test_a_rank_whose_batch_differs_is_named_with_its_recompile_and_the_line(tmp_path):
    job = run_job(tmp_path, "--ragged-rank", "1", lazy=True)
    diverging = [f for f in job.findings if f["kind"] == "Divergence"]
    assert [f["rank"] for f in diverging] == [1], job.report()
    message = diverging[0]["message"]
    assert "compiled" in message and "the other ranks did not" in message, message
    assert f"train_ddp.py:{planted_line('x[:5]')}" in message, message


def test_an_inductor_clean_job_has_nothing_across_ranks(tmp_path):
    """torch.compile of the DDP model: its buckets are still seen (the hook is registered when
    the model is made, so Dynamo traces DDP's forward untouched), one step per iteration."""
    job = run_job(tmp_path, "--compile")
    assert job.findings == [], job.report()
    assert job.collectives_in_common == 15, job.report()
    for p in job.profiles():
        assert p.steps == 12, p.report()


def test_a_lazy_clean_job_has_nothing_across_ranks(tmp_path):
    job = run_job(tmp_path, lazy=True)
    assert job.findings == [], job.report()
    assert job.collectives_in_common == 15, job.report()
    # The lazy device's collectives go through the host, and say so.
    assert job.ranks[0]["last_collective"].startswith("barrier, through the host #15"), job.ranks
    for p in job.profiles():
        assert p.steps == 12, p.report()


def test_a_rank_that_skips_a_collective_shows_the_job_stuck_while_it_runs(tmp_path):
    """Read while the job hangs: the ranks inside the all_reduce, the rank that never came, and
    both lines."""
    env = dict(os.environ, XLAPROF_PROFILE=str(tmp_path / "job.xlaprof"))
    job_process = subprocess.Popen(torchrun(tmp_path, "--skip-rank", "3"), cwd=str(tmp_path), env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        stuck = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not stuck:
            time.sleep(1.0)
            if len(list(tmp_path.glob("job.rank*.xlaprof"))) < RANKS:
                continue
            job = xp.load_job(str(tmp_path / "job.xlaprof"))
            stuck = [f for f in job.findings if f["kind"] == "Stuck"]
        assert job_process.poll() is None, "the job should still hang"
        assert len(stuck) == 1, job.report()
        message = stuck[0]["message"]
        assert stuck[0]["rank"] == 3
        assert message.startswith("ranks 0, 1, 2 are stuck in all_reduce #14 of group world"), message
        assert f"train_ddp.py:{planted_line('dist.all_reduce(total)')}" in message, message
        assert "rank 3 never entered it" in message, message
        # The skipping rank's last collective: the last step's gradient bucket, at backward().
        backward = next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1)
                        if "loss.backward()" in line)
        assert f"DDP gradient bucket #13 of group world at train_ddp.py:{backward}" in message, message
    finally:
        os.killpg(job_process.pid, 9)
        job_process.wait()


def test_fsdp_gathers_and_reduce_scatters_are_the_jobs_collectives(tmp_path):
    env = dict(os.environ, XLAPROF_PROFILE=str(tmp_path / "job.xlaprof"))
    done = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node", "2", str(HERE / "train_fsdp.py")],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    job = xp.load_job(str(tmp_path / "job.xlaprof"))
    assert job.findings == [], job.report()
    # Every gather and reduce-scatter matched on both ranks, the barrier last.
    exported = tmp_path / "rank0.json"
    job.profiles()[0].export(str(exported), "json")
    ops = [c["op"] for c in json.loads(exported.read_text())["profile"]["collectives"]]
    assert {"all_gather_single", "reduce_scatter_single"} <= set(ops) or \
        {"all_gather_into_tensor", "reduce_scatter_tensor"} <= set(ops), ops
    assert ops[-1] == "barrier" and job.collectives_in_common == len(ops), (ops, job.report())


def test_processes_spawned_without_torchrun_are_ranks_of_one_job(tmp_path):
    """torch.multiprocessing.spawn: no RANK in the environment; each process learns its rank when
    it joins the group, and its profile takes the rank's name then. The parent, no rank, records
    the name asked for, and the job is read from the ranks."""
    import socket

    with socket.socket() as s:  # a free port for the group's rendezvous
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, XLAPROF_PROFILE=str(tmp_path / "job.xlaprof"))
    env.pop("RANK", None), env.pop("WORLD_SIZE", None)
    done = subprocess.run([sys.executable, str(HERE / "spawn_ddp.py"), port], capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    job = xp.load_job(str(tmp_path / "job.xlaprof"))
    assert [Path(f).name for f in job.files] == ["job.rank0.xlaprof", "job.rank1.xlaprof"]
    assert [r["rank"] for r in job.ranks] == [0, 1]
    # DDP's set-up, 5 steps of one bucket each, and the barrier.
    assert job.collectives_in_common == 7, job.report()
    assert job.findings == [], job.report()


def test_a_path_with_no_ranks_says_what_a_job_writes(tmp_path):
    with pytest.raises(xp.ProfileError, match=r"job\.rank0\.xlaprof"):
        xp.load_job(str(tmp_path / "job.xlaprof"))


IMAGENET_STYLE = HERE / "ddp_imagenet_style.py"


def marked(name: str) -> str:
    """`ddp_imagenet_style.py:N`, N the line ending with `# name`."""
    for n, line in enumerate(IMAGENET_STYLE.read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# {name}"):
            return f"{IMAGENET_STYLE.name}:{n}"
    raise AssertionError(f"no line marked {name}")


def run_imagenet_style(tmp_path: Path, mode: str) -> "xp.Job":
    command = [TORCHRUN, "--standalone", "--nproc_per_node", "2"]
    command += ["-m", "xlaprof.torch_xla"] if mode == "lazy" else []
    command += [str(IMAGENET_STYLE), "--mode", mode]
    env = dict(os.environ, XLAPROF_PROFILE=str(tmp_path / "job.xlaprof"))
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "epoch 2: loss" in done.stdout, done.stdout
    return xp.load_job(str(tmp_path / "job.xlaprof"))


def test_torch_compile_of_a_ddp_model_reads_as_expected_one_time_costs(tmp_path):
    """`torch.compile(DDP(model))`: DDP's logger breaks no graph of the model, and the evaluation
    compiles each function on the call's way once more: both expected once, nothing to fix, on
    every rank."""
    job = run_imagenet_style(tmp_path, "inductor")
    assert job.findings == [], job.report()
    for p in job.profiles():
        assert p.steps == 12, p.report()
        found = {d["kind"]: d for d in p.diagnostics() if d["kind"] in ("GraphBreak", "Recompile")}
        assert set(found) == {"GraphBreak", "Recompile"}, p.report()
        brk, evaluation = found["GraphBreak"], found["Recompile"]
        assert brk["once"] and brk["location"].startswith(marked("train_call")), brk
        assert "no graph is split" in brk["message"] and brk["advice"].startswith("nothing to fix"), brk
        assert evaluation["once"] and evaluation["location"].startswith(marked("eval_call")), evaluation
        assert evaluation["message"].startswith("expected once: torch.compile compiled"), evaluation
        assert "for calls under `torch.no_grad()`" in evaluation["message"], evaluation


def test_lazily_ddps_gradient_reduce_through_the_host_is_named_for_itself(tmp_path):
    job = run_imagenet_style(tmp_path, "lazy")
    assert job.findings == [], job.report()
    for p in job.profiles():
        hidden = {d["location"].split(" ")[0]: d for d in p.diagnostics() if d["kind"] == "HiddenSync"}
        bucket = hidden[marked("backward")]
        assert bucket["message"].startswith(
            f"the all_reduce of a DDP gradient bucket at {marked('backward')}"), bucket
        assert "goes through the host" in bucket["message"] and "12 times in 12 steps" in bucket["message"], bucket
        assert "no_sync()" in bucket["advice"], bucket
        # The meter's `loss.item()`: a value the program read, at its own line.
        assert hidden[marked("meter")]["message"].startswith(f"a value read at {marked('meter')}"), hidden
        # The validation's counts, summed over the ranks between steps, and DDP's set-up, once
        # before the loop: not hidden syncs.
        assert not any("validate" in d["location"] for d in hidden.values()), hidden
        assert marked("wrap") not in hidden, hidden
        kinds = [d["kind"] for d in p.diagnostics()]
        # The validation loader's start joins its first step rather than splitting it.
        assert "MidStepSync" not in kinds, p.report()
        # SGD's momentum, made at the first update: warm-up, once, at the loop.
        assert "LazyState" in kinds, p.report()
