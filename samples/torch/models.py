"""The real models the torch samples and tests train: Hugging Face GPT-2 and BERT (small configs,
random init, nothing downloaded) and a ResNet-18 written with torch.nn (torchvision's wheels pin
another torch). Dropout is off so that the device and torch's CPU eager can be compared step by
step (random streams differ)."""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18's layout (2-2-2-2 basic blocks), at a width and input size a CPU trains fast."""

    def __init__(self, classes: int = 10, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(2))
        layers, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            layers += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                     attn_implementation="eager")
    return GPT2LMHeadModel(cfg)


def bert() -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=3, attn_implementation="eager")
    return BertForSequenceClassification(cfg)


Batch = Dict[str, torch.Tensor]


def gpt2_batch(g: torch.Generator) -> Batch:
    ids = torch.randint(0, 256, (4, 32), generator=g)
    return {"input_ids": ids, "labels": ids}


def bert_batch(g: torch.Generator) -> Batch:
    ids = torch.randint(0, 256, (4, 32), generator=g)
    mask = torch.ones(4, 32, dtype=torch.long)
    mask[1:, 24:] = 0  # padded sequences
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (4,), generator=g)}


def resnet_batch(g: torch.Generator) -> Batch:
    return {"x": torch.randn(8, 3, 32, 32, generator=g), "y": torch.randint(0, 10, (8,), generator=g)}


def hf_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    return model(**batch).loss


def resnet_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch["x"]), batch["y"])


MODELS: Dict[str, Tuple[Callable[[], nn.Module], Callable[[torch.Generator], Batch], Callable[..., torch.Tensor]]] = {
    "gpt2": (gpt2, gpt2_batch, hf_loss),
    "bert": (bert, bert_batch, hf_loss),
    "resnet18": (ResNet18, resnet_batch, resnet_loss),
}
