"""DDP in the manner of PyTorch's DDP tutorial: ``torch.multiprocessing.spawn`` starts the
processes, each joins the group with its rank (no torchrun, no ``RANK`` in the environment) and
trains a toy model for a few steps.

    XLAPROF_PROFILE=job.xlaprof python spawn_ddp.py     # job.rank0.xlaprof, job.rank1.xlaprof
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def demo_basic(rank: int, world_size: int, port: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5)))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    for _ in range(5):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(torch.randn(20, 10)), torch.randn(20, 5))
        loss.backward()
        opt.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    mp.spawn(demo_basic, args=(world_size, sys.argv[1] if len(sys.argv) > 1 else "29512"), nprocs=world_size)
