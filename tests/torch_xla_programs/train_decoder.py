"""Trains the decoder the way PyTorch/XLA's decoder-only example does: fake token batches through
`MpDeviceLoader`, the step function under `torch_xla.compile(full_graph=True)`, losses printed by
a step closure every few steps, the metrics report at the end. `--eager` runs the step eagerly
(`torch_xla.experimental.eager_mode`), `--eager-with-compile` compiles it in eager mode, `--fsdpv2`
shards the model over the devices' `fsdp` axis (FSDPv2)."""

import argparse
import functools
import itertools
import time

import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
from torch_xla import runtime as xr
from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2

from decoder_model import DecoderConfig, DecoderLayer, DecoderModel


class Trainer:
    def __init__(self, args, config):
        self.args = args
        self.config = config
        self.batch_size = args.batch_size
        self.seq_len = args.seq_len
        self.num_steps = args.num_steps
        self.device = torch_xla.device()
        self.model = DecoderModel(config).to(self.device)
        self.loss_fn = nn.CrossEntropyLoss()
        self.train_device_loader = pl.MpDeviceLoader(self.fake_data(), self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.compiled_step_fn = torch_xla.compile(self.step_fn, full_graph=True, name="decoder_step_fn")

    def fake_data(self):
        g = torch.Generator().manual_seed(7)
        batches = [(torch.randint(0, self.config.vocab_size, (self.batch_size, self.seq_len), generator=g),
                    torch.randint(0, self.config.vocab_size, (self.batch_size, self.seq_len), generator=g))
                   for _ in range(4)]
        return [batches[i % 4] for i in range(self.num_steps)]

    def log(self, step, loss, tracker):
        print(f"step: {step}, loss: {loss.item():.8f}, rate: {tracker.rate():.1f}", flush=True)

    def step_fn(self, data, target):
        self.optimizer.zero_grad()
        logits = self.model(data)
        loss = self.loss_fn(logits.view(-1, self.config.vocab_size), target.view(-1))
        loss.backward()
        self.optimizer.step()
        return loss

    def train(self):
        tracker = xm.RateTracker()
        self.model.train()
        loader = itertools.islice(self.train_device_loader, self.num_steps)
        for step, (data, target) in enumerate(loader):
            loss = self.compiled_step_fn(data, target)
            tracker.add(self.batch_size)
            xm.add_step_closure(self.log, args=(step, loss, tracker))
        xm.wait_device_ops()


class EagerTrainer(Trainer):
    def __init__(self, args, config):
        super().__init__(args, config)
        self.compiled_step_fn = self.step_fn

    def train(self):
        tracker = xm.RateTracker()
        for step, (data, target) in enumerate(itertools.islice(self.train_device_loader, self.num_steps)):
            loss = self.compiled_step_fn(data, target)
            self.log(step, loss, tracker)


class FSDPv2Trainer(Trainer):
    def __init__(self, args, config):
        super().__init__(args, config)
        n = xr.global_runtime_device_count()
        mesh = xs.Mesh(np.array(range(n)), (n, 1), ("fsdp", "model"))
        xs.set_global_mesh(mesh)
        self.train_device_loader = pl.MpDeviceLoader(
            self.fake_data(), self.device, input_sharding=xs.ShardingSpec(mesh, ("fsdp", None)))
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={DecoderLayer})
        self.model = FSDPv2(self.model, auto_wrap_policy=policy)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--eager-with-compile", action="store_true")
    parser.add_argument("--fsdpv2", action="store_true")
    parser.add_argument("--print-metrics", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(42)
    torch_xla.manual_seed(42)
    config = DecoderConfig(hidden_size=args.hidden_size, num_hidden_layers=args.num_layers)
    if args.eager or args.eager_with_compile:
        torch_xla.experimental.eager_mode(True)
    if args.fsdpv2:
        xr.use_spmd()
    trainer = (EagerTrainer if args.eager else FSDPv2Trainer if args.fsdpv2 else Trainer)(args, config)
    start = time.time()
    trainer.train()
    xm.master_print(f"Finished training in {time.time() - start:.3f}s")
    if args.print_metrics:
        print(torch_xla._XLAC._xla_metrics_report())
        print("compiles:", (met.metric_data("CompileTime") or (0,))[0])
