"""`xlaprof.torch_xla`: PyTorch/XLA's API over the engine. How `import torch_xla` resolves and
what it says of a name it does not provide, the runner (`python -m xlaprof.torch_xla`) against
`python SCRIPT`, and the semantics programs rely on: `torch_xla.compile(full_graph=True)` at the
user's line, step closures that sync nothing, the metrics report, the environment variables.
Whole programs in PyTorch/XLA's manner are in tests/torch_xla_programs."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

import xlaprof as xp  # noqa: E402


def python(code, *args, runner=False, env=None, cwd=None):
    """Runs `code` as a script (through the runner when asked); returns the finished process."""
    script = os.path.join(cwd, "program.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(code))
    command = [sys.executable] + (["-m", "xlaprof.torch_xla"] if runner else []) + [script, *args]
    environment = {k: v for k, v in os.environ.items() if k != "XLAPROF_PROFILE"}
    environment.update(env or {})
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment, cwd=cwd)


def ok(done):
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_torch_xla_is_the_layer_only_where_installed_and_one_module_under_both_names(tmp_path):
    done = python("""
        import sys
        try:
            import torch_xla
        except ImportError:
            print("no torch_xla")
        import xlaprof.torch_xla
        xlaprof.torch_xla.install()
        import torch_xla, torch_xla.core.xla_model as xm
        from torch_xla import runtime as xr
        print(torch_xla.__name__, xm is sys.modules["xlaprof.torch_xla.core.xla_model"],
              torch_xla.core.xla_model is xm, torch_xla.device(), xr.world_size())
        torch_xla.experimental.eager_mode(False)  # a submodule reached as an attribute
    """, cwd=str(tmp_path))
    assert ok(done).stdout.split() == ["no", "torch_xla", "xlaprof.torch_xla", "True", "True", "xlaprof:0", "1"]


def test_a_name_not_provided_says_so(tmp_path):
    done = python("""
        import torch_xla
        import torch_xla.core.xla_model as xm
        for attempt in (lambda: torch_xla.core.xla_model.all_to_all, lambda: torch_xla._XLAC._xla_tensors_report,
                        lambda: __import__("torch_xla.distributed.spmd.debugging")):
            try:
                attempt()
            except (AttributeError, ImportError) as e:
                print(type(e).__name__, e)
        try:
            torch_xla.compile(lambda: None, custom_compile_options={"xla_cpu_use_thunk_runtime": False})
        except TypeError as e:
            print("TypeError", e)
    """, runner=True, cwd=str(tmp_path))
    lines = ok(done).stdout.splitlines()
    assert lines[0] == ("AttributeError torch_xla.core.xla_model.all_to_all is not provided by xlaprof's "
                        "torch_xla layer (docs/torch-xla.md lists what it provides)")
    assert lines[1].startswith("AttributeError torch_xla._XLAC._xla_tensors_report is not provided")
    assert lines[2].startswith("ModuleNotFoundError torch_xla.distributed.spmd.debugging is not provided")
    assert lines[3].startswith("TypeError torch_xla.compile(custom_compile_options=...) is not provided")


def test_the_runner_runs_a_script_as_python_does(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 'from the script folder'\n")
    code = """
        import os, sys
        import helper
        print(__name__, sys.argv[1:], os.path.basename(sys.path[0]), helper.VALUE)
        if __name__ == "__main__":
            sys.exit(int(sys.argv[1]))
    """
    plain = python(code, "3", "--flag", cwd=str(tmp_path))
    ours = python(code, "3", "--flag", runner=True, cwd=str(tmp_path))
    assert plain.returncode == ours.returncode == 3
    assert plain.stdout == ours.stdout
    assert plain.stdout.startswith("__main__ ['3', '--flag']")
    failed = python("raise ValueError('the program failed')", runner=True, cwd=str(tmp_path))
    assert failed.returncode == 1 and "ValueError: the program failed" in failed.stderr
    usage = subprocess.run([sys.executable, "-m", "xlaprof.torch_xla"], capture_output=True, text=True)
    assert usage.returncode != 0 and "usage: python -m xlaprof.torch_xla" in usage.stderr


def test_compile_with_full_graph_names_the_line_that_needs_a_second_graph(tmp_path):
    done = python("""
        import torch, torch_xla

        @torch_xla.compile(full_graph=True)
        def step_fn(x):
            y = (x * 2).sum()
            if y.item() > 0:  # LINE
                y = y + 1
            return y

        x = torch.ones(4).to(torch_xla.device())
        try:
            step_fn(x)
        except Exception as e:
            print(type(e).__name__, e)
    """, runner=True, cwd=str(tmp_path))
    out = ok(done).stdout
    line = next(i for i, l in enumerate(textwrap.dedent(open(tmp_path / "program.py").read()).splitlines(), 1)
                if "# LINE" in l)
    assert out.startswith("SyncError torch_xla.compile(step_fn, full_graph=True) needs more than one graph"), out
    assert f"program.py:{line}" in out, out


def test_step_closures_run_after_the_step_and_sync_nothing_of_their_own(tmp_path):
    done = python("""
        import torch, torch_xla, xlaprof as xp
        import torch_xla.core.xla_model as xm
        dev = torch_xla.device()
        w = torch.ones(3, device=dev)
        seen = []
        for step in range(4):
            w = w * 2
            loss = w.sum()
            xm.add_step_closure(lambda s, l: seen.append((s, l.item())), args=(step, loss))
            assert len(seen) == step  # not before the step ends
            syncs = xp.counters()["syncs"]
            xm.mark_step()
            assert xp.counters()["syncs"] == syncs + 1, "one sync: the step's; the closure read computed values"
        print(seen)
    """, runner=True, cwd=str(tmp_path))
    assert ok(done).stdout.strip() == "[(0, 6.0), (1, 12.0), (2, 24.0), (3, 48.0)]"


def test_max_different_graphs_fails_on_the_call_that_compiles_one_more(tmp_path):
    done = python("""
        import torch, torch_xla
        f = torch_xla.compile(lambda x: (x * 3).sum(), max_different_graphs=2, name="scaled_sum")
        dev = torch_xla.device()
        for n in (4, 4, 5, 5, 6):
            try:
                f(torch.ones(n, device=dev))
                print("ran", n)
            except RuntimeError as e:
                print("failed", n, e)
    """, runner=True, cwd=str(tmp_path))
    lines = ok(done).stdout.splitlines()
    assert lines[:4] == ["ran 4", "ran 4", "ran 5", "ran 5"]
    assert lines[4].startswith("failed 6 torch_xla.compile: scaled_sum compiled 3 different graphs, more than "
                               "max_different_graphs=2"), lines


def test_the_metrics_report_is_pytorch_xlas_text_and_clears(tmp_path):
    done = python("""
        import re, torch, torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met
        dev = torch_xla.device()
        x = torch.ones(8).to(dev)  # device data: each step is the same graph
        for _ in range(3):
            x = (x * 1.5).relu()
            xm.mark_step()
        report = met.metrics_report()
        print(report)
        assert re.search(r"Metric: CompileTime\\n  TotalSamples: 1\\n  Accumulator: (\\d\\dm)?(\\d\\ds)?\\d{3}ms\\d{3}\\.\\d{3}us\\n", report), report
        assert met.counter_value("MarkStep") == 3 and met.counter_value("CachedCompile") == 2
        assert met.metric_data("CompileTime")[0] == 1 and "ExecuteTime" in met.metric_names()
        assert torch_xla._XLAC._xla_metrics_report() == met.metrics_report()
        torch.special.airy_ai(x).sum()  # no lowering: run on the CPU, counted as aten::
        assert met.executed_fallback_ops() == ["aten::special_airy_ai"], met.executed_fallback_ops()
        met.clear_all()
        assert met.counter_value("MarkStep") is None and met.metric_data("CompileTime") is None
        assert met.executed_fallback_ops() == []
        x = (x * 1.5).relu()
        xm.mark_step()
        assert met.counter_value("MarkStep") == 1 and met.counter_value("CachedCompile") == 1
        print(met.short_metrics_report())
    """, runner=True, cwd=str(tmp_path))
    out = ok(done).stdout
    assert "Counter: MarkStep\n  Value: 3" in out and "Percentiles: 1%=" in out


def test_pytorch_xlas_variables_are_read_as_xlaprofs(tmp_path):
    done = python("""
        import os
        import torch_xla.runtime as xr
        print(os.environ.get("XLAPROF_DEBUG"), os.environ.get("XLAPROF_CPU_DEVICES"), xr.global_runtime_device_count(),
              xr.device_type())
    """, runner=True, env={"PT_XLA_DEBUG_LEVEL": "1", "CPU_NUM_DEVICES": "4", "PJRT_DEVICE": "CPU"}, cwd=str(tmp_path))
    assert ok(done).stdout.split() == ["1", "4", "4", "CPU"]
    tpu = python("import torch_xla", runner=True, env={"PJRT_DEVICE": "TPU"}, cwd=str(tmp_path))
    assert tpu.returncode == 1 and "XLAPROF_PJRT_PLUGIN" in tpu.stderr


def test_the_reference_run_is_cpu_eager_and_counts_the_steps(tmp_path):
    code = """
        import torch, torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.parallel_loader as pl
        dev = torch_xla.device()
        print(dev)
        step_fn = torch_xla.compile(lambda x: (x * 2).sum())
        for x in pl.MpDeviceLoader([torch.ones(2)] * 5, dev):
            loss = step_fn(x)
            xm.add_step_closure(lambda l: print("loss:", l.item()), args=(loss,))
    """
    reference = ok(python(code, runner=True, cwd=str(tmp_path)))
    ours = ok(subprocess.run([sys.executable, "-m", "xlaprof.torch_xla", "--reference", str(tmp_path / "program.py")],
                             capture_output=True, text=True, cwd=str(tmp_path)))
    assert reference.stdout.splitlines()[0] == "xlaprof:0" and ours.stdout.splitlines()[0] == "cpu"
    assert reference.stdout.splitlines()[1:] == ours.stdout.splitlines()[1:] == ["loss: 4.0"] * 5
    assert "5 steps" in ours.stderr and "xlaprof: 5 steps" in reference.stderr


def test_the_runner_keeps_the_profile_where_asked(tmp_path):
    path = tmp_path / "run.xlaprof"
    (tmp_path / "program.py").write_text(textwrap.dedent("""
        import torch, torch_xla
        x = torch.ones(4, device=torch_xla.device())
        for _ in range(3):
            x = x + 1
            torch_xla.sync()
    """))
    done = ok(subprocess.run([sys.executable, "-m", "xlaprof.torch_xla", "--profile", str(path), "program.py"],
                             capture_output=True, text=True, cwd=str(tmp_path)))
    assert f"the profile: {path}" in done.stderr
    assert xp.load(str(path)).steps == 3


def test_under_torchrun_the_xla_group_and_xms_collectives_go_through_the_host(tmp_path):
    (tmp_path / "program.py").write_text(textwrap.dedent("""
        import torch, torch_xla
        import torch.distributed as dist
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_backend  # noqa: F401
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch_xla import runtime as xr

        dist.init_process_group("xla", init_method="xla://")
        rank, dev = xr.global_ordinal(), torch_xla.device()
        torch.manual_seed(0)
        model = DDP(torch.nn.Linear(4, 2).to(dev))
        model(torch.full((3, 4), float(rank + 1)).to(dev)).sum().backward()
        xm.mark_step()
        seen = (xr.world_size(), model.module.weight.grad.cpu()[0].tolist(), xm.mesh_reduce("ranks", rank, sum),
                xm.all_reduce("sum", torch.ones(2).to(dev)).cpu().tolist())
        with open(f"rank{rank}.txt", "w") as f:  # (the ranks' stdout is one pipe: lines would interleave)
            f.write(" ".join(str(v) for v in seen))
    """))
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    done = ok(subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "xlaprof.torch_xla", "--profile", "job.xlaprof",
                              "program.py"], capture_output=True, text=True, timeout=600, cwd=str(tmp_path)))
    # DDP averages the gradients of the two ranks' batches (3 rows of 1s and of 2s): 4.5 each.
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == "2 [4.5, 4.5, 4.5, 4.5] 1 [2.0, 2.0]", done.stderr
    # Each rank's profile is its own file beside the job's name, whole.
    for rank in (0, 1):
        p = xp.load(str(tmp_path / f"job.rank{rank}.xlaprof"))
        assert p.steps == 1 and "the file ends" not in p.report(), p.report()
    assert not (tmp_path / "job.xlaprof").exists()


def test_a_real_torch_xla_is_left_alone_unless_asked(tmp_path):
    real = tmp_path / "site" / "torch_xla"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("WHO = 'the real one'\n")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    plain = ok(python("import torch_xla; print(torch_xla.WHO)", env=env, cwd=str(tmp_path)))
    assert plain.stdout.strip() == "the real one" and "xlaprof" not in plain.stderr
    ours = ok(python("import torch_xla; print(torch_xla.__name__)", runner=True, env=env, cwd=str(tmp_path)))
    assert ours.stdout.strip() == "xlaprof.torch_xla"
    assert f"a real torch_xla is installed ({real / '__init__.py'})" in ours.stderr


def test_collectives_over_one_replica_and_save(tmp_path):
    done = python("""
        import torch, torch_xla
        import torch_xla.core.xla_model as xm
        dev = torch_xla.device()
        x = torch.arange(6.0).reshape(2, 3).to(dev)
        print(xm.all_reduce(xm.REDUCE_SUM, x, scale=0.5).cpu().tolist())
        inplace = [torch.ones(2).to(dev)]
        xm.all_reduce("max", inplace, scale=3.0)
        print(inplace[0].cpu().tolist(), xm.all_gather(x, dim=1).shape, xm.reduce_scatter("sum", x, 1.0, 0, 1).shape)
        print(xm.mesh_reduce("m", 7, max), xm.rendezvous("r", b"p"), xm.xrt_world_size(), xm.get_ordinal(),
              xm.is_master_ordinal())
        xm.save({"w": x, "n": 3}, "saved.pt")
        loaded = torch.load("saved.pt")
        print(loaded["w"].device, loaded["w"].tolist(), loaded["n"])
    """, runner=True, cwd=str(tmp_path))
    # As in PyTorch/XLA, one replica's all_reduce is its input (a copy), not scaled.
    assert ok(done).stdout.splitlines() == [
        "[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]",
        "[1.0, 1.0] torch.Size([2, 3]) torch.Size([2, 3])",
        "7 [b'p'] 1 0 True",
        "cpu [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] 3",
    ]


def test_what_pytorch_xla_programs_also_do(tmp_path):
    done = python("""
        import collections, gc, os, threading, time
        os.environ["CPU_NUM_DEVICES"] = "2"  # set by the program, before its import
        import numpy as np, torch, torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.parallel_loader as pl
        import torch_xla.distributed.spmd as xs
        from torch_xla import runtime as xr
        from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2
        xr.use_spmd()
        print("devices", xr.global_runtime_device_count(), xr.addressable_device_count())
        dev = torch_xla.device()
        with torch.autocast("xla"):  # as PyTorch/XLA's docs write it
            print("autocast", (torch.ones(2, 2).to(dev) @ torch.ones(2, 2).to(dev)).dtype)
        # A closure a closure queues runs at the next step, not in a loop of its own.
        ran = []
        def again(n):
            ran.append(n)
            if n < 3:
                xm.add_step_closure(again, args=(n + 1,))
        xm.add_step_closure(again, args=(0,))
        xm.mark_step(); xm.mark_step()
        print("closures", ran)
        # A loop that stops early leaves no loader thread behind.
        for i, _ in enumerate(pl.MpDeviceLoader([torch.ones(2)] * 9, dev)):  # the queue holds 8
            time.sleep(0.5)  # the loader fills the queue and has only its end to put
            break
        gc.collect()
        for t in threading.enumerate():
            if t.name == "xlaprof-device-loader":
                t.join(timeout=5)  # it sees the loop has stopped within 0.1 s
        print("loader threads", sum(t.name == "xlaprof-device-loader" and t.is_alive() for t in threading.enumerate()))
        # Named tuples split as they come; a parameter split by the user keeps its split.
        mesh = xs.Mesh(np.arange(2), (2, 1), ("fsdp", "model"))
        Batch = collections.namedtuple("Batch", "x y")
        loader = pl.MpDeviceLoader([Batch(torch.ones(4, 3), torch.zeros(4))] * 2, dev,
                                   input_sharding=xs.ShardingSpec(mesh, ("fsdp", None)))
        print("batch", type(next(iter(loader))).__name__)
        model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Linear(6, 2)).to(dev)
        xs.mark_sharding(model[0].weight, mesh, (None, "fsdp"))  # FSDPv2 would split its dimension 0
        import xlaprof.torch as xt
        users = xt.value(model[0].weight).sharding
        wrapped = FSDPv2(model, mesh=mesh, auto_wrap_policy=lambda module, recurse, unwrapped_params: False)
        print("splits", xt.value(model[0].weight).sharding == users, xt.value(model[1].weight).sharding is not None)
        print("mesh", dict(xs.Mesh(np.arange(2), (2,)).shape()))
    """, runner=True, cwd=str(tmp_path))
    assert ok(done).stdout.splitlines() == [
        "devices 2 1",
        "autocast torch.bfloat16",
        "closures [0, 1]",
        "loader threads 0",
        "batch Batch",
        "splits True True",
        "mesh {0: 2}",
    ]
