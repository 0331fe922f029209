"""PyTorch's ModuleInfo database (`torch.testing._internal.common_modules.module_db`, the modules
of its test_modules.py) run on the xlaprof device against torch's CPU kernels, as a user runs a
module: built on the CPU, moved with ``.to(device)``, trained.

For each ModuleInfo with float32 and each of its first N samples, in training mode (and in eval
mode too where the two differ): the same module twice, from one seed, one kept on the CPU and
one moved to the device; the same forward inputs (requiring gradients); the same gradients for
the outputs. Compared as the OpInfo sweep compares (rtol = atol = 1e-3):

- what ``.to(device)`` keeps: the parameters' and buffers' names, count and sharing;
- the forward's outputs;
- after the backward, every input's and every parameter's gradient;
- the buffers after the forward (a batch norm's running statistics).

Floating-point tensors among a module's constructor arguments (``FractionalMaxPool``'s samples)
are made float32, as torch's own module tests move a module to the dtype under test. Each
ModuleInfo ends as one of

    passed      every sample matched, and no aten op ran on the CPU fallback
    fallback    every sample matched, with at least one aten op run by the CPU fallback
    mismatch    a value differs (the message names it: output, a gradient, a buffer)
    dtype       a shape, dtype or structure differs, or ``.to(device)`` lost a parameter
    unsupported an error naming what xlaprof does not support
    error       another exception
    crash       the process died (the sweep goes on in a new one)

    python tests/opinfo/module_sweep.py                  # every ModuleInfo, 3 samples: the table
    python tests/opinfo/module_sweep.py --samples 1 --modules nn.Linear,nn.LSTM --verbose
    python tests/opinfo/module_sweep.py --compiled    # the device's module under torch.compile

Under ``--compiled`` the device's module runs as ``torch.compile(module, backend="xlaprof")``
(forward and backward), and a ModuleInfo passes only if the backend captured its graphs (none
recorded at each call for want of a capture) and nothing fell back; one whose samples Dynamo ran
without handing the backend a graph ends as

    uncompiled  Dynamo ran it eagerly
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

import opinfo_sweep

OUTCOMES = ("passed", "fallback", "uncompiled", "mismatch", "dtype", "unsupported", "error", "crash")
TOL = 1e-3


def _modules() -> List[Any]:
    import torch
    from torch.testing._internal.common_modules import module_db

    return [m for m in module_db if torch.float32 in m.dtypes]


class Differs(Exception):
    """A difference between the device's module and the CPU's: (outcome, message)."""

    def __init__(self, outcome: str, why: str) -> None:
        super().__init__(why)
        self.outcome = outcome


def _flat(x: Any) -> Iterator[Any]:
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _flat(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _flat(v)
    else:
        yield x


def _compare(what: str, got: Any, expected: Any) -> None:
    import torch

    if expected is None or got is None:
        if (expected is None) != (got is None):
            raise Differs("dtype", f"{what}: got {type(got).__name__}, expected {type(expected).__name__}")
        return
    if tuple(got.shape) != tuple(expected.shape) or got.dtype != expected.dtype:
        raise Differs("dtype", f"{what}: got {got.dtype}{list(got.shape)}, "
                               f"expected {expected.dtype}{list(expected.shape)}")
    try:
        torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=TOL, atol=TOL, equal_nan=True)
    except AssertionError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        raise Differs("mismatch", f"{what}: " + "; ".join(lines[1:3])[:150]) from None


def _same_structure(dev: Any, cpu: Any) -> None:
    """What ``.to(device)`` must keep: names, count and sharing of parameters and buffers."""
    for kind in ("parameters", "buffers"):
        got = [n for n, _ in getattr(dev, "named_" + kind)(remove_duplicate=False)]
        expected = [n for n, _ in getattr(cpu, "named_" + kind)(remove_duplicate=False)]
        if got != expected:
            raise Differs("dtype", f"{kind} after .to(device): {got}, expected {expected}")
        shared = [len({id(t) for t in getattr(m, kind)()}) for m in (dev, cpu)]
        if shared[0] != shared[1]:
            raise Differs("dtype", f"{shared[0]} distinct {kind} after .to(device), {shared[1]} before")


def _run_sample(info: Any, sample: Any, training: bool, dev: Any, compiled: bool) -> bool:
    """One sample in one mode; False when the CPU itself rejects it (not a test of ours)."""
    import torch
    from torch.utils._pytree import tree_map

    cargs, ckwargs = tree_map(_float32, (sample.constructor_input.args, sample.constructor_input.kwargs))
    fin = sample.forward_input
    fargs, fkwargs = (fin.args, fin.kwargs) if fin is not None else ((), {})
    torch.manual_seed(0)
    try:
        cpu = info.module_cls(*cargs, **ckwargs)
        cpu.train(training)
        # A first call on the CPU: a sample it rejects is skipped, and a lazy module's
        # parameters are made there, so that both sides start from the same values.
        cpu(*tree_map(_detached, fargs), **tree_map(_detached, fkwargs))
    except Exception:  # noqa: BLE001
        return False
    device = copy.deepcopy(cpu).to(dev)
    _same_structure(device, cpu)

    cpu_args = tree_map(_detached, (fargs, fkwargs))
    dev_args = tree_map(lambda a: _on(a, dev), cpu_args)
    call = torch.compile(device, backend="xlaprof") if compiled else device
    torch.manual_seed(1)
    expected = cpu(*cpu_args[0], **cpu_args[1])
    got = call(*dev_args[0], **dev_args[1])
    exp_out, got_out = list(_flat(expected)), list(_flat(got))
    if len(exp_out) != len(got_out):
        raise Differs("dtype", f"{len(got_out)} outputs, expected {len(exp_out)}")
    for i, (g, e) in enumerate(zip(got_out, exp_out)):
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                raise Differs("dtype", f"output {i}: got {type(g).__name__}, expected a tensor")
            _compare(f"output {i}", g, e)
    for (name, g), (_, e) in zip(device.named_buffers(), cpu.named_buffers()):
        _compare(f"buffer {name} after the forward", g, e)

    # The backward from the same output gradients on both sides.
    pairs = [(g, e) for g, e in zip(got_out, exp_out)
             if isinstance(e, torch.Tensor) and e.requires_grad and e.dtype.is_floating_point]
    if not pairs:
        return True
    torch.manual_seed(2)
    grads = [torch.randn_like(e) for _, e in pairs]
    torch.autograd.backward([e for _, e in pairs], grads)
    torch.autograd.backward([g for g, _ in pairs], [t.to(dev) for t in grads])
    got_in, exp_in = list(_flat(dev_args)), list(_flat(cpu_args))
    for i, (g, e) in enumerate(zip(got_in, exp_in)):
        if isinstance(e, torch.Tensor) and e.requires_grad:
            _compare(f"gradient of input {i}", g.grad, e.grad)
    for (name, g), (_, e) in zip(device.named_parameters(), cpu.named_parameters()):
        _compare(f"gradient of {name}", g.grad, e.grad)
    return True


def _float32(a: Any) -> Any:
    import torch

    return a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a


def _detached(a: Any) -> Any:
    import torch

    if isinstance(a, torch.Tensor):
        return a.detach().clone().requires_grad_(a.requires_grad)
    return a


def _on(a: Any, dev: Any) -> Any:
    import torch

    if isinstance(a, torch.Tensor):
        return a.detach().to(dev).requires_grad_(a.requires_grad)
    return a


def _run_one(info: Any, samples: int, compiled: bool = False) -> Tuple[str, str]:
    import torch
    import xlaprof.torch as xt
    from xlaprof.torch import _compile

    dev = xt.device()
    if compiled:
        torch._dynamo.reset()
        captured, uncaptured = _compile.stats()["captured"], _compile.stats()["uncaptured"]
    before = sum(c for c, _ in xt.fallbacks().values())
    inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True,
                                     training=True)
    modes = (True, False) if info.train_and_eval_differ else (True,)
    ran = 0
    for sample in inputs[:samples]:
        for training in modes:
            try:
                ran += _run_sample(info, sample, training, dev, compiled)
            except Differs as d:
                return d.outcome, f"{sample.desc or 'sample'} ({'train' if training else 'eval'}): {d}"
            except Exception as e:  # noqa: BLE001  (the sweep records every failure)
                text = str(e).splitlines()[0][:160] if str(e) else ""
                unsupported = "not supported on the xlaprof device" in text or "not lowered" in text
                return ("unsupported" if unsupported else "error"), f"{type(e).__name__}: {text}"
    if not ran:
        return "error", "no sample ran on the CPU"
    if compiled and (_compile.stats()["captured"], _compile.stats()["uncaptured"]) == (captured, uncaptured):
        return "uncompiled", "Dynamo handed the backend no graph"
    used = sum(c for c, _ in xt.fallbacks().values()) - before
    if used:
        return "fallback", f"CPU fallback: {','.join(sorted(xt.fallbacks()))}"[:160]
    if compiled and _compile.stats()["uncaptured"] != uncaptured:
        return "fallback", "a graph recorded at each call (not captured)"
    return "passed", ""


def worker(start: int, samples: int, names: Optional[List[str]], compiled: bool) -> None:
    """Runs ModuleInfos from index ``start`` on (see `opinfo_sweep.run_entries`)."""
    entries = [(m.name, not names or m.name in names, m) for m in _modules()]
    opinfo_sweep.run_entries(entries, start, lambda info: _run_one(info, samples, compiled))


def sweep(samples: int = 3, names: Optional[List[str]] = None, verbose: bool = False,
          compiled: bool = False) -> Dict[str, Tuple[str, str]]:
    """Every ModuleInfo's outcome, each batch in a child process so a crash costs one."""

    def command(start: int) -> List[str]:
        cmd = [sys.executable, __file__, "--worker", str(start), "--samples", str(samples)]
        cmd += ["--compiled"] if compiled else []
        return cmd + (["--modules", ",".join(names)] if names else [])

    return opinfo_sweep.run_workers(command, verbose)


def table(results: Dict[str, Tuple[str, str]]) -> str:
    return opinfo_sweep.table(results, "ModuleInfos", OUTCOMES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--modules", default="")
    ap.add_argument("--compiled", action="store_true", help='the module under torch.compile(backend="xlaprof")')
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", default="", help="also write every ModuleInfo's outcome to this file")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    names = [n for n in a.modules.split(",") if n] or None
    if a.worker is not None:
        worker(a.worker, a.samples, names, a.compiled)
        return
    results = sweep(a.samples, names, a.verbose, a.compiled)
    opinfo_sweep.report(results, table(results), a.verbose, a.json)


if __name__ == "__main__":
    main()
