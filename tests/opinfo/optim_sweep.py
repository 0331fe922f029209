"""PyTorch's OptimizerInfo database (`torch.testing._internal.common_optimizers.optim_db`, the
optimizers and settings of its test_optim.py) run on the xlaprof device against the CPU.

For each optimizer, each of its settings (``optim_inputs_func``: learning rates, weight decay,
``maximize``, ``amsgrad``, momentum, ...) and each implementation it has (the per-parameter
loop, ``foreach``, ``fused``): the same small problem on both sides, a weight and a bias fitted
by a closure that computes a loss and its gradients with autograd, ``STEPS`` steps; after each
step every parameter is compared with the CPU's (rtol = atol = 1e-4: float32 rounding, carried
through the steps; 1e-3 for ``Muon``, which orthogonalizes its update in bfloat16 as torch
writes it). An optimizer ends as the worst of its settings:

    passed      every setting matched, and no aten op ran on the CPU fallback
    fallback    every setting matched, with at least one aten op run by the CPU fallback
    mismatch    a parameter differs (the message names the setting, the step and the parameter)
    unsupported an error naming what xlaprof does not support
    error       another exception
    crash       the process died (the sweep goes on in a new one)

A setting the CPU itself rejects is not a test of ours and is skipped; ``SparseAdam`` (sparse
gradients only) too. Optimizers for matrices alone (``Muon``) fit the weight alone. ``LBFGS``
runs two inner iterations a step (``max_iter=2`` unless the setting says): each of its default
twenty reads values on the host and, its history growing, is a graph of its own on a lazy
device, compiled once (minutes a step on the CPU plugin, as it would be on any lazy device).

A ``maximize`` setting climbs the negated loss, which has the same optimum. Climbing the loss
itself, which grows without bound, made ``LBFGS``'s line search a coin toss: its cubic step
divides by a difference that crosses zero, so one ulp in a gradient moved the step tenfold, and
the CPU in float32 disagreed with the CPU in float64 (the device agreed with float64).

    python tests/opinfo/optim_sweep.py                          # every optimizer: the table
    python tests/opinfo/optim_sweep.py --optimizers Adam,SGD --verbose
    python tests/opinfo/optim_sweep.py --settings 3     # the first 3 settings of each (the test's)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import opinfo_sweep

OUTCOMES = ("passed", "fallback", "mismatch", "unsupported", "error", "crash")
STEPS = 5
TOL = 1e-4
# Optimizers that compute their update in bfloat16 (torch's Newton-Schulz iteration in Muon).
TOL_BFLOAT16 = {"Muon": 1e-3}


def _optimizers() -> List[Any]:
    from torch.testing._internal.common_optimizers import optim_db

    return [o for o in optim_db if not o.only_supports_sparse_grads]


class Differs(Exception):
    pass


def _problem(device: Any, matrices_only: bool = False,
             maximize: bool = False) -> Tuple[List[Any], Callable[[Any], Any]]:
    """A weight and a bias (the same numbers on every device; the weight alone for an optimizer
    of matrices) and the closure that fits them. A maximizing optimizer is given the loss
    negated, so that it climbs to the same optimum: the loss itself has no maximum, and climbing
    it is ill-conditioned (see the module's docstring)."""
    import torch

    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 4, generator=g).to(device).requires_grad_()
    b = torch.randn(3, generator=g).to(device).requires_grad_()
    x = torch.randn(8, 4, generator=g).to(device)
    y = torch.randn(8, 3, generator=g).to(device)

    def closure_for(opt: Any) -> Callable[[], Any]:
        def closure() -> Any:
            opt.zero_grad()
            loss = ((x @ w.T + b - y) ** 2).mean() + 0.1 * (b * b).sum()
            if maximize:
                loss = -loss
            loss.backward()
            return loss

        return closure

    return ([w] if matrices_only else [w, b]), closure_for


