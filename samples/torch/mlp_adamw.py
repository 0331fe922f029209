"""A torch MLP trained with AdamW on the xlaprof device, as a PyTorch/XLA user writes it.

    .venv/bin/python samples/torch/mlp_adamw.py
    XLAPROF_PROFILE=mlp.xlaprof .venv/bin/python samples/torch/mlp_adamw.py   # then: xlaprof report mlp.xlaprof

It prints each step's loss next to the same step in torch's CPU eager, and the compiles.
"""

import torch

import xlaprof as xp
import xlaprof.torch as xt


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )


def main(steps: int = 8) -> None:
    dev = xt.device()
    eager = model()
    lazy = model().to(dev)
    opt_eager = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    opt_lazy = torch.optim.AdamW(lazy.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        x = torch.randn(64, 784, generator=g)
        y = torch.randint(0, 10, (64,), generator=g)

        loss = torch.nn.functional.cross_entropy(lazy(x.to(dev)), y.to(dev))
        loss.backward()
        opt_lazy.step()
        opt_lazy.zero_grad()
        xt.step()

        ref = torch.nn.functional.cross_entropy(eager(x), y)
        ref.backward()
        opt_eager.step()
        opt_eager.zero_grad()
        print(f"step {step}: loss {loss.item():.6f} (CPU eager {ref.item():.6f}), "
              f"compiles so far {xp.counters()['compiles']}")


if __name__ == "__main__":
    main()
