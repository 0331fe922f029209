"""Hugging Face Trainer on the device (samples/torch/trainer.py): the Trainer's own loop and its
default optimizer (fused AdamW) train a tied GPT-2 to CPU eager's losses, with nothing on the CPU
fallback; nothing compiles after warm-up."""

import pathlib
import re
import subprocess
import sys

import pytest

import xlaprof as xp

pytest.importorskip("accelerate")

SAMPLE = pathlib.Path(__file__).parents[2] / "samples" / "torch" / "trainer.py"
STEP = re.compile(r"step (\d+): loss ([\d.]+)(?:, compiles so far (\d+))?$")


def losses(*flags: str, cwd: pathlib.Path):
    run = subprocess.run([sys.executable, str(SAMPLE), "--steps", "8", *flags], capture_output=True, text=True,
                         cwd=cwd)
    assert run.returncode == 0, run.stderr[-3000:]
    steps = [STEP.match(line) for line in run.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) == 8 and all(steps), run.stdout
    return steps, run.stdout


def test_the_trainer_trains_on_the_device_as_on_the_cpu(tmp_path):
    device, out = losses(cwd=tmp_path)
    cpu, _ = losses("--cpu", cwd=tmp_path)
    assert "device xlaprof:0; tied head kept: True" in out, out
    assert "CPU fallbacks: none" in out, out
    for d, c in zip(device, cpu):
        assert float(d.group(2)) == pytest.approx(float(c.group(2)), rel=1e-4), (d.group(0), c.group(0))
    findings = xp.load(str(tmp_path / "trainer.xlaprof")).diagnostics()
    kinds = {d["kind"] for d in findings}
    # The optimizer's state, made by the first step inside accelerate's wrapper, is warm-up.
    assert "LazyState" in kinds and "HostFallback" not in kinds, kinds
    # After it nothing recompiles. Something of the Trainer's lets go of a parameter's old value
    # when the collector runs, a few steps in: that input becomes donatable, and the step runs
    # the executable it has (which keeps that buffer) instead of compiling for the donation.
    late = [i["message"] for d in findings if d["kind"] in ("Recompile", "RecompileStorm")
            for i in d["instances"] if i["step"] > 2]
    assert not late, late
    # transformers reads a value in its masking utilities (no attention mask given): reported at
    # the sample's line that called the Trainer, the library's line kept.
    reads = [d["location"] for d in findings if d["kind"] == "HiddenSync"]
    assert any(r.startswith("trainer.py:") and "in <module> (via masking_utils.py:" in r for r in reads), reads