def _settings(info: Any, limit: Optional[int] = None) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(description, constructor keywords) of each setting and implementation (of the first
    ``limit`` settings)."""
    impls = [("loop", {"foreach": False})] if "foreach" in info.supported_impls else [("", {})]
    if "foreach" in info.supported_impls:
        impls.append(("foreach", {"foreach": True}))
    if "fused" in info.supported_impls:
        impls.append(("fused", {"fused": True}))
    for optim_input in info.optim_inputs_func(device="cpu")[:limit]:
        for impl, flags in impls:
            kwargs = {**optim_input.kwargs, **flags}
            if info.optim_cls.__name__ == "LBFGS":
                kwargs.setdefault("max_iter", 2)
            name = ", ".join(f"{k}={v}" for k, v in optim_input.kwargs.items()) or "default"
            yield f"{name}{' (' + impl + ')' if impl else ''}", kwargs


def _cpu_accepts(info: Any, kwargs: Dict[str, Any], matrices_only: bool) -> bool:
    params, closure = _problem("cpu", matrices_only, kwargs.get("maximize", False))
    try:
        opt = info.optim_cls(params, **kwargs)
        opt.step(closure(opt))
    except Exception:  # noqa: BLE001
        return False
    return True


def _run_setting(info: Any, kwargs: Dict[str, Any], dev: Any) -> bool:
    """One setting on both sides; False when the CPU rejects it."""
    import torch

    matrices_only = not _cpu_accepts(info, kwargs, False)
    if matrices_only and not _cpu_accepts(info, kwargs, True):
        return False
    maximize = kwargs.get("maximize", False)
    cpu_params, cpu_closure = _problem("cpu", matrices_only, maximize)
    cpu_opt = info.optim_cls(cpu_params, **kwargs)
    dev_params, dev_closure = _problem(dev, matrices_only, maximize)
    dev_opt = info.optim_cls(dev_params, **kwargs)
    names = ("weight", "bias")
    for step in range(1, STEPS + 1):
        cpu_opt.step(cpu_closure(cpu_opt))
        dev_opt.step(dev_closure(dev_opt))
        for name, got, want in zip(names, dev_params, cpu_params):
            try:
                tol = TOL_BFLOAT16.get(info.optim_cls.__name__, TOL)
                torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=tol, atol=tol)
            except AssertionError as err:
                lines = [line.strip() for line in str(err).splitlines() if line.strip()]
                raise Differs(f"step {step}, {name}: " + "; ".join(lines[1:3])[:150]) from None
    return True


def _run_one(info: Any, limit: Optional[int] = None) -> Tuple[str, str]:
    import xlaprof.torch as xt

    dev = xt.device()
    before = sum(c for c, _ in xt.fallbacks().values())
    ran = 0
    for desc, kwargs in _settings(info, limit):
        try:
            ran += _run_setting(info, kwargs, dev)
        except Differs as d:
            return "mismatch", f"{desc}: {d}"
        except Exception as e:  # noqa: BLE001  (the sweep records every failure)
            text = str(e).splitlines()[0][:140] if str(e) else ""
            unsupported = "not supported on the xlaprof device" in text or "not lowered" in text
            return ("unsupported" if unsupported else "error"), f"{desc}: {type(e).__name__}: {text}"
    if not ran:
        return "error", "no setting ran on the CPU"
    used = sum(c for c, _ in xt.fallbacks().values()) - before
    if used:
        return "fallback", f"CPU fallback: {','.join(sorted(xt.fallbacks()))}"[:160]
    return "passed", f"{ran} settings"


def worker(start: int, names: Optional[List[str]], limit: Optional[int]) -> None:
    """Runs optimizers from index ``start`` on (see `opinfo_sweep.run_entries`)."""
    entries = [(o.optim_cls.__name__, not names or o.optim_cls.__name__ in names, o) for o in _optimizers()]
    opinfo_sweep.run_entries(entries, start, lambda info: _run_one(info, limit))


def sweep(names: Optional[List[str]] = None, verbose: bool = False,
          settings: Optional[int] = None) -> Dict[str, Tuple[str, str]]:
    """Every optimizer's outcome (over its first ``settings`` settings), each batch in a child
    process so a crash costs one."""

    def command(start: int) -> List[str]:
        cmd = [sys.executable, __file__, "--worker", str(start)]
        cmd += ["--settings", str(settings)] if settings else []
        return cmd + (["--optimizers", ",".join(names)] if names else [])

    return opinfo_sweep.run_workers(command, verbose)


def table(results: Dict[str, Tuple[str, str]]) -> str:
    return opinfo_sweep.table(results, "optimizers", OUTCOMES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--optimizers", default="")
    ap.add_argument("--settings", type=int, default=None, help="the first N settings of each optimizer")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    names = [n for n in a.optimizers.split(",") if n] or None
    if a.worker is not None:
        worker(a.worker, names, a.settings)
        return
    results = sweep(names, a.verbose, a.settings)
    opinfo_sweep.report(results, table(results), a.verbose)


if __name__ == "__main__":
    main()
