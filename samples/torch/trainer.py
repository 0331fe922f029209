"""A Hugging Face Trainer run on the xlaprof device: a small GPT-2 (random init) trained for a few
steps by the Trainer itself, with its default optimizer (fused AdamW).

    .venv/bin/python samples/torch/trainer.py          # on the device, profiled: run.xlaprof
    .venv/bin/python samples/torch/trainer.py --cpu    # the same run in torch's CPU eager

Prints each step's loss (the Trainer's log), then the profile's report.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--cpu", action="store_true", help="train in CPU eager instead")
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--profile", default="trainer.xlaprof")
args = ap.parse_args()
if not args.cpu:
    os.environ["ACCELERATE_TORCH_DEVICE"] = "xlaprof:0"  # accelerate's switch: the Trainer's device

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> dict:
        ids = torch.randint(0, 128, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class PrintLoss(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if logs and "loss" in logs:
            compiles = "" if args.use_cpu else f", compiles so far {xp.counters()['compiles']}"
            print(f"step {state.global_step}: loss {float(logs['loss']):.6f}{compiles}", flush=True)


torch.manual_seed(0)
config = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=4, bos_token_id=0,
                    eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(config)
callbacks: list = [PrintLoss()]
if not args.cpu:
    import xlaprof as xp
    import xlaprof.torch as xt
    from xlaprof.torch.hf import StepCallback

    callbacks.append(StepCallback())
training = TrainingArguments(
    output_dir=tempfile.mkdtemp(), per_device_train_batch_size=8, max_steps=args.steps, logging_steps=1,
    report_to=[], save_strategy="no", disable_tqdm=True, dataloader_pin_memory=False,
    logging_nan_inf_filter=False, use_cpu=args.cpu, learning_rate=1e-3,
)
trainer = Trainer(model=model, args=training, train_dataset=Tokens(), callbacks=callbacks)
if args.cpu:
    trainer.train()
    sys.exit(0)
print(f"device {training.device}; tied head kept: {model.lm_head.weight is model.transformer.wte.weight}")
with xp.profile() as p:
    trainer.train()
p.save(args.profile)
print(f"CPU fallbacks: {xt.fallbacks() or 'none'}")
print(p.report())
