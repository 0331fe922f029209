"""The Python API speaks torch: every public name of ``xlaprof`` (the package, ``nn``,
``nn.functional``, ``optim``, and the methods of ``Tensor``, ``nn.Module`` and the optimizers)
is either in the list below of the PyTorch names it mirrors, with PyTorch's parameters that
xlaprof takes (same names, order, kinds and defaults), or in the list of xlaprof's own names.

The lists are written out by hand from PyTorch's documentation; torch is not imported."""

import builtins
import inspect

import pytest

import xlaprof as xp

# (PyTorch's name, xlaprof's name, PyTorch's parameters that xlaprof takes, as a Python
# parameter list). Positional parameters must come first in the same order; keyword-only ones
# must be accepted by keyword; defaults must be equal; extra xlaprof parameters must be optional.
MIRRORS = [
    # ---- creation ----
    ("torch.tensor", "tensor", "data, *, dtype=None, device=None, requires_grad=False"),
    ("torch.as_tensor", "as_tensor", "data, dtype=None, device=None"),
    ("torch.from_numpy", "from_numpy", "ndarray"),
    ("torch.zeros", "zeros", "*size, dtype=None, device=None, requires_grad=False"),
    ("torch.ones", "ones", "*size, dtype=None, device=None, requires_grad=False"),
    ("torch.rand", "rand", "*size, dtype=None, device=None, requires_grad=False"),
    ("torch.randn", "randn", "*size, dtype=None, device=None, requires_grad=False"),
    ("torch.full", "full", "size, fill_value, *, dtype=None, device=None, requires_grad=False"),
    # PyTorch documents `arange(start=0, end, step=1)`: `arange(end)` is the one-argument form.
    ("torch.arange", "arange", "start, end=None, step=1, *, dtype=None, device=None, "
                               "requires_grad=False"),
    ("torch.eye", "eye", "n, m=None, *, dtype=None, device=None, requires_grad=False"),
    # PyTorch's two forms, `randint(high, size)` and `randint(low, high, size)`, in one.
    ("torch.randint", "randint", "low, high=None, size=None, *, dtype=None, device=None, "
                                 "requires_grad=False"),
    ("torch.zeros_like", "zeros_like", "input, *, dtype=None, device=None, requires_grad=False"),
    ("torch.ones_like", "ones_like", "input, *, dtype=None, device=None, requires_grad=False"),
    ("torch.full_like", "full_like", "input, fill_value, *, dtype=None, device=None, "
                                     "requires_grad=False"),
    ("torch.rand_like", "rand_like", "input, *, dtype=None, device=None, requires_grad=False"),
    ("torch.randn_like", "randn_like", "input, *, dtype=None, device=None, requires_grad=False"),
    ("torch.manual_seed", "manual_seed", "seed"),
    ("torch.cat", "cat", "tensors, dim=0"),
    ("torch.concat", "concat", "tensors, dim=0"),
    ("torch.stack", "stack", "tensors, dim=0"),
    ("torch.where", "where", "condition, input, other"),
    ("torch.device", "device", "type, index=None"),
    # ---- functions over tensors ----
    ("torch.sum", "sum", "input, dim=None, keepdim=False, *, dtype=None"),
    ("torch.mean", "mean", "input, dim=None, keepdim=False, *, dtype=None"),
    ("torch.max", "max", "input, dim=None, keepdim=False"),
    ("torch.min", "min", "input, dim=None, keepdim=False"),
    ("torch.amax", "amax", "input, dim=(), keepdim=False"),
    ("torch.amin", "amin", "input, dim=(), keepdim=False"),
    ("torch.argmax", "argmax", "input, dim=None, keepdim=False"),
    ("torch.argmin", "argmin", "input, dim=None, keepdim=False"),
    ("torch.logsumexp", "logsumexp", "input, dim, keepdim=False"),
    ("torch.var", "var", "input, dim=None, *, correction=1, keepdim=False"),
    ("torch.std", "std", "input, dim=None, *, correction=1, keepdim=False"),
    ("torch.softmax", "softmax", "input, dim, dtype=None"),
    ("torch.log_softmax", "log_softmax", "input, dim, dtype=None"),
    ("torch.masked_fill", "masked_fill", "input, mask, value"),
    ("torch.abs", "abs", "input"),
    ("torch.neg", "neg", "input"),
    ("torch.exp", "exp", "input"),
    ("torch.log", "log", "input"),
    ("torch.sqrt", "sqrt", "input"),
    ("torch.rsqrt", "rsqrt", "input"),
    ("torch.sin", "sin", "input"),
    ("torch.cos", "cos", "input"),
    ("torch.tanh", "tanh", "input"),
    ("torch.sigmoid", "sigmoid", "input"),
    ("torch.sign", "sign", "input"),
    ("torch.floor", "floor", "input"),
    ("torch.relu", "relu", "input"),
    ("torch.erf", "erf", "input"),
    ("torch.logical_not", "logical_not", "input"),
    ("torch.add", "add", "input, other, *, alpha=1"),
    ("torch.sub", "sub", "input, other, *, alpha=1"),
    ("torch.mul", "mul", "input, other"),
    ("torch.div", "div", "input, other, *, rounding_mode=None"),
    ("torch.pow", "pow", "input, exponent"),
    ("torch.maximum", "maximum", "input, other"),
    ("torch.minimum", "minimum", "input, other"),
    ("torch.clamp", "clamp", "input, min=None, max=None"),
    ("torch.clip", "clip", "input, min=None, max=None"),
    ("torch.eq", "eq", "input, other"),
    ("torch.ne", "ne", "input, other"),
    ("torch.lt", "lt", "input, other"),
    ("torch.le", "le", "input, other"),
    ("torch.gt", "gt", "input, other"),
    ("torch.ge", "ge", "input, other"),
    ("torch.matmul", "matmul", "input, other"),
    ("torch.mm", "mm", "input, mat2"),
    ("torch.bmm", "bmm", "input, mat2"),
    ("torch.reshape", "reshape", "input, shape"),
    ("torch.flatten", "flatten", "input, start_dim=0, end_dim=-1"),
    ("torch.transpose", "transpose", "input, dim0, dim1"),
    ("torch.permute", "permute", "input, dims"),
    ("torch.unsqueeze", "unsqueeze", "input, dim"),
    ("torch.squeeze", "squeeze", "input, dim=None"),
    ("torch.t", "t", "input"),
    ("torch.flip", "flip", "input, dims"),
    ("torch.index_select", "index_select", "input, dim, index"),
    ("torch.numel", "numel", "input"),
    ("torch.is_tensor", "is_tensor", "obj"),
    ("torch.is_floating_point", "is_floating_point", "input"),
    ("torch.allclose", "allclose", "input, other, rtol=1e-05, atol=1e-08, equal_nan=False"),
    ("torch.equal", "equal", "input, other"),
    ("torch.is_grad_enabled", "is_grad_enabled", ""),
    ("torch.no_grad", "no_grad", ""),
    # The functional ops xlaprof also has at the top level are torch.nn.functional's.
    ("torch.nn.functional.conv2d", "conv2d", "input, weight, bias=None, stride=1, padding=0, "
                                             "dilation=1, groups=1"),
    ("torch.nn.functional.max_pool2d", "max_pool2d", "input, kernel_size, stride=None, "
                                                     "padding=0"),
    ("torch.nn.functional.avg_pool2d", "avg_pool2d", "input, kernel_size, stride=None, "
                                                     "padding=0"),
    ("torch.nn.functional.layer_norm", "layer_norm", "input, normalized_shape, weight=None, "
                                                     "bias=None, eps=1e-05"),
    ("torch.nn.functional.dropout", "dropout", "input, p=0.5, training=True, inplace=False"),
    # ---- Tensor ----
    ("torch.Tensor.to", "Tensor.to", "*args, device=None, dtype=None, non_blocking=False, "
                                     "copy=False"),
    ("torch.Tensor.cpu", "Tensor.cpu", ""),
    ("torch.Tensor.numpy", "Tensor.numpy", "*, force=False"),
    ("torch.Tensor.tolist", "Tensor.tolist", ""),
    ("torch.Tensor.item", "Tensor.item", ""),
    ("torch.Tensor.float", "Tensor.float", ""),
    ("torch.Tensor.double", "Tensor.double", ""),
    ("torch.Tensor.half", "Tensor.half", ""),
    ("torch.Tensor.bfloat16", "Tensor.bfloat16", ""),
    ("torch.Tensor.long", "Tensor.long", ""),
    ("torch.Tensor.int", "Tensor.int", ""),
    ("torch.Tensor.bool", "Tensor.bool", ""),
    ("torch.Tensor.byte", "Tensor.byte", ""),
    ("torch.Tensor.char", "Tensor.char", ""),
    ("torch.Tensor.type_as", "Tensor.type_as", "other"),
    ("torch.Tensor.is_floating_point", "Tensor.is_floating_point", ""),
    ("torch.Tensor.dim", "Tensor.dim", ""),
    ("torch.Tensor.numel", "Tensor.numel", ""),
    ("torch.Tensor.size", "Tensor.size", "dim=None"),
    ("torch.Tensor.detach", "Tensor.detach", ""),
    ("torch.Tensor.clone", "Tensor.clone", ""),
    ("torch.Tensor.contiguous", "Tensor.contiguous", ""),
    ("torch.Tensor.requires_grad_", "Tensor.requires_grad_", "requires_grad=True"),
    ("torch.Tensor.backward", "Tensor.backward", "gradient=None, retain_graph=None, "
                                                 "create_graph=False"),
    ("torch.Tensor.sum", "Tensor.sum", "dim=None, keepdim=False, *, dtype=None"),
    ("torch.Tensor.mean", "Tensor.mean", "dim=None, keepdim=False, *, dtype=None"),
    ("torch.Tensor.max", "Tensor.max", "dim=None, keepdim=False"),
    ("torch.Tensor.min", "Tensor.min", "dim=None, keepdim=False"),
    ("torch.Tensor.amax", "Tensor.amax", "dim=(), keepdim=False"),
    ("torch.Tensor.amin", "Tensor.amin", "dim=(), keepdim=False"),
    ("torch.Tensor.argmax", "Tensor.argmax", "dim=None, keepdim=False"),
    ("torch.Tensor.sort", "Tensor.sort", "dim=-1, descending=False"),
    ("torch.Tensor.argmin", "Tensor.argmin", "dim=None, keepdim=False"),
    ("torch.Tensor.logsumexp", "Tensor.logsumexp", "dim, keepdim=False"),
    ("torch.Tensor.var", "Tensor.var", "dim=None, *, correction=1, keepdim=False"),
    ("torch.Tensor.std", "Tensor.std", "dim=None, *, correction=1, keepdim=False"),
    ("torch.Tensor.softmax", "Tensor.softmax", "dim, dtype=None"),
    ("torch.Tensor.log_softmax", "Tensor.log_softmax", "dim, dtype=None"),
    ("torch.Tensor.masked_fill", "Tensor.masked_fill", "mask, value"),
    ("torch.Tensor.masked_fill_", "Tensor.masked_fill_", "mask, value"),
    ("torch.Tensor.add", "Tensor.add", "other, *, alpha=1"),
    ("torch.Tensor.sub", "Tensor.sub", "other, *, alpha=1"),
    ("torch.Tensor.mul", "Tensor.mul", "other"),
    ("torch.Tensor.div", "Tensor.div", "other, *, rounding_mode=None"),
    ("torch.Tensor.pow", "Tensor.pow", "exponent"),
    ("torch.Tensor.fmod", "Tensor.fmod", "other"),
    ("torch.Tensor.atan2", "Tensor.atan2", "other"),
    ("torch.Tensor.remainder", "Tensor.remainder", "other"),
    ("torch.Tensor.maximum", "Tensor.maximum", "other"),
    ("torch.Tensor.minimum", "Tensor.minimum", "other"),
    ("torch.Tensor.matmul", "Tensor.matmul", "other"),
    ("torch.Tensor.clamp", "Tensor.clamp", "min=None, max=None"),
    ("torch.Tensor.clip", "Tensor.clip", "min=None, max=None"),
    ("torch.Tensor.eq", "Tensor.eq", "other"),
    ("torch.Tensor.ne", "Tensor.ne", "other"),
    ("torch.Tensor.lt", "Tensor.lt", "other"),
    ("torch.Tensor.le", "Tensor.le", "other"),
    ("torch.Tensor.gt", "Tensor.gt", "other"),
    ("torch.Tensor.ge", "Tensor.ge", "other"),
    ("torch.Tensor.logical_and", "Tensor.logical_and", "other"),
    ("torch.Tensor.logical_or", "Tensor.logical_or", "other"),
    ("torch.Tensor.logical_not", "Tensor.logical_not", ""),
    ("torch.Tensor.bitwise_and", "Tensor.bitwise_and", "other"),
    ("torch.Tensor.bitwise_or", "Tensor.bitwise_or", "other"),
    ("torch.Tensor.bitwise_xor", "Tensor.bitwise_xor", "other"),
    ("torch.Tensor.bitwise_not", "Tensor.bitwise_not", ""),
    ("torch.Tensor.abs", "Tensor.abs", ""),
    ("torch.Tensor.neg", "Tensor.neg", ""),
    ("torch.Tensor.exp", "Tensor.exp", ""),
    ("torch.Tensor.log", "Tensor.log", ""),
    ("torch.Tensor.sqrt", "Tensor.sqrt", ""),
    ("torch.Tensor.rsqrt", "Tensor.rsqrt", ""),
    ("torch.Tensor.sin", "Tensor.sin", ""),
    ("torch.Tensor.cos", "Tensor.cos", ""),
    ("torch.Tensor.tanh", "Tensor.tanh", ""),
    ("torch.Tensor.sigmoid", "Tensor.sigmoid", ""),
    ("torch.Tensor.sign", "Tensor.sign", ""),
    ("torch.Tensor.floor", "Tensor.floor", ""),
    ("torch.Tensor.round", "Tensor.round", ""),
    ("torch.Tensor.lgamma", "Tensor.lgamma", ""),
    ("torch.Tensor.digamma", "Tensor.digamma", ""),
    ("torch.Tensor.erfinv", "Tensor.erfinv", ""),
    ("torch.Tensor.erf", "Tensor.erf", ""),
    ("torch.Tensor.erfc", "Tensor.erfc", ""),
    ("torch.Tensor.log1p", "Tensor.log1p", ""),
    ("torch.Tensor.expm1", "Tensor.expm1", ""),
    ("torch.Tensor.nextafter", "Tensor.nextafter", "other"),
    ("torch.Tensor.polygamma", "Tensor.polygamma", "n"),
    ("torch.Tensor.index_reduce", "Tensor.index_reduce", "dim, index, source, reduce, *, include_self=True"),
    ("torch.Tensor.relu", "Tensor.relu", ""),
    ("torch.Tensor.reshape", "Tensor.reshape", "*shape"),
    ("torch.Tensor.view", "Tensor.view", "*shape"),
    ("torch.Tensor.permute", "Tensor.permute", "*dims"),
    ("torch.Tensor.expand", "Tensor.expand", "*sizes"),
    ("torch.Tensor.expand_as", "Tensor.expand_as", "other"),
    ("torch.Tensor.reshape_as", "Tensor.reshape_as", "other"),
    ("torch.Tensor.view_as", "Tensor.view_as", "other"),
    ("torch.Tensor.broadcast_to", "Tensor.broadcast_to", "shape"),
    ("torch.Tensor.transpose", "Tensor.transpose", "dim0, dim1"),
    ("torch.Tensor.t", "Tensor.t", ""),
    ("torch.Tensor.unsqueeze", "Tensor.unsqueeze", "dim"),
    ("torch.Tensor.squeeze", "Tensor.squeeze", "dim=None"),
    ("torch.Tensor.flatten", "Tensor.flatten", "start_dim=0, end_dim=-1"),
    ("torch.Tensor.flip", "Tensor.flip", "dims"),
    ("torch.Tensor.index_select", "Tensor.index_select", "dim, index"),
    ("torch.Tensor.index_add", "Tensor.index_add", "dim, index, source"),
    ("torch.Tensor.copy_", "Tensor.copy_", "src, non_blocking=False"),
    ("torch.Tensor.fill_", "Tensor.fill_", "value"),
    ("torch.Tensor.zero_", "Tensor.zero_", ""),
    ("torch.Tensor.add_", "Tensor.add_", "other, *, alpha=1"),
    ("torch.Tensor.sub_", "Tensor.sub_", "other, *, alpha=1"),
    ("torch.Tensor.mul_", "Tensor.mul_", "other"),
    ("torch.Tensor.div_", "Tensor.div_", "other, *, rounding_mode=None"),
    ("torch.Tensor.clamp_", "Tensor.clamp_", "min=None, max=None"),
    # ---- torch.nn ----
    ("torch.nn.Module", "nn.Module", ""),
    ("torch.nn.Module.train", "nn.Module.train", "mode=True"),
    ("torch.nn.Module.eval", "nn.Module.eval", ""),
    ("torch.nn.Module.parameters", "nn.Module.parameters", "recurse=True"),
    ("torch.nn.Module.named_parameters", "nn.Module.named_parameters",
     "prefix='', recurse=True, remove_duplicate=True"),
    ("torch.nn.Module.buffers", "nn.Module.buffers", "recurse=True"),
    ("torch.nn.Module.named_buffers", "nn.Module.named_buffers",
     "prefix='', recurse=True, remove_duplicate=True"),
    ("torch.nn.Module.children", "nn.Module.children", ""),
    ("torch.nn.Module.named_children", "nn.Module.named_children", ""),
    ("torch.nn.Module.modules", "nn.Module.modules", ""),
    ("torch.nn.Module.named_modules", "nn.Module.named_modules",
     "memo=None, prefix='', remove_duplicate=True"),
    ("torch.nn.Module.state_dict", "nn.Module.state_dict",
     "*args, destination=None, prefix='', keep_vars=False"),
    ("torch.nn.Module.load_state_dict", "nn.Module.load_state_dict",
     "state_dict, strict=True, assign=False"),
    ("torch.nn.Module.zero_grad", "nn.Module.zero_grad", "set_to_none=True"),
    ("torch.nn.Module.requires_grad_", "nn.Module.requires_grad_", "requires_grad=True"),
    ("torch.nn.Module.to", "nn.Module.to", "*args, **kwargs"),
    ("torch.nn.Module.cpu", "nn.Module.cpu", ""),
    ("torch.nn.Module.float", "nn.Module.float", ""),
    ("torch.nn.Module.double", "nn.Module.double", ""),
    ("torch.nn.Module.half", "nn.Module.half", ""),
    ("torch.nn.Module.bfloat16", "nn.Module.bfloat16", ""),
    ("torch.nn.Module.apply", "nn.Module.apply", "fn"),
    ("torch.nn.Module.add_module", "nn.Module.add_module", "name, module"),
    ("torch.nn.Module.register_module", "nn.Module.register_module", "name, module"),
    ("torch.nn.Module.register_parameter", "nn.Module.register_parameter", "name, param"),
    ("torch.nn.Module.register_buffer", "nn.Module.register_buffer",
     "name, tensor, persistent=True"),
    ("torch.nn.Module.extra_repr", "nn.Module.extra_repr", ""),
    ("torch.nn.Parameter", "nn.Parameter", "data=None, requires_grad=True"),
    ("torch.nn.Linear", "nn.Linear", "in_features, out_features, bias=True, device=None, "
                                     "dtype=None"),
    ("torch.nn.Conv2d", "nn.Conv2d", "in_channels, out_channels, kernel_size, stride=1, "
                                     "padding=0, dilation=1, groups=1, bias=True, "
                                     "padding_mode='zeros', device=None, dtype=None"),
    ("torch.nn.LayerNorm", "nn.LayerNorm", "normalized_shape, eps=1e-05, "
                                           "elementwise_affine=True, bias=True, device=None, "
                                           "dtype=None"),
    ("torch.nn.Embedding", "nn.Embedding", "num_embeddings, embedding_dim, padding_idx=None, "
                                           "*, device=None, dtype=None"),
    ("torch.nn.Dropout", "nn.Dropout", "p=0.5, inplace=False"),
    ("torch.nn.MaxPool2d", "nn.MaxPool2d", "kernel_size, stride=None, padding=0"),
    ("torch.nn.AvgPool2d", "nn.AvgPool2d", "kernel_size, stride=None, padding=0"),
    ("torch.nn.ReLU", "nn.ReLU", "inplace=False"),
    ("torch.nn.LeakyReLU", "nn.LeakyReLU", "negative_slope=0.01, inplace=False"),
    ("torch.nn.GELU", "nn.GELU", "approximate='none'"),
    ("torch.nn.SiLU", "nn.SiLU", "inplace=False"),
    ("torch.nn.Tanh", "nn.Tanh", ""),
    ("torch.nn.Sigmoid", "nn.Sigmoid", ""),
    ("torch.nn.Softmax", "nn.Softmax", "dim=None"),
    ("torch.nn.LogSoftmax", "nn.LogSoftmax", "dim=None"),
    ("torch.nn.Identity", "nn.Identity", "*args, **kwargs"),
    ("torch.nn.Flatten", "nn.Flatten", "start_dim=1, end_dim=-1"),
    ("torch.nn.Sequential", "nn.Sequential", "*args"),
    ("torch.nn.ModuleList", "nn.ModuleList", "modules=None"),
    ("torch.nn.ModuleDict", "nn.ModuleDict", "modules=None"),
    ("torch.nn.CrossEntropyLoss", "nn.CrossEntropyLoss",
     "weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', "
     "label_smoothing=0.0"),
    ("torch.nn.NLLLoss", "nn.NLLLoss", "weight=None, size_average=None, ignore_index=-100, "
                                       "reduce=None, reduction='mean'"),
    ("torch.nn.MSELoss", "nn.MSELoss", "size_average=None, reduce=None, reduction='mean'"),
    ("torch.nn.L1Loss", "nn.L1Loss", "size_average=None, reduce=None, reduction='mean'"),
    ("torch.nn.BCELoss", "nn.BCELoss", "weight=None, size_average=None, reduce=None, "
                                       "reduction='mean'"),
    ("torch.nn.BCEWithLogitsLoss", "nn.BCEWithLogitsLoss",
     "weight=None, size_average=None, reduce=None, reduction='mean', pos_weight=None"),
    # ---- torch.nn.functional ----
    ("torch.nn.functional.relu", "nn.functional.relu", "input, inplace=False"),
    ("torch.nn.functional.leaky_relu", "nn.functional.leaky_relu",
     "input, negative_slope=0.01, inplace=False"),
    ("torch.nn.functional.gelu", "nn.functional.gelu", "input, approximate='none'"),
    ("torch.nn.functional.silu", "nn.functional.silu", "input, inplace=False"),
    ("torch.nn.functional.sigmoid", "nn.functional.sigmoid", "input"),
    ("torch.nn.functional.tanh", "nn.functional.tanh", "input"),
    ("torch.nn.functional.softmax", "nn.functional.softmax",
     "input, dim=None, _stacklevel=3, dtype=None"),
    ("torch.nn.functional.log_softmax", "nn.functional.log_softmax",
     "input, dim=None, _stacklevel=3, dtype=None"),
    ("torch.nn.functional.dropout", "nn.functional.dropout",
     "input, p=0.5, training=True, inplace=False"),
    ("torch.nn.functional.linear", "nn.functional.linear", "input, weight, bias=None"),
    ("torch.nn.functional.conv2d", "nn.functional.conv2d",
     "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"),
    ("torch.nn.functional.max_pool2d", "nn.functional.max_pool2d",
     "input, kernel_size, stride=None, padding=0"),
    ("torch.nn.functional.avg_pool2d", "nn.functional.avg_pool2d",
     "input, kernel_size, stride=None, padding=0"),
    ("torch.nn.functional.layer_norm", "nn.functional.layer_norm",
     "input, normalized_shape, weight=None, bias=None, eps=1e-05"),
    ("torch.nn.functional.embedding", "nn.functional.embedding", "input, weight, padding_idx=None"),
    ("torch.nn.functional.one_hot", "nn.functional.one_hot", "tensor, num_classes=-1"),
    ("torch.nn.functional.cross_entropy", "nn.functional.cross_entropy",
     "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, "
     "reduction='mean', label_smoothing=0.0"),
    ("torch.nn.functional.nll_loss", "nn.functional.nll_loss",
     "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, "
     "reduction='mean'"),
    ("torch.nn.functional.mse_loss", "nn.functional.mse_loss",
     "input, target, size_average=None, reduce=None, reduction='mean'"),
    ("torch.nn.functional.l1_loss", "nn.functional.l1_loss",
     "input, target, size_average=None, reduce=None, reduction='mean'"),
    ("torch.nn.functional.binary_cross_entropy", "nn.functional.binary_cross_entropy",
     "input, target, weight=None, size_average=None, reduce=None, reduction='mean'"),
    ("torch.nn.functional.binary_cross_entropy_with_logits",
     "nn.functional.binary_cross_entropy_with_logits",
     "input, target, weight=None, size_average=None, reduce=None, reduction='mean', "
     "pos_weight=None"),
    # ---- torch.optim ----
    ("torch.optim.SGD", "optim.SGD", "params, lr=0.001, momentum=0, dampening=0, "
                                     "weight_decay=0, nesterov=False, *, maximize=False"),
    ("torch.optim.Adam", "optim.Adam", "params, lr=0.001, betas=(0.9, 0.999), eps=1e-08, "
                                       "weight_decay=0, amsgrad=False, *, maximize=False"),
    ("torch.optim.AdamW", "optim.AdamW", "params, lr=0.001, betas=(0.9, 0.999), eps=1e-08, "
                                         "weight_decay=0.01, amsgrad=False, *, maximize=False"),
    ("torch.optim.Optimizer.step", "optim.Optimizer.step", "closure=None"),
    ("torch.optim.Optimizer.zero_grad", "optim.Optimizer.zero_grad", "set_to_none=True"),
]

