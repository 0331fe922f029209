"""PyTorch on a GPU: the torch bridge on a CUDA PJRT plugin beside torch's CUDA eager and
inductor, in one process, one table per part. Run it on a machine with an NVIDIA GPU, torch with
CUDA, transformers, and a CUDA plugin (`pip install xlaprof[cuda13]`, or JAX's `jax-cuda13-pjrt`):

    XLAPROF_DEVICE=cuda python notebook_ext/bench/torch_gpu.py [--out DIR] [--models gpt2 bert ...]

1. Host cost: recording one aten op on this machine's CPU, beside a wrapper subclass that does
   nothing (any ``__torch_dispatch__`` device's floor).
2. Parity: models of the zoo (tests/zoo) trained 20 AdamW steps on the engine, lazily and under
   ``torch.compile(backend="xlaprof")``, and in CUDA eager, f32 on both sides (TF32 off), each
   model in a process of its own.
3. GPT-2 at a realistic size (12 layers, d=768, sequence 512, batch 8, random init, dropout off),
   one AdamW step: CUDA eager, inductor, xlaprof lazy, xlaprof compiled and xlaprof fused (the
   compiled paths compile the model and the optimizer's step, as PyTorch recommends; fused is
   compiled with `XLAPROF_FUSED_STEPS=1`, each step one program), each from the same
   initial weights: the first step (tracing and compiling included), the step's mean over 10
   back to back, the loss after the last step. On the engine the step is also split: the host
   work of a step, beside the steps' wall time when the host does not wait for the device (the
   host runs ahead when its work is the smaller: a step's sync then waits for the step before
   it). A profile of the engine's steps (device memory over the steps) is saved to DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STEPS = 10


def host_cost() -> Dict[str, float]:
    sys.path.insert(0, str(HERE))
    import torch_bridge

    per_op, floor = torch_bridge.recording_per_op(), torch_bridge.no_op_per_op()
    return {"per_op_us": per_op * 1e6, "floor_us": floor * 1e6}


def parity(models: List[str], steps: int, reference: str, compiled: bool = False) -> str:
    cmd = [sys.executable, str(ROOT / "tests" / "zoo" / "zoo.py"), *models, "--steps", str(steps),
           "--reference", reference] + (["--compiled"] if compiled else [])
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return run.stdout + (run.stderr[-2000:] if run.returncode else "")


# (layers, width, heads, sequence, batch): the realistic size, and a tiny one to try the script.
SIZES = {"realistic": (12, 768, 12, 512, 8), "tiny": (2, 64, 4, 32, 4)}


def gpt2(size: str) -> Any:
    import transformers

    layers, width, heads, _, _ = SIZES[size]
    config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=1024,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


PATHS = ("eager", "inductor", "lazy", "compiled", "fused")


def gpt2_path(path: str, size: str, eager_device: str, out_dir: str | None) -> Dict[str, Any]:
    """One path's figures for the GPT-2 step: "eager" and "inductor" on `eager_device`, "lazy",
    "compiled" and "fused" on the engine. Each path runs in a process of its own (see `gpt2_runs`)."""
    import torch

    lazy = path == "lazy"
    on_engine = path in ("lazy", "compiled", "fused")
    if path == "fused":
        os.environ["XLAPROF_FUSED_STEPS"] = "1"  # read when xlaprof.torch is imported
    if on_engine:
        import xlaprof as xp
        import xlaprof.torch as xt
    torch.backends.cuda.matmul.allow_tf32 = False  # torch's default: f32 products in f32
    torch.manual_seed(0)
    model = gpt2(size)  # the same initial weights in every process
    g = torch.Generator().manual_seed(1)
    _, _, _, seq, batch_size = SIZES[size]
    batch = {"input_ids": torch.randint(0, 50257, (batch_size, seq), generator=g)}
    batch["labels"] = batch["input_ids"]
    device = xt.device() if on_engine else torch.device(eager_device)
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fn, opt_step = model, opt.step
    if path in ("inductor", "compiled", "fused"):
        backend = "inductor" if path == "inductor" else "xlaprof"
        fn, opt_step = torch.compile(model, backend=backend), torch.compile(opt.step, backend=backend)
    b = {k: v.to(device) for k, v in batch.items()}

    recorded: List[float] = []

    def step() -> Any:
        start = time.perf_counter()
        loss = fn(**b).loss
        loss.backward()
        opt_step()
        opt.zero_grad()
        recorded.append(time.perf_counter() - start)  # on the engine: the step's host work
        if lazy:
            xt.step()  # the step's graph launched, once the step before it is done
        return loss

    def finish() -> None:
        if on_engine:
            xt.wait()
        elif device.type == "cuda":
            torch.cuda.synchronize()

    t = time.perf_counter()
    step().item()
    first = time.perf_counter() - t
    t = time.perf_counter()
    step().item()  # the optimizer's state appears on the first step: a second graph to compile
    second = time.perf_counter() - t
    finish()
    profile = xp.profile(f"GPT-2, {path}") if on_engine else None
    if profile is not None:
        profile.__enter__()
    recorded.clear()
    losses = []
    t = time.perf_counter()
    for _ in range(STEPS):
        losses.append(step())
    finish()
    total = time.perf_counter() - t
    row: Dict[str, Any] = {"first_s": first, "second_s": second, "step_ms": total / STEPS * 1e3,
                           "host_ms": statistics.median(recorded) * 1e3, "loss": float(losses[-1].item())}
    if profile is not None:
        profile.__exit__(None, None, None)
        if out_dir:
            profile.save(os.path.join(out_dir, f"gpt2-{path}.xlaprof"))
        summary = profile.summary()
        row["device_memory"] = summary.get("device_memory")
        row["profile_steps"] = summary.get("steps")
    elif device.type == "cuda":
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return row


def gpt2_runs(out_dir: str | None, size: str, eager_device: str, paths: List[str]) -> List[Dict[str, Any]]:
    """Each path in a process of its own: torch cannot run a CUDA backward in a process where a
    PrivateUse1 device is registered (pytorch/pytorch#161129), and each path's memory is its own."""
    names = {"eager": f"{eager_device.upper()} eager", "inductor": "inductor", "lazy": "xlaprof lazy",
             "compiled": "xlaprof compiled", "fused": "xlaprof fused"}
    rows = []
    for path in paths:
        cmd = [sys.executable, __file__, "--path", path, "--size", size, "--eager-device", eager_device]
        if out_dir:
            cmd += ["--out", out_dir]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode == 0 and lines:
            rows.append({"path": names[path], **json.loads(lines[-1])})
        else:
            last = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
            rows.append({"path": names[path], "error": last[:300]})
        print(json.dumps(rows[-1], default=str), flush=True)
    return rows


def gpt2_table(rows: List[Dict[str, Any]]) -> str:
    eager = next((r for r in rows if r["path"].endswith(" eager") and "error" not in r), None)
    lines = [f"{'path':<17} {'first step s':>12} {'second s':>8} {'step ms':>8} {'vs eager':>8} {'host ms':>8} "
             f"{'loss after 12':>13} {'loss gap':>9}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['path']:<17} {r['error']}")
            continue
        ratio = f"{r['step_ms'] / eager['step_ms']:.2f}x" if eager else "-"
        gap = f"{abs(r['loss'] - eager['loss']) / abs(eager['loss']):.1e}" if eager else "-"
        lines.append(f"{r['path']:<17} {r['first_s']:>12.1f} {r['second_s']:>8.1f} {r['step_ms']:>8.1f} {ratio:>8} "
                     f"{r['host_ms']:>8.1f} {r['loss']:>13.5f} {gap:>9}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="a folder for the lazy GPT-2 steps' profile and the figures as JSON")
    ap.add_argument("--models", nargs="*", default=["gpt2", "bert", "resnet18", "llama", "t5", "vit"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--skip", nargs="*", default=[],
                    choices=["host", "parity", "parity-lazy", "parity-compiled", "gpt2"],
                    help="parts left out (parity: both of its halves)")
    ap.add_argument("--paths", nargs="*", default=list(PATHS), choices=PATHS, help="the GPT-2 paths to run")
    ap.add_argument("--size", choices=list(SIZES), default="realistic", help="GPT-2's size")
    ap.add_argument("--eager-device", default="cuda",
                    help="where torch's eager and inductor run (cpu: to try the script without a GPU)")
    ap.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.path:
        print(json.dumps(gpt2_path(args.path, args.size, args.eager_device, args.out), default=str))
        return
    if args.eager_device == "cuda" and os.environ.get("XLAPROF_DEVICE") != "cuda":
        sys.exit("run with XLAPROF_DEVICE=cuda (the engine on a CUDA plugin)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(f"GPU: {gpu}; torch {torch.__version__}; "
          f"plugin: {os.environ.get('XLAPROF_PJRT_PLUGIN') or 'found on sys.path'}", flush=True)
    figures: Dict[str, Any] = {}
    if "host" not in args.skip:
        figures["host"] = h = host_cost()
        print(f"\n== host: recording one aten op: {h['per_op_us']:.2f} us; a no-op wrapper subclass "
              f"{h['floor_us']:.2f} us (ours beyond it {h['per_op_us'] - h['floor_us']:.2f} us)", flush=True)
    if not {"parity", "parity-lazy"} & set(args.skip):
        print(f"\n== parity: {args.steps} AdamW steps, lazy on the engine vs {args.eager_device} eager (f32)",
              flush=True)
        figures["parity"] = text = parity(args.models, args.steps, args.eager_device)
        print(text, flush=True)
    if not {"parity", "parity-compiled"} & set(args.skip):
        print(f"\n== parity: {args.steps} AdamW steps under torch.compile(backend=\"xlaprof\") vs "
              f"{args.eager_device} eager (f32)", flush=True)
        figures["parity_compiled"] = text = parity(args.models, args.steps, args.eager_device, compiled=True)
        print(text, flush=True)
    if "gpt2" not in args.skip:
        layers, width, _, seq, batch = SIZES[args.size]
        print(f"\n== GPT-2 {layers} layers, d={width}, seq {seq}, batch {batch}, AdamW "
              f"({STEPS} steps timed after 2)", flush=True)
        rows = gpt2_runs(args.out, args.size, args.eager_device, args.paths)
        figures["gpt2"] = rows
        print(gpt2_table(rows), flush=True)
        lazy = next((r for r in rows if r["path"] == "xlaprof lazy" and "error" not in r), None)
        if lazy:
            # Recording that fills the step leaves the device waiting: the host is the bottleneck.
            ahead = lazy["host_ms"] < 0.9 * lazy["step_ms"]
            print(f"lazy: the host records a step's aten ops in {lazy['host_ms']:.1f} ms of the "
                  f"{lazy['step_ms']:.1f} ms step: "
                  f"{'the device is the bottleneck, the host runs ahead' if ahead else 'the host is the bottleneck'}",
                  flush=True)
        for r in rows:
            if "profile_steps" in r:
                print(f"{r['path']}: the profile of the {STEPS} timed steps has {r['profile_steps']} steps; "
                      f"device memory: {r['device_memory']}", flush=True)
    if args.out:
        pathlib.Path(args.out, "torch_gpu.json").write_text(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
