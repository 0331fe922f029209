"""``torch.nn`` on the engine: ``Module`` and the layers, activations, containers and losses the
engine has ops for, with PyTorch's names, signatures and defaults.

A module's parameters are the tensors that require grad among its attributes; its other tensor
attributes are its buffers. Both are found by walking the attributes in the order they were
set (submodules, tensors, and lists, tuples and dicts of them, named ``"layers.0"`` or
``"blocks.norm"`` as ``ModuleList`` and ``ModuleDict`` name theirs), so ``super().__init__()``
is welcome but not required. ``state_dict()`` names them as PyTorch does (``"0.weight"``,
``"fc1.bias"``); its tensors are detached values at the time of the call.
"""

from . import functional  # noqa: F401  (xp.nn.functional)
from .containers import ModuleDict, ModuleList, Sequential
from .layers import (GELU, AvgPool2d, Conv2d, Dropout, Embedding, Flatten, Identity, LayerNorm, LeakyReLU,
                     Linear, LogSoftmax, MaxPool2d, ReLU, Sigmoid, SiLU, Softmax, Tanh)
from .losses import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module, Parameter

__all__ = [
    "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "Conv2d", "CrossEntropyLoss", "Dropout",
    "Embedding", "Flatten", "GELU", "Identity", "L1Loss", "LayerNorm", "LeakyReLU", "Linear",
    "LogSoftmax", "MSELoss", "MaxPool2d", "Module", "ModuleDict", "ModuleList", "NLLLoss",
    "Parameter", "ReLU", "Sequential", "SiLU", "Sigmoid", "Softmax", "Tanh", "functional",
]
