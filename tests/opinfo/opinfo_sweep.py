"""PyTorch's OpInfo database run on the xlaprof device against torch's CPU kernels.

For each OpInfo with float32 on the CPU: its first N samples, on our device and on the CPU, the
results compared as PyTorch/XLA's test/test_ops.py compares them (rtol = atol = 1e-3; 1.6e-2, torch's
own bfloat16 tolerance, for bfloat16 and float16 results; ops whose values are random are held to
shape and dtype only). `--dtype int64` and `--dtype bfloat16` sweep the OpInfos of those dtypes. Each OpInfo ends as one of:

    passed      every sample matched, and no aten op ran on the CPU fallback
    fallback    every sample matched, with at least one aten op run by the CPU fallback
    mismatch    a sample's values differ
    dtype       a sample's dtype or shape differs
    unsupported an error naming what xlaprof does not support (complex, a dtype, ...)
    error       another exception
    crash       the process died (the sweep goes on in a new one)

    python tests/opinfo/opinfo_sweep.py               # every OpInfo, 3 samples each: the table
    python tests/opinfo/opinfo_sweep.py --samples 1 --ops add,mul --verbose
    python tests/opinfo/opinfo_sweep.py --db foreach  # the multi-tensor ops (`torch._foreach_*`)
    python tests/opinfo/opinfo_sweep.py --compiled    # each op under torch.compile(backend="xlaprof")
    python tests/opinfo/opinfo_sweep.py --grad        # each op's gradients (its backward's ops)

Under `--compiled` each sample runs as `torch.compile(op, backend="xlaprof")` on the device's
tensors, and an OpInfo passes only if the backend captured its graphs (none recorded at each call
for want of a capture) and nothing fell back; one whose samples Dynamo ran without handing the
backend a graph ends as

    uncompiled  Dynamo ran it eagerly (a graph break before any op, or an op it does not trace)

Under `--grad` each OpInfo that supports autograd is differentiated instead: its samples' outputs
(as `output_process_fn_grad` picks them, through the OpInfo's `gradcheck_wrapper`) are given
random output gradients, the same on both sides, and the gradients of every input that requires
one, computed by torch's autograd above the device, are compared with the CPU's at the same
tolerances. This judges the backward ops that training runs (`upsample_bilinear2d_backward`,
`embedding_dense_backward`, ...), which a forward never reaches. OpInfos without autograd, and
those of random ops (whose values the CPU draws differently), are left out of its table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

RANDOM = ("rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "empty", "randint",
          "cauchy", "exponential", "geometric", "log_normal", "poisson", "rrelu")
OUTCOMES = ("passed", "fallback", "uncompiled", "mismatch", "dtype", "unsupported", "error", "crash")


def _ops(dtype_name: str, db: str = "ops") -> List[Any]:
    import torch
    from torch.testing._internal import common_methods_invocations as infos

    dtype = getattr(torch, dtype_name)
    ops = infos.foreach_op_db if db == "foreach" else infos.op_db
    return [op for op in ops if dtype in op.supported_dtypes("cpu")]


def _key(op: Any) -> str:
    return op.name + (("." + op.variant_test_name) if op.variant_test_name else "")


def _run_one(op: Any, samples: int, dtype_name: str, compiled: bool = False, grad: bool = False) -> Tuple[str, str]:
    if grad:
        return _run_grad(op, samples, dtype_name)
    import torch
    import xlaprof.torch as xt
    from torch.utils._pytree import tree_map
    from xlaprof.torch import _compile

    dev = xt.device()
    run = op
    if compiled:
        torch._dynamo.reset()  # a fresh cache: every OpInfo's lambda shares one code object

        def call(*args: Any, **kwargs: Any) -> Any:
            return op(*args, **kwargs)

        run = torch.compile(call, backend="xlaprof")
        captured = _compile.stats()["captured"]
        uncaptured = _compile.stats()["uncaptured"]
    dtype = getattr(torch, dtype_name)
    random = any(r in op.name for r in RANDOM)
    before = sum(c for c, _ in xt.fallbacks().values())

    def to_dev(a: Any) -> Any:
        return a.to(dev) if isinstance(a, torch.Tensor) else a

    def cpu(a: Any) -> Any:
        return a.cpu() if isinstance(a, torch.Tensor) else a

    seen = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        if seen == samples:
            break
        seen += 1
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            seen -= 1  # a sample the CPU itself rejects is not a test of ours
            continue
        try:
            args = tree_map(to_dev, (sample.input, sample.args, sample.kwargs))
            got = run(args[0], *args[1], **args[2])
            got = tree_map(cpu, got)
        except Exception as e:  # noqa: BLE001  (the sweep records every failure)
            return _failure(e)
        exp_flat = list(_flatten(expected))
        got_flat = list(_flatten(got))
        if len(exp_flat) != len(got_flat):
            return "dtype", f"{len(got_flat)} results, expected {len(exp_flat)}"
        for e, g in zip(exp_flat, got_flat):
            if isinstance(e, torch.Tensor):
                if not isinstance(g, torch.Tensor):
                    return "dtype", f"got {type(g).__name__}, expected a tensor"
                if e.dtype != g.dtype or tuple(e.shape) != tuple(g.shape):
                    return "dtype", f"got {g.dtype}{list(g.shape)}, expected {e.dtype}{list(e.shape)}"
                if random or e.is_complex():
                    continue
                try:
                    tol = 1.6e-2 if e.dtype in (torch.bfloat16, torch.float16) else 1e-3
                    torch.testing.assert_close(g, e, rtol=tol, atol=tol, equal_nan=True)
                except AssertionError as err:
                    return "mismatch", str(err).splitlines()[0][:160]
            elif isinstance(e, float) and not random:
                if not (abs(e - float(g)) <= 1e-3 + 1e-3 * abs(e) or (e != e and g != g)):
                    return "mismatch", f"{g} != {e}"
    if seen == 0:
        return "error", "no sample ran on the CPU"
    if compiled and (_compile.stats()["captured"], _compile.stats()["uncaptured"]) == (captured, uncaptured):
        # Before the fallback: an op Dynamo left to eager torch is not compiled, whether or not
        # it then ran on the CPU fallback.
        return "uncompiled", "Dynamo handed the backend no graph"
    used = sum(c for c, _ in xt.fallbacks().values()) - before
    if used:
        names = ",".join(sorted(xt.fallbacks()))
        return "fallback", f"CPU fallback: {names}"[:160]
    if compiled and _compile.stats()["uncaptured"] != uncaptured:
        return "fallback", "a graph recorded at each call (not captured)"
    return "passed", ""


def _run_grad(op: Any, samples: int, dtype_name: str) -> Tuple[str, str]:
    """An OpInfo's gradients on the device against the CPU's (see the module's doc)."""
    import torch
    import xlaprof.torch as xt
    from torch.utils._pytree import tree_flatten, tree_map

    dev = xt.device()
    dtype = getattr(torch, dtype_name)
    before = sum(c for c, _ in xt.fallbacks().values())

    def run(sample: Any, move: Callable[[Any], Any]) -> Tuple[List[Any], List[Any]]:
        """The sample moved by ``move`` (a leaf that requires a gradient stays one), its outputs to
        differentiate, and the leaves."""
        def leaf(a: Any) -> Any:
            if not isinstance(a, torch.Tensor):
                return a
            return move(a.detach()).requires_grad_(a.requires_grad)

        x, args, kwargs = tree_map(leaf, (sample.input, sample.args, sample.kwargs))
        leaves = [t for t in tree_flatten((x, args, kwargs))[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        out = sample.output_process_fn_grad(op.gradcheck_wrapper(op, x, *args, **kwargs))
        outs = [t for t in _flatten(out) if isinstance(t, torch.Tensor) and t.requires_grad
                and (t.is_floating_point() or t.is_complex())]
        return outs, leaves

    seen = 0
    g = torch.Generator().manual_seed(0)
    for sample in op.sample_inputs("cpu", dtype, requires_grad=True):
        if seen == samples:
            break
        try:
            outs, leaves = run(sample, lambda t: t)
            if not outs or not leaves or all(t.numel() == 0 for t in leaves):
                continue  # nothing to differentiate (an empty input's gradient has no values)
            cotangents = [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in outs]
            expected = torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)
        except Exception:
            continue  # a sample the CPU itself cannot differentiate is not a test of ours
        seen += 1
        try:
            outs_d, leaves_d = run(sample, lambda t: t.to(dev))
            if len(outs_d) != len(outs):
                return "dtype", f"{len(outs_d)} differentiable results, expected {len(outs)}"
            # (Each output gradient on its output's device: `to("cpu")`'s result is on the CPU.)
            got = torch.autograd.grad(outs_d, leaves_d, [c.to(o.device) for c, o in zip(cotangents, outs_d)],
                                      allow_unused=True)
            got = [None if t is None else t.cpu() for t in got]
        except Exception as e:  # noqa: BLE001  (the sweep records every failure)
            return _failure(e)
        for i, (e, r) in enumerate(zip(expected, got)):
            if e is None or r is None:
                if (e is None) != (r is None) and (e if r is None else r).abs().max() > 0:
                    return "mismatch", f"the gradient of input {i} is missing on one side"
                continue
            if e.dtype != r.dtype or tuple(e.shape) != tuple(r.shape):
                return "dtype", f"gradient {i}: got {r.dtype}{list(r.shape)}, expected {e.dtype}{list(e.shape)}"
            try:
                tol = 1.6e-2 if e.dtype in (torch.bfloat16, torch.float16) else 1e-3
                torch.testing.assert_close(r, e, rtol=tol, atol=tol, equal_nan=True)
            except AssertionError as err:
                return "mismatch", f"gradient {i}: " + str(err).splitlines()[0][:150]
    if seen == 0:
        return "error", "no sample was differentiated on the CPU"
    used = sum(c for c, _ in xt.fallbacks().values()) - before
    if used:
        return "fallback", f"CPU fallback: {','.join(sorted(xt.fallbacks()))}"[:160]
    return "passed", ""


def _grad_ops(ops: List[Any]) -> List[Any]:
    """The OpInfos the gradient sweep judges: those with autograd, random ones left out."""
    return [op for op in ops if op.supports_autograd and not any(r in op.name for r in RANDOM)]


def _failure(e: Exception) -> Tuple[str, str]:
    """A sample's exception as an outcome: what the device does not support, or an error."""
    text = str(e).splitlines()[0][:160] if str(e) else ""
    if isinstance(e, (TypeError, NotImplementedError)) and (
            "not supported on the xlaprof device" in str(e) or "not lowered" in str(e)):
        return "unsupported", text
    return "error", f"{type(e).__name__}: {text}"


def _flatten(x: Any) -> Iterator[Any]:
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _flatten(v)
    else:
        yield x


def worker(start: int, samples: int, dtype_name: str, names: Optional[List[str]], db: str,
           compiled: bool = False, grad: bool = False) -> None:
    """Runs OpInfos from index ``start`` on (see `run_entries`)."""
    ops = _ops(dtype_name, db)
    if grad:
        ops = _grad_ops(ops)
    entries = [(_key(op), not names or _key(op) in names or op.name in names, op) for op in ops]
    run_entries(entries, start, lambda op: _run_one(op, samples, dtype_name, compiled, grad))


def run_entries(entries: List[Tuple[str, bool, Any]], start: int, run: Callable[[Any], Tuple[str, str]]) -> None:
    """A worker's loop, the three sweeps' (OpInfos, ModuleInfos, optimizers): ``run`` on each
    selected entry (name, selected, entry) from index ``start`` on, a JSON line as each starts
    and as it ends, flushed, so that `run_workers` knows where a dying worker was."""
    warnings.simplefilter("ignore")
    import xlaprof.torch  # noqa: F401
    from xlaprof.torch import _dispatch

    for i, (name, selected, entry) in enumerate(entries):
        if i < start or not selected:
            continue
        print(json.dumps({"index": i, "op": name, "start": True}), flush=True)
        _dispatch._FALLBACKS.clear()
        t = time.perf_counter()
        outcome, why = run(entry)
        print(json.dumps({"index": i, "op": name, "outcome": outcome, "why": why,
                          "seconds": round(time.perf_counter() - t, 3)}), flush=True)


def sweep(samples: int = 3, dtype_name: str = "float32", names: Optional[List[str]] = None,
          verbose: bool = False, db: str = "ops", compiled: bool = False, grad: bool = False) -> Dict[str, Tuple[str, str]]:
    """Every OpInfo's outcome, each batch of OpInfos in a child process so a crash costs one.
    ``db``: ``ops`` (torch's ``op_db``) or ``foreach`` (its ``foreach_op_db``); ``compiled``:
    each op under ``torch.compile(backend="xlaprof")``; ``grad``: each op's gradients."""

    def command(start: int) -> List[str]:
        cmd = [sys.executable, __file__, "--worker", str(start), "--samples", str(samples),
               "--dtype", dtype_name, "--db", db]
        if names:
            cmd += ["--ops", ",".join(names)]
        if compiled:
            cmd.append("--compiled")
        if grad:
            cmd.append("--grad")
        return cmd

    return run_workers(command, verbose)


def run_workers(command: Callable[[int], List[str]], verbose: bool = False) -> Dict[str, Tuple[str, str]]:
    """Runs ``command(start)`` (a worker printing a JSON line as each entry starts and ends, from
    index ``start`` on) until the database is done, a worker dying inside an entry recording it
    as a crash and the next worker starting after it (the module sweep's workers too)."""
    results: Dict[str, Tuple[str, str]] = {}
    start = 0
    while True:
        cmd = command(start)
        errors = tempfile.TemporaryFile("w+")  # the worker's stderr: the last line says why it died early
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True,
                                env={**os.environ, "XLAPROF_STRICT": ""})
        current = None
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("start"):
                current = rec
                continue
            results[rec["op"]] = (rec["outcome"], rec["why"])
            current = None
            if verbose:
                print(f"{rec['op']:40} {rec['outcome']:12} {rec['seconds']:7.2f}s {rec['why']}", flush=True)
        rc = proc.wait()
        if current is None:
            if rc != 0 and not results:
                errors.seek(0)
                last = (errors.read().strip().splitlines() or ["(nothing on stderr)"])[-1]
                raise SystemExit(f"the sweep's worker failed before its first entry (exit status {rc}): "
                                 f"{last}; run `{' '.join(cmd)}` to see more")
            break
        # The child died inside `current`: record it and go on after it.
        results[current["op"]] = ("crash", f"the process died (exit status {rc})")
        if verbose:
            print(f"{current['op']:40} crash (exit status {rc})", flush=True)
        start = current["index"] + 1
    return results


def table(results: Dict[str, Tuple[str, str]], what: str = "OpInfos", outcomes: Tuple[str, ...] = OUTCOMES) -> str:
    counts = {o: 0 for o in outcomes}
    for outcome, _ in results.values():
        counts[outcome] += 1
    total = len(results) or 1
    native = counts["passed"]
    with_fallback = native + counts["fallback"]
    lines = [f"{'outcome':12} {what:>11}"]
    lines += [f"{o:12} {counts[o]:11d}" for o in outcomes]
    lines.append(f"{'total':12} {len(results):11d}")
    lines.append(f"passed natively: {native}/{len(results)} ({100 * native / total:.1f}%); "
                 f"with the CPU fallback: {with_fallback}/{len(results)} ({100 * with_fallback / total:.1f}%)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--ops", default="")
    ap.add_argument("--db", choices=("ops", "foreach"), default="ops",
                    help="torch's op_db (default) or its foreach_op_db")
    ap.add_argument("--compiled", action="store_true", help='each op under torch.compile(backend="xlaprof")')
    ap.add_argument("--grad", action="store_true", help="each op's gradients against the CPU's")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", default="", help="also write every OpInfo's outcome to this file")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    names = [n for n in a.ops.split(",") if n] or None
    if a.worker is not None:
        worker(a.worker, a.samples, a.dtype, names, a.db, a.compiled, a.grad)
        return
    results = sweep(a.samples, a.dtype, names, a.verbose, a.db, a.compiled, a.grad)
    report(results, table(results), a.verbose, a.json)


def report(results: Dict[str, Tuple[str, str]], summary: str, verbose: bool, json_path: str = "") -> None:
    """Each entry's outcome (printed as it ran when ``verbose``), the table, and the outcomes
    as JSON where asked."""
    if not verbose:
        for name, (outcome, why) in sorted(results.items()):
            print(f"{name:40} {outcome:12} {why}")
    print(summary)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({k: list(v) for k, v in results.items()}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
