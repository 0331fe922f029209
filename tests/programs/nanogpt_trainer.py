"""A character-level GPT trained in the manner of nanoGPT's train.py: a config of module-level
constants, batches drawn at random from one long token stream, gradient accumulation over
micro-steps, gradient clipping, a cosine learning rate with warm-up set on the param groups,
and a periodic `estimate_loss()` under `torch.no_grad()` with the model in `eval()`.

    python nanogpt_trainer.py --mode lazy|inductor|xlaprof

An expert reading its profile: the evaluation graph is compiled once per mode switch, expected
(a second graph, not a recompile to fix); the learning rate is a Python float the optimizer
reads, which the lazy engine takes as a host scalar (no recompile) and torch.compile only sees
outside the compiled model; nothing is read mid-step; `loss.item()` for logging comes after the
step, every `log_interval` iterations.
"""
# expect[all]: steps 16
# expect[lazy]: LazyState @optimizer_step
# expect[inductor,xlaprof]: Recompile @eval_call | expected once | evaluation
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

# config, nanoGPT-style
batch_size, block_size, n_layer, n_head, n_embd = 4, 16, 2, 2, 32
gradient_accumulation_steps = 2
max_iters, eval_interval, eval_iters, log_interval = 16, 8, 2, 4
learning_rate, min_lr, warmup_iters, grad_clip = 1e-3, 1e-4, 4, 1.0
vocab_size = 65

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")

torch.manual_seed(1337)
data = torch.randint(0, vocab_size, (4096,))
train_data, val_data = data[:3600], data[3600:]


def get_batch(split):
    d = train_data if split == "train" else val_data
    ix = torch.randint(len(d) - block_size, (batch_size,))
    x = torch.stack([d[i:i + block_size] for i in ix])
    y = torch.stack([d[i + 1:i + 1 + block_size] for i in ix])
    return x.to(device), y.to(device)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.1)
if mode != "lazy":
    model = torch.compile(model, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            logits, loss = model(X, Y)  # eval_call
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    ratio = (it - warmup_iters) / (max_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


X, Y = get_batch("train")
for it in range(max_iters):
    lr = get_lr(it)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if it % eval_interval == 0 and it > 0:
        losses = estimate_loss()
        print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    for micro_step in range(gradient_accumulation_steps):
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        loss.backward()
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()  # optimizer_step
    optimizer.zero_grad(set_to_none=True)
    if mode == "lazy":
        xt.step()
    if it % log_interval == 0:
        print(f"iter {it}: loss {loss.item() * gradient_accumulation_steps:.4f}")
