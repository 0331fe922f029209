"""The debugging tools, on the engine's own tensors and on torch's through the bridge:
`forbid_sync()`, `explain()`, `compare_with_eager()`, `XLAPROF_CHECK`, `detect_anomaly()` and
`break_on()` / `XLAPROF_BREAK`: each names the user's line; nothing pending is lost by them."""

import inspect
import os
import sys
import textwrap

import numpy as np
import pytest

import xlaprof as xp


def line_of(marker: str, fn) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if marker in l)


def test_forbid_sync_names_the_read_and_the_sync_and_keeps_what_is_pending():
    a = xp.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    with xp.forbid_sync():
        b = (a * 2).sum()  # recording is allowed
        assert "f32" in repr(b) or "float32" in repr(b)  # repr never reads
        with pytest.raises(xp.SyncError) as read:
            b.item()  # READ
        with pytest.raises(xp.SyncError) as sync:
            xp.sync()  # SYNC
        with pytest.raises(RuntimeError):  # SyncError is a RuntimeError too
            xp.step()
    here = "test_debug_tools.py"
    fn = test_forbid_sync_names_the_read_and_the_sync_and_keeps_what_is_pending
    assert f"a value read ran a graph at {here}:{line_of('# READ', fn)}" in str(read.value)
    assert f"sync() ran a graph at {here}:{line_of('# SYNC', fn)}" in str(sync.value)
    # Nothing ran, nothing was lost: the value is computed after the block.
    assert b.item() == 30.0
    with xp.forbid_sync():
        with pytest.raises(xp.SyncError, match="a value was read"):
            b.numpy()  # already computed: still a read
    assert float(b.numpy()) == 30.0


def test_explain_describes_the_pending_graph_without_running_it():
    x = xp.from_numpy(np.ones((4, 8), dtype=np.float32))
    w = xp.from_numpy(np.ones((8, 2), dtype=np.float32))
    before = xp.counters()
    y = (x @ w).relu() * 0.5  # PENDING
    text = xp.explain(y)
    after = xp.counters()
    assert after["syncs"] == before["syncs"] and after["compiles"] == before["compiles"]
    line = line_of("# PENDING", test_explain_describes_the_pending_graph_without_running_it)
    assert text.startswith("pending graph of 1 tensor:"), text
    assert "2 device data" in text and "host scalars" in text, text
    assert "dot_general" in text and f"test_debug_tools.py:{line}" in text, text
    assert repr(text) == str(text)  # shown as is in a notebook
    np.testing.assert_allclose(y.numpy(), np.full((4, 2), 4.0))


def test_the_torch_bridge_has_both_tools():
    torch = pytest.importorskip("torch")
    import xlaprof.torch as xt

    dev = xt.device()
    model = torch.nn.Linear(4, 2).to(dev)
    loss = model(torch.randn(3, 4).to(dev)).square().mean()
    text = xt.explain(loss)
    assert "dot_general" in text and "test_debug_tools.py:" in text, text
    with xt.forbid_sync():
        loss.backward()  # recorded, not run
        with pytest.raises(xp.SyncError, match=r"a value read ran a graph at test_debug_tools.py:\d+"):
            print(loss.item())
    assert loss.item() >= 0.0


