"""torch.compile seen by the profiler: `xp.profile()` around compiled code records Dynamo's
compiles (with their phases and the guard that caused each), graph breaks and each run of a
captured graph, and every view shows them. The scenario corpus (tests/scenarios/tc*.py) runs
the same with inductor through `XLAPROF_PROFILE`; these use `aot_eager` (Dynamo and
AOTAutograd without a C++ compile), so they are quick."""

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import xlaprof as xp  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 2)
        self.scale = 1.0

    def forward(self, x):
        h = self.a(x) * self.scale
        print("", end="")  # LINE_BREAK
        return self.b(h.relu())


def line_of(marker: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(Net)
    return start + next(i for i, l in enumerate(lines) if marker in l)


def test_a_profile_block_sees_compiles_breaks_guards_and_runs():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with xp.profile() as p:
        for step in range(4):
            x = torch.randn(4, 8)
            compiled(x).sum().backward()
            opt.step()
            opt.zero_grad()
        model.scale = 0.5  # LINE_SCALE
        compiled(torch.randn(4, 8))
    this_file = "test_torch_compile.py"
    found = {d["kind"]: d for d in p.diagnostics()}
    assert "GraphBreak" in found, p.report()
    brk = found["GraphBreak"]
    assert brk["location"].startswith(f"{this_file}:{line_of('LINE_BREAK')} "), brk
    assert "print" in brk["message"] and "5 calls" in brk["message"], brk["message"]
    rec = found["Recompile"]
    import inspect

    src, start = inspect.getsourcelines(test_a_profile_block_sees_compiles_breaks_guards_and_runs)
    scale_line = start + next(i for i, l in enumerate(src) if "LINE_SCALE" in l)
    assert rec["location"].startswith(f"{this_file}:{scale_line} "), rec
    assert "self.scale == 1.0" in rec["message"], rec["message"]
    summary = p.summary()["torch_compile"]
    # forward, the function Dynamo resumes in after the print, and forward again for the scale
    # (and the resumed part, which reads the new value too).
    assert summary["compiles"] >= 3 and summary["graph_breaks"] >= 1, summary
    assert summary["runs"] >= 2 * 5, summary
    assert [name for name, _ in summary["phases"]][:2] == ["Dynamo", "AOTAutograd"], summary
    # The optimizer's steps are the profile's steps.
    assert p.steps == 4
    report = p.report()
    assert "torch.compile" in report and "[graph break]" in report, report
    html = p.html()
    assert "torch.compile" in html and "graph break" in html


def test_a_compiled_function_in_a_program_that_never_imports_xlaprof_is_profiled(tmp_path):
    # torch's `torch.backends` entry point starts the watch when XLAPROF_PROFILE is set.
    program = tmp_path / "train.py"
    program.write_text(
        textwrap.dedent(
            """
            import sys
            import torch

            @torch.compile(backend="aot_eager")
            def f(x):
                return (x * 2).sin().sum()

            for n in (4, 4, 5, 5):
                f(torch.randn(n))
            assert "xlaprof" in sys.modules  # loaded by torch's entry point, not by the program
            """
        )
    )
    out = tmp_path / "train.xlaprof"
    env = {**__import__("os").environ, "XLAPROF_PROFILE": str(out)}
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    p = xp.load(str(out))
    summary = p.summary()["torch_compile"]
    assert summary["compiles"] == 2 and summary["runs"] == 4, summary
    (rec,) = [d for d in p.diagnostics() if d["kind"] == "Recompile"]
    assert rec["location"].startswith("train.py:10 "), rec  # the loop that passed the new size
    assert "size mismatch" in rec["message"]
