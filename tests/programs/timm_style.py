"""A vision transformer trained in the manner of timm's `train.py`: Mixup and CutMix applied to
each batch on the device (a Python `lam` drawn per batch, CutMix's box cut from it), soft-target
cross entropy, AdamW with a cosine schedule updated every step (`step_update`), gradient
clipping, a model EMA updated every step (`lerp_` of each weight), and the loss meter updated
with `loss.item()` every step, as timm's loop does.

    python timm_style.py --mode lazy|inductor|xlaprof

An expert reading its profile, run lazily: CutMix's box is cut at a Python-chosen place and size
each batch, so its slices' bounds are new on every CutMix batch and each compiles the step again
and the loss meter's read inside it (one cause, one finding: do the mixing on the CPU, in the
loader's collate, or as a mask of fixed shape; AdamW's first-step state is folded into it).
Mixup's `lam` is a Python number the graph takes as an input (no recompile). The loss meter's
`loss.item()` splits every step. Under torch.compile the mixing runs eagerly before the
compiled model: its graph is compiled once.
"""
# expect[all]: steps 8
# expect[lazy]: RecompileStorm @cutmix_paste | start
# expect[lazy]: HiddenSync @loss_meter
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")

img_size, patch, dim, depth, heads, num_classes = 16, 4, 16, 1, 2, 10
batch_size, updates, lr, warmup_updates, ema_decay, clip_grad = 8, 8, 1e-3, 2, 0.99, 1.0
mixup_alpha, cutmix_alpha, switch_prob, smoothing = 0.8, 1.0, 0.5, 0.1


class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (img_size // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


class Mixup:
    """timm's Mixup, batch mode: Mixup or CutMix per batch, targets mixed and smoothed."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, x, target):
        use_cutmix = self.rng.random() < switch_prob
        lam = float(self.rng.beta(cutmix_alpha, cutmix_alpha) if use_cutmix else self.rng.beta(mixup_alpha, mixup_alpha))
        if use_cutmix:
            cut = math.sqrt(1 - lam)
            ch, cw = int(img_size * cut), int(img_size * cut)
            cy, cx = int(self.rng.integers(img_size)), int(self.rng.integers(img_size))
            y0, y1 = max(cy - ch // 2, 0), min(cy + ch // 2, img_size)
            x0, x1 = max(cx - cw // 2, 0), min(cx + cw // 2, img_size)
            x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]  # cutmix_paste
            lam = 1 - (y1 - y0) * (x1 - x0) / (img_size * img_size)
        else:
            x.mul_(lam).add_(x.flip(0).mul_(1 - lam))
        off, on = smoothing / num_classes, 1 - smoothing + smoothing / num_classes
        one_hot = torch.full((target.shape[0], num_classes), off, device=x.device).scatter_(1, target[:, None], on)
        return x, one_hot * lam + one_hot.flip(0) * (1 - lam)


class ModelEmaV3:
    """timm's ModelEmaV3: a copy of the weights, each step `ema.lerp_(weight, 1 - decay)`."""

    def __init__(self, model):
        self.weights = [p.detach().clone() for p in model.state_dict().values()]

    @torch.no_grad()
    def update(self, model):
        current = [p.detach() for p in model.state_dict().values()]
        floats = [(e, c) for e, c in zip(self.weights, current) if e.is_floating_point()]
        torch._foreach_lerp_([e for e, _ in floats], [c for _, c in floats], 1 - ema_decay)


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, value, n=1):
        self.sum, self.count = self.sum + value * n, self.count + n


def soft_target_cross_entropy(x, target):
    return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


def lr_at(update):
    if update < warmup_updates:
        return lr * (update + 1) / warmup_updates
    return 0.5 * lr * (1 + math.cos(math.pi * (update - warmup_updates) / (updates - warmup_updates)))


torch.manual_seed(0)
model = VisionTransformer().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
model_ema = ModelEmaV3(model)
mixup_fn = Mixup(seed=3)
train_model = model if mode == "lazy" else torch.compile(model, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))
images = torch.randn(updates * batch_size, 3, img_size, img_size)
labels = torch.randint(0, num_classes, (updates * batch_size,))
losses_m = AverageMeter()
for num_updates in range(updates):
    input = images[num_updates * batch_size:(num_updates + 1) * batch_size].to(device)
    target = labels[num_updates * batch_size:(num_updates + 1) * batch_size].to(device)
    input, target = mixup_fn(input, target)
    for group in optimizer.param_groups:
        group["lr"] = lr_at(num_updates)  # lr_scheduler.step_update
    with torch.autocast("xlaprof" if mode == "lazy" else "cpu", dtype=torch.bfloat16):
        output = train_model(input)
    loss = soft_target_cross_entropy(output.float(), target)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
    optimizer.step()
    model_ema.update(model)
    losses_m.update(loss.item(), input.size(0))  # loss_meter
    if mode == "lazy":
        xt.step()  # step_end
print(f"trained {updates} updates, mean loss {losses_m.sum / losses_m.count:.4f}")