def _planted_op(name: str, factor: float, wrong: float):
    """A custom op ``xptest::name`` that multiplies by ``factor`` in CPU eager and by ``wrong``
    on the device (its lowering): a divergence planted for compare_with_eager to find."""
    import torch
    from xlaprof.torch.lowerings.registry import lower

    @torch.library.custom_op(f"xptest::{name}", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return x * factor

    @op.register_fake
    def _(x):
        return torch.empty_like(x)

    lower(getattr(torch.ops.xptest, name).default)(lambda x: x * wrong)
    return op


def test_compare_with_eager_names_a_deliberately_wrong_op_at_its_line():
    torch = pytest.importorskip("torch")
    import xlaprof.torch as xt
    # The device's lowering of the op is off by half a percent: a planted divergence.
    doubled = _planted_op("doubled", 2.0, 2.01)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

    def step(m, x):
        loss = m(x).square().mean()
        loss.backward()
        return loss

    x = torch.randn(4, 8)
    clean = xt.compare_with_eager(step, model, x)
    assert clean.first is None and clean.compared >= 10, clean  # forward and backward agree

    def planted(m, x):
        return doubled(m(x)).sum()  # WRONG OP

    with xp.profile() as p:
        found = xt.compare_with_eager(planted, model, x)
    line = line_of("# WRONG OP", test_compare_with_eager_names_a_deliberately_wrong_op_at_its_line)
    divergence = p.diagnostics()[0]  # a finding of the profile too, at the op's line
    assert divergence["kind"] == "Divergence", divergence
    assert divergence["location"].startswith(f"test_debug_tools.py:{line} "), divergence
    assert "`xptest.doubled`" in divergence["message"], divergence
    assert found.first is not None and found.first.op == "xptest.doubled", found
    assert found.first.line.startswith(f"test_debug_tools.py:{line} "), found
    assert "first divergence is `xptest.doubled`" in str(found)
    # The model was copied: the caller's parameters have no gradient from either run.
    assert all(p.grad is None for p in model.parameters())


def test_compare_with_eager_pairs_what_the_device_runs_another_way_and_still_finds_a_divergence():
    """BERT: CPU eager runs attention as one fused kernel and computes a linear layer's weight
    gradient transposed, the device runs attention's decomposition and the gradient directly:
    those ops are paired by their values, so what follows them is compared by data flow."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import xlaprof.torch as xt
    scaled = _planted_op("scaled", 3.0, 3.03)  # the planted divergence
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.BertForSequenceClassification(config)
    ids, labels = torch.randint(0, 100, (2, 8)), torch.tensor([0, 1])

    def step(m, ids, labels):
        loss = m(input_ids=ids, labels=labels).loss
        loss.backward()
        return loss

    clean = xt.compare_with_eager(step, model, ids, labels)
    assert clean.first is None and clean.compared >= 100, clean
    # Each run's attention and weight gradients paired (49 ops were seen by one run only).
    assert clean.by_value >= 10 and clean.skipped <= 20, clean

    def planted(m, ids):
        hidden = m.bert(input_ids=ids).last_hidden_state
        return scaled(hidden).sum()  # WRONG OP

    found = xt.compare_with_eager(planted, model, ids)
    line = line_of("# WRONG OP", test_compare_with_eager_pairs_what_the_device_runs_another_way_and_still_finds_a_divergence)
    assert found.first is not None and found.first.op == "xptest.scaled", found
    assert found.first.line.startswith(f"test_debug_tools.py:{line} "), found


def test_an_out_of_range_index_is_an_index_error_at_its_line_unless_xlaprof_check_is_0(tmp_path):
    pytest.importorskip("torch")
    import subprocess
    import sys
    import textwrap

    program = tmp_path / "vocab.py"
    program.write_text(textwrap.dedent(
        """
        import torch
        import xlaprof.torch as xt

        emb = torch.nn.Embedding(10, 4).to(xt.device())
        ids = torch.tensor([[1, 2, 12]]).to(xt.device())  # a token id past the vocabulary
        print(emb(ids).sum().item())
        """
    ))
    import os

    # On by default, as torch's own checks are; XLAPROF_CHECK=0 leaves XLA's clamping, silent.
    env = {k: v for k, v in os.environ.items() if k != "XLAPROF_CHECK"}
    off = dict(env, XLAPROF_CHECK="0")
    clamped = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=off)
    assert clamped.returncode == 0, clamped.stderr  # XLA clamps: the known silent case
    checked = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=env)
    assert checked.returncode != 0
    assert "IndexError: index 12 is out of bounds for dimension 0 with size 10" in checked.stderr, checked.stderr
    assert "vocab.py:7" in checked.stderr, checked.stderr

    # Checked on the device: the bounds are computed in the step's own graph and read with it, no
    # sync per indexing op; a bad id in step 3 is an error at that step, naming the op's line.
    steps = tmp_path / "steps.py"
    steps.write_text(textwrap.dedent(
        """
        import torch
        import xlaprof as xp
        import xlaprof.torch as xt

        emb = torch.nn.Embedding(10, 4).to(xt.device())
        with xp.profile() as p:
            for step, top in enumerate([5, 9, 9, 12]):
                ids = torch.tensor([[1, 2, top]]).to(xt.device())
                loss = emb(ids).square().sum()
                try:
                    xt.step()
                except IndexError as e:
                    print("step", step, e)
            try:
                xt.wait()
            except IndexError as e:
                print("wait", e)
        print("syncs", p.syncs, "steps", p.steps)
        """
    ))
    wrong = "index 12 is out of bounds for dimension 0 with size 10 (aten::embedding, at steps.py:10"
    run = subprocess.run([sys.executable, str(steps)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert f"step 3 {wrong}" in run.stdout and "wait" not in run.stdout, run.stdout
    assert "syncs 4 steps 4" in run.stdout, run.stdout  # the bounds read with the steps' results

    # Where syncs return before their programs finish (GPUs), a step's bounds are read at the
    # next sync, so that the host still runs ahead: the last step's, at the wait for the device.
    ahead = subprocess.run([sys.executable, str(steps)], capture_output=True, text=True, timeout=300,
                           env=dict(env, XLAPROF_RUN_AHEAD="1"))
    assert ahead.returncode == 0, ahead.stderr
    assert f"wait {wrong}" in ahead.stdout and "\nstep " not in "\n" + ahead.stdout, ahead.stdout
    assert "syncs 4 steps 4" in ahead.stdout, ahead.stdout


def test_xlaprof_check_holds_a_ctc_loss_s_device_lengths_to_its_input_as_cuda_does(tmp_path):
    # Lengths given as device tensors decide nothing on the host here (CUDA reads them to check
    # them). Without the check an input length past the input's steps reads its last step's
    # alphas silently; with it each wrong length is torch's error at the next sync, naming the
    # loss's line, and a finding of the profile there.
    import subprocess

    program = tmp_path / "asr.py"
    program.write_text(textwrap.dedent(
        """
        import torch
        import xlaprof.torch as xt

        dev = xt.device()
        log_probs = torch.randn(6, 2, 5).log_softmax(2).to(dev)
        padded = torch.tensor([[1, 2, 3], [2, 2, 0]]).to(dev)
        flat = torch.tensor([1, 2, 3, 2, 2]).to(dev)
        for name, targets, inputs, targets_lengths in [
                ("input past the steps", padded, [6, 9], [3, 2]),
                ("negative target", padded, [6, 4], [3, -1]),
                ("target past the padding", padded, [6, 4], [3, 4]),
                ("targets of another total", flat, [6, 4], [3, 1]),
                ("right", padded, [6, 4], [3, 2])]:
            loss = torch.nn.functional.ctc_loss(log_probs, targets, torch.tensor(inputs).to(dev),
                                                torch.tensor(targets_lengths).to(dev))
            try:
                print(name, "->", loss.item())
            except RuntimeError as e:
                print(name, "->", e)
        """
    ))
    import os

    silent = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, XLAPROF_CHECK="0"))
    assert silent.returncode == 0 and "input past the steps -> " in silent.stdout, silent.stderr
    saved = tmp_path / "asr.xlaprof"
    env = dict(os.environ, XLAPROF_CHECK="1", XLAPROF_PROFILE=str(saved))
    checked = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=env)
    assert checked.returncode == 0, checked.stderr
    out = checked.stdout
    at = "(while checking arguments for ctc_loss_allocate_outputs) (at asr.py:15"
    assert f"input past the steps -> Expected input_lengths to have value at most 6, but got value 9 {at}" in out, out
    assert f"negative target -> Expected target_lengths to have value at least 0, but got value -1 {at}" in out, out
    assert ("target past the padding -> Expected tensor to have size at least 4 at dimension 1, but got size 3 "
            f"for argument #2 'targets' {at}") in out, out
    assert ("targets of another total -> Expected tensor to have size 4 at dimension 0, but got size 5 "
            f"for argument #2 'targets' {at}") in out, out
    right = float(out.split("right -> ")[1].split()[0])
    assert right > 0, out
    first = xp.load(str(saved)).diagnostics()[0]
    assert (first["kind"], first["location"].split(" in ")[0]) == ("ValueOutOfRange", "asr.py:15"), first
    assert "4 times at this line" in first["message"] and "length past the input" in first["advice"], first


def test_detect_anomaly_names_the_op_that_made_the_first_nan_in_a_language_model():
    torch = pytest.importorskip("torch")
    import xlaprof.torch as xt

    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(32, 16)
            self.mix = torch.nn.Linear(16, 16)
            self.head = torch.nn.Linear(16, 32)

        def forward(self, ids):
            h = self.mix(self.embed(ids))
            h = torch.sqrt(h)  # NAN: a negative activation has no square root
            return self.head(h)

    dev = xt.device()
    torch.manual_seed(0)
    model = TinyLM().to(dev)
    ids = torch.randint(0, 32, (2, 8)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
    with xt.detect_anomaly():
        with pytest.raises(xp.AnomalyError) as found:
            xt.step()  # STEP
    text = str(found.value)
    nan_line = line_of("# NAN", TinyLM)
    step_line = line_of("# STEP", test_detect_anomaly_names_the_op_that_made_the_first_nan_in_a_language_model)
    assert "`sqrt`" in text and f"test_debug_tools.py:{nan_line}" in text, text
    assert f"test_debug_tools.py:{step_line}" in text, text  # the sync that found it
    assert "its inputs: f32[2,8,16] in [-" in text, text
    # A clean step says nothing.
    with xt.detect_anomaly():
        ok = model.head(torch.ones(2, 16).to(dev)).sum()
        xt.step()
    assert ok.item() == ok.item()


def test_break_on_recompile_raises_at_the_step_with_what_changed_and_loses_nothing():
    w = xp.from_numpy(np.ones((3, 2), np.float32))
    fn = test_break_on_recompile_raises_at_the_step_with_what_changed_and_loses_nothing
    xp.break_on("recompile")
    try:
        losses, hits = [], []
        with xp.profile() as p:  # breaking and profiling go together
            for rows in (4, 4, 6):
                batch = xp.from_numpy(np.ones((rows, 3), np.float32))  # BATCH
                loss = (batch @ w).sum()
                try:
                    xp.step()  # STEP
                except xp.BreakError as e:
                    hits.append((rows, e))
                losses.append(loss.item())  # the sync ran to its end: the value is there
    finally:
        xp.break_on()
    assert p.steps == 3 and p.compiles == 2
    assert [rows for rows, _ in hits] == [6], hits
    message = str(hits[0][1])
    assert message.startswith("XLAPROF_BREAK=recompile: test_debug_tools.py:%d" % line_of("# STEP", fn)), message
    assert "`batch` made at test_debug_tools.py:%d" % line_of("# BATCH", fn) in message, message
    assert "dimension 0 went from 4 to 6" in message, message
    assert losses == [24.0, 24.0, 36.0]
    assert isinstance(hits[0][1], RuntimeError)
    stop = p.diagnostics()[0]  # where the program stopped, first among the findings
    assert stop["kind"] == "Break" and stop["location"].startswith("test_debug_tools.py:%d " % line_of("# STEP", fn))
    assert "dimension 0 went from 4 to 6" in stop["message"], stop


def test_break_on_sync_raises_at_a_hidden_read_and_not_at_steps():
    fn = test_break_on_sync_raises_at_a_hidden_read_and_not_at_steps
    a = xp.from_numpy(np.arange(4, dtype=np.float32))
    xp.break_on("sync")
    try:
        xp.step()  # a step is no hidden sync
        b = (a * 3).sum()
        with pytest.raises(xp.BreakError) as hit:
            b.item()  # HIDDEN
        assert b.item() == 18.0  # computed: the second read needs no graph
    finally:
        xp.break_on()
    assert f"a value read at test_debug_tools.py:{line_of('# HIDDEN', fn)}" in str(hit.value), str(hit.value)
    with pytest.raises(ValueError, match="unknown cause 'syncs'"):
        xp.break_on("syncs")


def test_break_on_fallback_stops_a_torch_op_with_no_lowering_before_it_runs(tmp_path):
    # And XLAPROF_BREAK for a whole program: the traceback ends at the user's line.
    script = tmp_path / "bessel.py"
    script.write_text(
        "import torch\n"
        "import xlaprof.torch as xt\n"
        "x = torch.linspace(0.1, 3.0, 8).to(xt.device())\n"
        "y = torch.special.bessel_j0(x) * 2\n"
        "print(y.cpu())\n"
    )
    import os
    import subprocess
    import sys

    env = dict(os.environ, XLAPROF_BREAK="fallback,recompile")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert 'bessel.py", line 4' in done.stderr, done.stderr
    assert "BreakError: XLAPROF_BREAK=fallback: aten::special_bessel_j0 at bessel.py:4 is not lowered" in done.stderr
    env["XLAPROF_BREAK"] = "recompiles"
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert "XLAPROF_BREAK=recompiles: break_on: unknown cause 'recompiles'" in done.stderr, done.stderr


def test_what_each_tool_caught_is_a_finding_at_its_line_first_in_the_profile(tmp_path):
    torch = pytest.importorskip("torch")
    import os
    import subprocess
    import sys

    import xlaprof.torch as xt

    fn = test_what_each_tool_caught_is_a_finding_at_its_line_first_in_the_profile
    here = "test_debug_tools.py"
    dev = xt.device()
    with xp.profile() as p:
        a = torch.ones(4).to(dev)
        with xt.forbid_sync():
            with pytest.raises(xp.SyncError):
                (a * 2).sum().item()  # FORBIDDEN
        with xt.detect_anomaly():
            bad = torch.log(a - 2)  # NAN
            with pytest.raises(xp.AnomalyError):
                xt.step()
        for _ in range(3):  # the same line caught again: one finding
            c = a * 3
            with xp.forbid_sync():
                with pytest.raises(xp.SyncError):
                    xt.sync()  # TWICE
        xt.step()
    del bad, c
    findings = p.diagnostics()
    caught = [(f["kind"], f["location"].split(" in ")[0], f["count"]) for f in findings[:3]]
    assert sorted(caught) == [
        ("Anomaly", f"{here}:{line_of('# NAN', fn)}", 1),
        ("ForbiddenSync", f"{here}:{line_of('# FORBIDDEN', fn)}", 1),
        ("ForbiddenSync", f"{here}:{line_of('# TWICE', fn)}", 3),
    ], findings[:4]
    nan = next(f for f in findings if f["kind"] == "Anomaly")
    assert "`log`" in nan["message"] or "log" in nan["message"], nan
    assert nan["advice"] and "range" in nan["advice"], nan
    report = p.report()
    assert "NaN or Inf" in report and "forbidden sync" in report, report

    # XLAPROF_CHECK, in a program of its own that a profile records from its start.
    program = tmp_path / "vocab.py"
    program.write_text(
        "import torch\n"
        "import xlaprof.torch as xt\n"
        "emb = torch.nn.Embedding(10, 4).to(xt.device())\n"
        "ids = torch.tensor([[1, 2, 12]]).to(xt.device())\n"
        "print(emb(ids).sum().item())\n"
    )
    saved = tmp_path / "vocab.xlaprof"
    env = dict(os.environ, XLAPROF_CHECK="1", XLAPROF_PROFILE=str(saved))
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=env)
    assert "IndexError" in run.stderr, run.stderr
    first = xp.load(str(saved)).diagnostics()[0]
    assert (first["kind"], first["location"].split(" in ")[0]) == ("IndexOutOfRange", "vocab.py:5"), first
    assert "index 12 is out of bounds for dimension 0 with size 10" in first["message"], first



def test_detect_anomaly_with_the_host_running_ahead_names_the_nan_by_the_next_step(tmp_path):
    # Where syncs return before their programs finish (GPUs; XLAPROF_RUN_AHEAD=1 here), a step's
    # verdict is read at the next sync, or at the block's end, so the host still runs ahead: the
    # NaN is still named at its line, and at the sync that made it.
    import subprocess

    program = tmp_path / "ahead.py"
    program.write_text(textwrap.dedent("""
        import numpy as np
        import xlaprof as xp

        found = []
        for last in (False, True):
            w = xp.from_numpy(np.ones(4, np.float32))
            try:
                with xp.detect_anomaly():
                    for i in range(4):
                        shift = 10.0 if i == (3 if last else 1) else -2.0
                        w = (w - shift).sqrt() + 1.0  # NAN
                        xp.step()  # STEP
            except xp.AnomalyError as e:
                found.append((i, str(e)))
        for i, text in found:
            print(i, text.replace("\\n", " | "))
    """))
    env = {**os.environ, "XLAPROF_RUN_AHEAD": "1"}
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    found = run.stdout.strip().splitlines()
    assert len(found) == 2, run.stdout
    # The NaN of step 1 is found by step 2's sync (that step's program already queued); the
    # NaN of the last step by the block's end. Both name the sqrt and the step that made it.
    assert found[0].startswith("2 ") and found[1].startswith("3 "), found
    for text in found:
        assert "`sqrt`" in text and "ahead.py:12" in text and "ahead.py:13" in text, text
    # XLAPROF_DEBUG_NANS=1 for a whole program: a NaN in the last step, which no later sync
    # reads, is reported at exit.
    last = tmp_path / "last.py"
    last.write_text(textwrap.dedent("""
        import numpy as np
        import xlaprof as xp

        w = xp.from_numpy(np.ones(4, np.float32))
        for shift in (-2.0, 10.0):
            w = (w - shift).sqrt()  # NAN
            xp.step()
    """))
    env["XLAPROF_DEBUG_NANS"] = "1"
    run = subprocess.run([sys.executable, str(last)], capture_output=True, text=True, timeout=300, env=env)
    assert "`sqrt`" in run.stderr and "last.py:7" in run.stderr, run.stderr
