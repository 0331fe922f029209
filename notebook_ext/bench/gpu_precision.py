"""Whether the engine's f32 products on a GPU are f32: a convolution (forward, both gradients)
and a matrix product, on the engine and in CUDA eager with TF32 off and on, each against float64
on the CPU (the largest error relative to the largest value). An engine column at TF32's size
(about 3e-4) would mean the plugin multiplies in reduced precision; at eager f32's, it does not.

    XLAPROF_DEVICE=cuda python notebook_ext/bench/gpu_precision.py

Each column runs in a process of its own: torch cannot run a CUDA backward in a process where
xlaprof's device is registered (pytorch/pytorch#161129).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import List

import torch

PARTS = ["conv fwd", "conv dW", "conv dX", "matmul"]
# (label, where, extra environment)
VARIANTS = [("CUDA eager f32 (TF32 off)", "eager", {}), ("CUDA eager TF32", "tf32", {}),
            ("xlaprof", "engine", {}),
            ("xlaprof, XLA's autotuning off", "engine", {"XLA_FLAGS": "--xla_gpu_autotune_level=0"})]


def inputs() -> List[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 64, 28, 28, generator=g)
    w = torch.randn(64, 64, 3, 3, generator=g) * 0.05
    upstream = torch.randn(16, 64, 28, 28, generator=g)
    a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    return [x, w, upstream, a, b]


def products(device: object, dtype: torch.dtype = torch.float32) -> List[torch.Tensor]:
    x, w, upstream, a, b = (t.to(dtype).to(device) for t in inputs())
    x.requires_grad_()
    w.requires_grad_()
    y = torch.nn.functional.conv2d(x, w, padding=1)
    (y * upstream).sum().backward()
    return [t.detach().cpu().double() for t in (y, w.grad, x.grad, a @ b)]


def one(where: str, out: str) -> None:
    if where == "engine":
        import xlaprof.torch as xt

        device: object = xt.device()
    else:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = where == "tf32"
        device = "cuda"
    torch.save(products(device), out)


def main() -> None:
    if len(sys.argv) == 3:
        one(sys.argv[1], sys.argv[2])
        return
    reference = products("cpu", torch.float64)
    print(f"{'':<32}" + "".join(f"{p:>10}" for p in PARTS))
    for label, where, env in VARIANTS:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "products.pt")
            run = subprocess.run([sys.executable, __file__, where, out], env={**os.environ, **env},
                                 capture_output=True, text=True)
            if run.returncode:
                print(f"{label:<32} failed: {(run.stderr.strip().splitlines() or ['?'])[-1][:150]}")
                continue
            got = torch.load(out)
        errors = [float((g - r).abs().max() / r.abs().max()) for g, r in zip(got, reference)]
        print(f"{label:<32}" + "".join(f"{e:>10.1e}" for e in errors), flush=True)


if __name__ == "__main__":
    main()