# PyTorch names that are not callables (or whose signature is not comparable), by the same
# name: dtypes, modules, attributes and properties, and the classes listed for their methods.
MIRRORED_NAMES = {
    "": ["Tensor", "nn", "optim", "return_types", "float32", "float64", "float16", "bfloat16",
         "int8", "int32", "int64", "uint8", "float", "double", "half", "long", "int", "bool"],
    "Tensor": ["shape", "dtype", "ndim", "requires_grad", "grad", "T", "device"],
    "nn": ["functional"],
    "nn.Module": ["training", "forward"],
    "optim": ["Optimizer"],
    "optim.Optimizer": ["param_groups", "defaults"],
}

# xlaprof's own names: the profiler, the engine's extras, and NumPy's names for a few things.
OWN = {
    "": ["AutogradError", "InternalError", "PluginError", "ProfileError", "ShapeError",
         "XlaError", "XlaprofError", "Profile", "counters", "cross_entropy", "load",
         # A job of many processes, read as one.
         "Job", "load_job",
         "metrics_report", "profile", "profile_scope", "step", "sync", "wait", "bool_",
         # Many devices, PyTorch/XLA's names (`xs.Mesh`, `xs.mark_sharding`, ...).
         "Mesh", "ShardingError", "devices", "get_1d_mesh", "get_global_mesh", "mark_sharding",
         "set_global_mesh",
         # Debugging tools: a block that may not sync, and the pending graph described.
         "SyncError", "AnomalyError", "explain", "forbid_sync", "detect_anomaly",
         # Break on a cause: a recompile, a hidden sync, a fallback.
         "BreakError", "break_on",
         # Two profiles side by side in a notebook.
         "compare"],
    # `name`: what findings call a graph input the tensor feeds.
    "Tensor": ["astype", "is_pending", "graph_size", "one_hot", "gelu", "silu", "pad", "sharding", "name"],
    "nn": [],
    "nn.Module": [],
    "nn.functional": [],
    "optim": [],
    "optim.Optimizer": ["lr"],
}

