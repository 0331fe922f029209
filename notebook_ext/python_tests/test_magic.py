"""The %xla_profile magics in an IPython shell (in process)."""

import pytest
from IPython.testing.globalipapp import start_ipython

import xlaprof as xp


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython()
    shell.run_line_magic("load_ext", "xlaprof")
    shell.user_ns["xp"] = xp
    return shell


def test_line_magic_returns_the_profile_and_saves_it(ip, tmp_path):
    out = tmp_path / "line.xlaprof"
    p = ip.run_line_magic("xla_profile", f"--out {out} --no-widget xp.ones(3, 11).sum().item()")
    assert isinstance(p, xp.Profile)
    assert p.syncs == 1 and p.steps == 0
    assert p._repr_html_() is None  # --no-widget: text only
    assert xp.load(str(out)).summary() == p.summary()


def test_steps_option_marks_a_step_after_each_run(ip):
    ip.user_ns["w"] = xp.tensor([1.0, 2.0])
    p = ip.run_cell_magic("xla_profile", "--steps 4", "w = w * 0.5 + 1.0\n")
    assert p.steps == 4
    p.assert_max_compiles(0, after_step=1)
    html = p._repr_html_()
    assert "%%xla_profile" in html and "<summary>Summary" in html


def test_rules_show_in_the_text_report(ip):
    p = ip.run_cell_magic("xla_profile", "--no-widget --rules max-compiles=0", "xp.ones(2, 13).sum().item()\n")
    assert "rule FAILED: 1 compiles (at most 0 allowed)" in repr(p)


def test_bad_options_fail_before_running(ip):
    ip.user_ns["ran"] = False
    with pytest.raises(ValueError, match="unknown rule"):
        ip.run_cell_magic("xla_profile", "--rules fastest=1", "ran = True\n")
    assert ip.user_ns["ran"] is False
    with pytest.raises(ValueError, match="needs a statement"):
        ip.run_line_magic("xla_profile", "--no-widget")


def test_an_error_in_the_cell_is_raised_with_its_line(ip):
    with pytest.raises(xp.ShapeError, match=r":3 in <module>"):
        ip.run_cell_magic("xla_profile", "--no-widget", "a = xp.ones(2, 3)\nb = a @ a\n")


def test_bad_steps_say_what_was_given(ip):
    ip.user_ns["ran"] = False
    with pytest.raises(ValueError, match=r"--steps needs a whole number, not 'many'"):
        ip.run_cell_magic("xla_profile", "--steps many", "ran = True\n")
    with pytest.raises(ValueError, match=r"--steps needs 0 or more, not -2"):
        ip.run_cell_magic("xla_profile", "--steps -2", "ran = True\n")
    assert ip.user_ns["ran"] is False


def test_a_cell_of_torch_code_is_profiled_at_the_cells_lines(ip):
    # The torch bridge's programs show in the magic as xp programs do: the `.item()` inside the
    # step named at its line of the cell (line 6: the cell's first line is `%%xla_profile`).
    cell = (
        "import torch, xlaprof.torch as xt\n"
        "m = torch.nn.Linear(8, 4).to(xt.device())\n"
        "for _ in range(3):\n"
        "    loss = m(torch.ones(2, 8, device=xt.device())).sum()\n"
        "    seen = loss.item()\n"
        "    loss.backward()\n"
        "    xt.step()\n"
    )
    p = ip.run_cell_magic("xla_profile", "--no-widget", cell)
    assert p.steps == 3
    hidden = [d for d in p.diagnostics() if d["kind"] == "HiddenSync"]
    assert hidden and hidden[0]["location"].endswith(":6 in <module>"), p.report()
    assert "torch" not in " ".join(f for f, _, _ in p._data().locations())


def test_a_torch_compile_cell_is_profiled_unchanged(ip):
    torch = pytest.importorskip("torch")
    ip.user_ns["torch"] = torch
    cell = (
        "torch._dynamo.reset()\n"
        "f = torch.compile(lambda x: (x * 2).sin().sum(), backend='aot_eager')\n"
        "for n in (4, 4, 6):\n"
        "    f(torch.randn(n))\n"
    )
    p = ip.run_cell_magic("xla_profile", "--no-widget", cell)
    c = p.summary()["torch_compile"]
    assert c["compiles"] == 2 and c["runs"] == 3, c
    # Named at the cell's line that passed the new size (the cell's first line is the magic's).
    (rec,) = [d for d in p.diagnostics() if d["kind"] == "Recompile"]
    assert "size mismatch" in rec["message"] and ":5 in <module>" in rec["location"], rec
