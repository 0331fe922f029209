"""FSDP2 in the manner of PyTorch's FSDP2 examples: each block of a small MLP sharded with
``fully_shard``, then the whole model; parameters are gathered before each block's forward and
backward and gradients reduce-scattered after, through torch.distributed's collectives.

    torchrun --nproc_per_node 2 train_fsdp.py
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(4):
        opt.zero_grad()
        x = torch.randn(8, 16, generator=g)
        loss = nn.functional.mse_loss(model(x), torch.zeros(8, 4))
        loss.backward()
        opt.step()
    dist.barrier()  # (gloo's teardown can abort a rank whose peers are still sending)
    if dist.get_rank() == 0:
        print(f"mean loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