# The namespaces walked for public names.
NAMESPACES = ["", "Tensor", "nn", "nn.functional", "nn.Module", "optim", "optim.Optimizer"]


def resolve(name):
    obj = xp
    for part in filter(None, name.split(".")):
        obj = getattr(obj, part)
    return obj


def public_names(namespace):
    obj = resolve(namespace)
    if namespace == "":
        # `__all__` leaves out the names of builtins (`sum`, `float`), which are attributes.
        return set(obj.__all__) | {n for n in dir(builtins) if hasattr(obj, n)
                                   and not n.startswith("_")}
    if namespace in ("nn", "nn.functional", "optim"):
        return set(obj.__all__)
    return {n for n in dir(obj) if not n.startswith("_")}


def expected_parameters(spec):
    namespace = {}
    exec(f"def f({spec}): pass", namespace)
    return list(inspect.signature(namespace["f"]).parameters.values())


def our_parameters(obj):
    params = list(inspect.signature(obj).parameters.values())
    if params and params[0].name == "self" and not inspect.isclass(obj):
        params = params[1:]
    return params


P = inspect.Parameter
POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)


def mismatches(spec, obj):
    """What differs between PyTorch's parameters `spec` and `obj`'s (an empty list if none)."""
    ours = our_parameters(obj)
    by_name = {p.name: p for p in ours}
    problems = []
    for i, want in enumerate(expected_parameters(spec)):
        if want.kind in POSITIONAL + (P.VAR_POSITIONAL,):
            got = ours[i] if i < len(ours) else None
            if got is None or got.name != want.name:
                problems.append(f"parameter {i} is {got and got.name!r}, not {want.name!r}")
                continue
            if want.kind == P.VAR_POSITIONAL and got.kind != P.VAR_POSITIONAL:
                problems.append(f"{want.name} is not *{want.name}")
            if want.kind == P.POSITIONAL_OR_KEYWORD and got.kind != P.POSITIONAL_OR_KEYWORD:
                problems.append(f"{want.name} is {got.kind.description}, not positional or keyword")
        elif want.kind == P.VAR_KEYWORD:
            if not any(p.kind == P.VAR_KEYWORD for p in ours):
                problems.append(f"no **{want.name}")
            continue
        else:
            got = by_name.get(want.name)
            if got is None or got.kind not in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD):
                problems.append(f"no keyword parameter {want.name!r}")
                continue
        same = got.default == want.default and (
            isinstance(got.default, bool) == isinstance(want.default, bool))
        if not same:
            problems.append(f"{want.name} defaults to {got.default!r}, not {want.default!r}")
    named = {p.name for p in expected_parameters(spec)}
    for p in ours:
        if p.name not in named and p.kind in POSITIONAL + (P.KEYWORD_ONLY,) and p.default is P.empty:
            problems.append(f"extra required parameter {p.name!r}")
    return problems


