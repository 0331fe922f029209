"""A DDP training script in the manner of PyTorch's DDP tutorial and PyTorch/XLA's multi-process
MNIST test, run under torchrun: each rank reads its shard of the data (a DistributedSampler),
trains a small MLP wrapped in DistributedDataParallel, and all-reduces its running loss at the
end of each epoch for the log line.

    torchrun --nproc_per_node 4 train_ddp.py                      # CPU eager, gloo
    torchrun --nproc_per_node 4 train_ddp.py --compile           # torch.compile (inductor)
    torchrun --nproc_per_node 4 -m xlaprof.torch_xla train_ddp.py --xla   # the lazy device

What a job's profile must see, planted by a flag on one rank (`# planted` marks the lines):
--slow-rank R  rank R's samples are slow to load (its data pipeline holds the job back);
--ragged-rank R  rank R's batch at step 5 is shorter (a rank-dependent shape: a recompile);
--skip-rank R  rank R skips the final loss all-reduce (a rank-dependent branch: the job hangs).
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Points(torch.utils.data.Dataset):
    def __init__(self, n: int, delay: float) -> None:
        self.n, self.delay = n, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.delay:
            time.sleep(self.delay)  # planted: a slow decode on one rank
        g = torch.Generator().manual_seed(i)
        x = torch.randn(32, generator=g)
        return x, int(x.sum() > 0)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--xla", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--ragged-rank", type=int, default=-1)
    ap.add_argument("--skip-rank", type=int, default=-1)
    args = ap.parse_args()

    if args.xla:
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.parallel_loader as pl
        import torch_xla.distributed.xla_backend  # noqa: F401  (registers the "xla" backend)

        dist.init_process_group("xla", init_method="xla://")
        device = xm.xla_device()
    else:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    data = Points(args.steps * 8 * world, 0.02 if rank == args.slow_rank else 0.0)
    sampler = torch.utils.data.distributed.DistributedSampler(data, world, rank, shuffle=False)
    loader = torch.utils.data.DataLoader(data, batch_size=8, sampler=sampler)
    if args.xla:
        loader = pl.MpDeviceLoader(loader, device)

    model = DDP(MLP().to(device))
    if args.compile:
        model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        if step == 5 and rank == args.ragged_rank:
            x, y = x[:5], y[:5]  # planted: this rank's batch is cut short
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if args.xla:
            xm.mark_step()
        total += loss.detach()

    if rank != args.skip_rank:
        dist.all_reduce(total)  # planted: the other ranks wait here for one that skipped it
    else:
        time.sleep(120)  # planted: the skipping rank goes on (writes its checkpoint, ...)
    if rank == 0:
        print(f"mean loss {total.item() / (world * args.steps):.4f}", flush=True)
    dist.barrier()  # (gloo's teardown can abort a rank whose peers are still sending)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
