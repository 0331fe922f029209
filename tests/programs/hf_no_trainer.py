"""A sequence classifier fine-tuned in the manner of Hugging Face's `run_glue_no_trainer.py`:
`Accelerator` prepares the model, the optimizer, the data loader and the scheduler; AdamW with
weight decay off for biases and norms; a linear schedule with warm-up; `accelerator.backward`;
batches padded to a fixed length (`padding="max_length"`, as the script does with
`--pad_to_max_length`), and an evaluation pass after each epoch gathering predictions.

    python hf_no_trainer.py --mode lazy|inductor|xlaprof

An expert reading its profile, run lazily: BERT's attention-mask check (transformers'
`masking_utils`) reads the mask on the host in every forward, splitting each step; AdamW's state
is made by the first step (warm-up, once); `total_loss = 0` at each epoch's start makes that
step's graph take a Python number where the others take a tensor (a graph of its own: start the
total as a tensor); the evaluation's reads come between steps (not hidden syncs). Under
torch.compile: BERT sets `config.problem_type` on its first call, which fails a guard once, and
the evaluation under `torch.no_grad()` compiles its own graph once (expected).
"""
# expect[all]: steps 12
# expect[lazy]: HiddenSync @train_call | via masking_utils.py
# expect[lazy]: HiddenSync @eval_call | via masking_utils.py
# expect[lazy]: LazyState @step_end
# expect[lazy]: Recompile @step_end | @total_update | Python number | torch.zeros
# expect[lazy]: Recompile @eval_read | one-time cost
# expect[inductor,xlaprof]: Recompile @train_call | problem_type | one-time cost
# expect[inductor,xlaprof]: Recompile @eval_call | expected once | evaluation
import argparse
import os

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode
if mode == "lazy":
    os.environ["ACCELERATE_TORCH_DEVICE"] = "xlaprof:0"  # accelerate's switch: the device
    import xlaprof.torch as xt  # registers the device before accelerate looks for it

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup  # noqa: E402

num_train_epochs, per_device_batch_size, max_length, num_labels = 2, 8, 24, 3
learning_rate, weight_decay, num_warmup_steps = 5e-4, 0.01, 2


def tokenized(n, seed):
    """A tokenized GLUE-like split: ids padded to `max_length`, an attention mask, a label."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(6, max_length + 1, (n,), generator=g)
    rows = []
    for length in lengths.tolist():
        ids = torch.zeros(max_length, dtype=torch.long)
        ids[:length] = torch.randint(5, 200, (length,), generator=g)
        mask = (torch.arange(max_length) < length).long()
        rows.append({"input_ids": ids, "attention_mask": mask,
                     "labels": torch.randint(0, num_labels, (), generator=g)})
    return rows


train_dataset, eval_dataset = tokenized(48, 0), tokenized(16, 1)
accelerator = Accelerator(cpu=mode != "lazy")
torch.manual_seed(0)
config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64, num_labels=num_labels,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
model = BertForSequenceClassification(config)
train_dataloader = DataLoader(train_dataset, shuffle=True, batch_size=per_device_batch_size,
                              generator=torch.Generator().manual_seed(2))
eval_dataloader = DataLoader(eval_dataset, batch_size=per_device_batch_size)

no_decay = ["bias", "LayerNorm.weight"]
optimizer_grouped_parameters = [
    {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
     "weight_decay": weight_decay},
    {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
]
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=learning_rate)
max_train_steps = num_train_epochs * len(train_dataloader)
lr_scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps, max_train_steps)
model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)
if mode != "lazy":
    model = torch.compile(model, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))

for epoch in range(num_train_epochs):
    model.train()
    total_loss = 0
    for step, batch in enumerate(train_dataloader):
        outputs = model(**batch)  # train_call
        loss = outputs.loss
        total_loss += loss.detach().float()  # total_update
        accelerator.backward(loss)
        optimizer.step()  # optimizer_step
        lr_scheduler.step()
        optimizer.zero_grad()
        if mode == "lazy":
            xt.step()  # step_end

    model.eval()
    correct = total = 0
    for step, batch in enumerate(eval_dataloader):
        with torch.no_grad():
            outputs = model(**batch)  # eval_call
        predictions = outputs.logits.argmax(dim=-1)
        predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
        correct += (predictions == references).sum().item()  # eval_read
        total += references.numel()
    print(f"epoch {epoch}: accuracy {correct / total:.3f}, train loss {total_loss.item() / len(train_dataloader):.4f}")