@pytest.mark.parametrize("torch_name,name,spec", MIRRORS, ids=[m[0] for m in MIRRORS])
def test_signature_matches_torch(torch_name, name, spec):
    obj = resolve(name)
    assert callable(obj), name
    assert mismatches(spec, obj) == [], f"{name} does not mirror {torch_name}({spec})"


def test_every_public_name_is_a_torch_name_or_our_own():
    mirrored = {}
    for _, name, _ in MIRRORS:
        namespace, _, leaf = name.rpartition(".")
        mirrored.setdefault(namespace, set()).add(leaf)
    for namespace, names in MIRRORED_NAMES.items():
        mirrored.setdefault(namespace, set()).update(names)
    unlisted = {}
    for namespace in NAMESPACES:
        known = mirrored.get(namespace, set()) | set(OWN.get(namespace, []))
        extra = public_names(namespace) - known
        if extra:
            unlisted[namespace or "xlaprof"] = sorted(extra)
    assert unlisted == {}, "public names in neither list"


def test_every_listed_name_exists():
    # Instance attributes are looked for on an instance.
    instances = {"optim.Optimizer": xp.optim.SGD([xp.zeros(1, requires_grad=True)]),
                 "Tensor": xp.zeros(1), "nn.Module": xp.nn.Module()}
    for namespace, names in list(MIRRORED_NAMES.items()) + list(OWN.items()):
        for n in names:
            assert hasattr(instances.get(namespace, resolve(namespace)), n), f"{namespace}.{n}"


def test_star_import_leaves_the_builtins_alone():
    scope = {}
    exec("from xlaprof import *", scope)
    assert "randn" in scope and "softmax" in scope
    assert not {"sum", "max", "min", "abs", "pow", "float", "int", "bool"} & set(scope)
    assert xp.sum is not builtins.sum and xp.float == "float32"


def test_the_checker_catches_a_difference():
    def f(input, dim=1, keepdim=False):
        pass

    assert mismatches("input, dim=None, keepdim=False", f) == ["dim defaults to 1, not None"]
    assert mismatches("input, other", f)[0] == "parameter 1 is 'dim', not 'other'"
    assert mismatches("input, *, out=None", f) == ["no keyword parameter 'out'"]
