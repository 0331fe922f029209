"""torch.compile(backend="xlaprof") beside torch's CPU eager, inductor and the lazy path: one
AdamW training step of each workload, each mode in a process of its own, eager first (medians of
the steady steps, and the first step: tracing and compiles included).

The first step twice: cold, with empty compile caches (inductor's, and the engine's persistent
cache), then in a second process with the caches the first one left, as a user's next run of
the same program finds them (inductor keeps its caches by default; the engine's is
`XLAPROF_CACHE_DIR`).

- mlp: the MLP 784-512-512-10, batch 64;
- gpt2: the Hugging Face GPT-2 of samples/torch (2 layers, d=64, sequence 32, batch 4);
- llama: a Hugging Face Llama, 4 layers, hidden 256, sequence 256, batch 8 (compute-bound: the
  host hardly matters).

With --jax PYTHON (a Python with JAX), the MLP and the Llama also run as written directly in JAX
(`mlp_jax.py`, `llama_jax.py`): one jitted step, the same XLA, which tells the engine's lowering
and launches from XLA's code generation.

The compiled step compiles the model and the optimizer's step (`torch.compile(opt.step)`), as
PyTorch recommends. The `aot_eager` row is torch's backend that traces as the others do (Dynamo,
then AOTAutograd's forward and backward) and runs the traced graphs with torch's eager kernels: its
first step is the tracing every backend pays before its own compiles. Also: one call of a
compiled `x + 1` on f32[4] (Dynamo's guards, the wrappers and the engine's launch), and one of a
function that adds 1 in place to 40 such tensors (what each argument costs: an optimizer step has
four per parameter), beside the same calls under inductor. The `fused` row is the engine's
backend with `XLAPROF_FUSED_STEPS=1`: each step's graphs and the lazy code between them as one
program (its calls then include computing that program, one per call).

    .venv/bin/python notebook_ext/bench/torch_compile.py [mlp gpt2 llama] [--jax /path/to/python]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "samples" / "torch"))

MODES = ("eager", "inductor", "aot_eager", "lazy", "xlaprof", "fused")
STEPS = {"mlp": (5, 20), "gpt2": (5, 20), "llama": (2, 5)}  # warm-up, measured
LLAMA = dict(vocab_size=1024, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
LLAMA_BATCH, LLAMA_SEQ = 8, 256


def workload(name: str) -> Tuple[Any, Callable[[Any], Dict[str, Any]], Callable[[Any, Dict[str, Any]], Any]]:
    """The model (random init), a batch maker and the loss."""
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 10))
        return (model,
                lambda g: {"x": torch.randn(64, 784, generator=g), "y": torch.randint(0, 10, (64,), generator=g)},
                lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["y"]))
    if name == "gpt2":
        import models

        return models.gpt2(), models.gpt2_batch, models.hf_loss
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(**LLAMA))

        def batch(g: Any) -> Dict[str, Any]:
            ids = torch.randint(0, LLAMA["vocab_size"], (LLAMA_BATCH, LLAMA_SEQ), generator=g)
            return {"input_ids": ids, "labels": ids}

        return model, batch, lambda m, b: m(**b).loss
    raise ValueError(name)


def run_one(name: str, mode: str, first_only: bool = False) -> Dict[str, Any]:
    """Trains ``name`` in ``mode``: the steady step's median, the first step, the losses (the
    first step alone with ``first_only``)."""
    import torch

    device: Any = "cpu"
    end_step: Callable[[], None] = lambda: None
    backend = "xlaprof" if mode == "fused" else mode
    if mode == "fused":
        os.environ["XLAPROF_FUSED_STEPS"] = "1"  # read when xlaprof.torch is imported
    if mode in ("lazy", "xlaprof", "fused"):
        import xlaprof.torch as xt

        device = xt.device()
        if mode == "lazy":
            end_step = xt.step
    model, make_batch, loss_of = workload(name)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward, opt_step = model, opt.step
    if mode in ("inductor", "aot_eager", "xlaprof", "fused"):
        forward = torch.compile(model, backend=backend)
        opt_step = torch.compile(opt.step, backend=backend)
    warm, measured = (0, 1) if first_only else STEPS[name]
    g = torch.Generator().manual_seed(1)
    times, losses = [], []
    for _ in range(warm + measured):
        batch = {k: v.to(device) for k, v in make_batch(g).items()}
        start = time.perf_counter()
        loss = loss_of(forward, batch)
        loss.backward()
        opt_step()
        opt.zero_grad()
        end_step()
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
    row = {"workload": name, "mode": mode, "step_ms": statistics.median(times[warm:]) * 1e3,
           "first_s": times[0], "loss": losses[-1]}
    if mode in ("inductor", "xlaprof", "fused") and not first_only:
        row["call_us"] = tiny_call_us(backend, device)
        row["args40_us"] = many_args_call_us(backend, device)
    return row


def tiny_call_us(backend: str, device: Any) -> float:
    """One call of a compiled ``x + 1`` on f32[4] (result computed), in µs: the median of 2,000."""
    import torch

    f = torch.compile(lambda x: x + 1, backend=backend)
    x = [torch.zeros(4, device=device)]

    def call() -> None:
        x[0] = f(x[0])

    return median_call_us(call)


def many_args_call_us(backend: str, device: Any) -> float:
    """One call of a compiled function that adds 1 in place to each of 40 f32[4] tensors, in µs
    (an optimizer step's pattern: many arguments, each written; what each argument costs)."""
    import torch

    @torch.compile(backend=backend)
    def f(xs: List[Any]) -> None:
        for x in xs:
            x.add_(1)

    xs = [torch.zeros(4, device=device) for _ in range(40)]
    return median_call_us(lambda: f(xs), calls=500)


def median_call_us(call: Callable[[], None], calls: int = 2000) -> float:
    for _ in range(20):
        call()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def json_row(cmd: List[str], env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The last JSON line a run of ``cmd`` prints, or {"error": its last line of stderr} (the
    bench's programs each run in a process of their own; compiled_split.py's too)."""
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:  # a --jax Python that is not there
        return {"error": f"cannot run {cmd[0]}: {e.strerror}"}
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        return {"error": (run.stderr.strip().splitlines() or ["?"])[-1][:100]}
    return json.loads(lines[-1])


def in_process(name: str, mode: str, caches: str, first_only: bool = False) -> Dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", name, mode] + (["--first"] if first_only else [])
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TORCHINDUCTOR_CACHE_DIR": os.path.join(caches, "inductor"),
           "XLAPROF_CACHE_DIR": os.path.join(caches, "xlaprof")}
    return {"workload": name, "mode": mode, **json_row(cmd, env)}


def measured(name: str, mode: str) -> Dict[str, Any]:
    """``mode``'s row: a run with empty caches, then the first step again with those it left."""
    with tempfile.TemporaryDirectory() as caches:
        row = in_process(name, mode, caches)
        if "error" not in row and mode != "eager":
            again = in_process(name, mode, caches, first_only=True)
            row["warm_first_s"] = again.get("first_s")
    return row


JAX_PROGRAMS = {"mlp": "mlp_jax.py", "llama": "llama_jax.py"}


def in_jax(name: str, python: str) -> Dict[str, Any]:
    return {"workload": name, "mode": "jax", **json_row([python, str(HERE / JAX_PROGRAMS[name])])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=list(STEPS))
    ap.add_argument("--jax", help="a Python with JAX, for the MLP and the Llama written in JAX")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--first", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one, first_only=args.first)))
        return
    print(f"{'workload':<9} {'mode':<9} {'step ms':>9} {'vs eager':>8} {'first s':>8} {'warm':>6} "
          f"{'x+1 call us':>11} {'40 args us':>10}  loss")
    for name in args.workloads:
        rows = [measured(name, mode) for mode in MODES]
        if name in JAX_PROGRAMS and args.jax:
            rows.append(in_jax(name, args.jax))
        eager = rows[0].get("step_ms")
        for r in rows:
            if "error" in r:
                print(f"{name:<9} {r['mode']:<9} error: {r['error']}")
                continue
            ratio = f"{r['step_ms'] / eager:>7.2f}x" if eager else "       -"
            call = f"{r['call_us']:>11.1f}" if "call_us" in r else " " * 11
            call += f" {r['args40_us']:>10.1f}" if "args40_us" in r else " " * 11
            warm = f"{r['warm_first_s']:>6.2f}" if r.get("warm_first_s") is not None else f"{'-':>6}"
            print(f"{name:<9} {r['mode']:<9} {r['step_ms']:>9.2f} {ratio} {r['first_s']:>8.2f} {warm} {call}  "
                  f"{r['loss']:.6f}", flush=True)


if __name__ == "__main__":
    main()
