"""``torch.nn`` on the engine: ``Module`` and the layers, activations, containers and losses the
engine has ops for, with PyTorch's names, signatures and defaults.

A module's parameters are the tensors that require grad among its attributes; its other tensor
attributes are its buffers. Both are found by walking the attributes in the order they were
set (submodules, tensors, and lists, tuples and dicts of them, named ``"layers.0"`` or
``"blocks.norm"`` as ``ModuleList`` and ``ModuleDict`` name theirs), so ``super().__init__()``
is welcome but not required. ``state_dict()`` names them as PyTorch does (``"0.weight"``,
``"fc1.bias"``); its tensors are detached values at the time of the call.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from .. import _api, _device, _native
from .._native import Tensor
from . import functional as F
from . import functional  # noqa: F401  (xp.nn.functional)

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

# Attributes of Module itself, never walked for parameters.
_INTERNAL = frozenset({"training", "_non_persistent", "_order"})
_CONTAINERS = (list, tuple, dict)
# Parameters frozen by `Module.requires_grad_(False)`, which `requires_grad_(True)` unfreezes,
# by id (a WeakSet would compare tensors with `==`, which is elementwise).
_FROZEN: "Dict[int, weakref.ref]" = {}


def Parameter(data: Optional[Tensor] = None, requires_grad: bool = True) -> Tensor:
    """A leaf tensor that requires grad, which makes it a parameter of the module it is set on.
    (PyTorch's ``Parameter`` is a Tensor subclass; here it is a tensor like any other.)"""
    if data is None:
        data = _native.zeros(0)
    t = data.detach()
    t.requires_grad = requires_grad
    return t


def _entries(node: Any) -> List[Tuple[str, Any, Any]]:
    """(name, key, value) of a module's attributes or a container's items, in order; `key`
    sets the value back (an attribute name, an index or a dict key)."""
    if isinstance(node, Module):
        return [(k, k, v) for k, v in vars(node).items() if k not in _INTERNAL]
    if isinstance(node, dict):
        return [(str(k), k, v) for k, v in node.items()]
    return [(str(i), i, v) for i, v in enumerate(node)]


def _is_node(value: Any) -> bool:
    return isinstance(value, (Module,) + _CONTAINERS)


def _nodes(root: Any, prefix: str, recurse: bool = True) -> Iterator[Tuple[str, Any]]:
    """(qualified name, node) for `root` and, when `recurse`, each module or container below it,
    depth first and each once (PyTorch's order for `named_modules`)."""
    seen = {id(root)}
    stack = [(prefix, root)]
    while stack:
        name, node = stack.pop()
        yield name, node
        if not recurse:
            return
        below = []
        for child_name, _, value in _entries(node):
            if _is_node(value) and id(value) not in seen:
                seen.add(id(value))
                below.append((f"{name}.{child_name}" if name else child_name, value))
        stack.extend(reversed(below))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class Module:
    """Base class of models: subclass it, set layers and tensors as attributes in
    ``__init__``, and write ``forward``; calling the module calls ``forward``."""

    training: bool = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(f"Module.__init__() takes no arguments, got {args} {kwargs}")
        self.training = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ---- the tree ----

    def named_modules(self, memo: Optional[set] = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, "Module"]]:
        for name, node in _nodes(self, prefix):
            if isinstance(node, Module):
                if memo is not None:
                    if id(node) in memo:
                        continue
                    memo.add(id(node))
                yield name, node

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        """The modules right below this one (through lists, tuples and dicts)."""
        seen = set()
        for name, _, value in _entries(self):
            if isinstance(value, Module):
                found = [(name, value)]
            elif isinstance(value, _CONTAINERS):
                found = [(n, m) for n, m in _container_modules(value, name)]
            else:
                continue
            for n, m in found:
                if id(m) not in seen:
                    seen.add(id(m))
                    yield n, m

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _tensors(self, prefix: str = "",
                 recurse: bool = True) -> Iterator[Tuple[str, Any, Any, Tensor, bool]]:
        """(qualified name, owner, key, tensor, not persistent) of every tensor, each node's own
        ones first."""
        for node_name, node in _nodes(self, prefix, recurse):
            skip = vars(node).get("_non_persistent", ()) if isinstance(node, Module) else ()
            for name, key, value in _entries(node):
                if isinstance(value, Tensor):
                    yield _join(node_name, name), node, key, value, name in skip

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> List[Tuple[str, Tensor]]:
        seen: set = set()
        out = []
        for name, _, _, t, _ in self._tensors(prefix, recurse):
            if t.requires_grad and not (remove_duplicate and id(t) in seen):
                seen.add(id(t))
                out.append((name, t))
        return out

    def parameters(self, recurse: bool = True) -> List[Tensor]:
        """The tensors that require grad (a list, which PyTorch's optimizers take too)."""
        return [t for _, t in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> List[Tuple[str, Tensor]]:
        seen: set = set()
        out = []
        for name, _, _, t, _ in self._tensors(prefix, recurse):
            if not t.requires_grad and not (remove_duplicate and id(t) in seen):
                seen.add(id(t))
                out.append((name, t))
        return out

    def buffers(self, recurse: bool = True) -> List[Tensor]:
        return [t for _, t in self.named_buffers(recurse=recurse)]

    def add_module(self, name: str, module: Optional["Module"]) -> None:
        setattr(self, name, module)

    register_module = add_module

    def register_parameter(self, name: str, param: Optional[Tensor]) -> None:
        setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Optional[Tensor], persistent: bool = True) -> None:
        """A tensor that is not a parameter; in ``state_dict`` unless ``persistent=False``."""
        setattr(self, name, tensor)
        skip = set(vars(self).get("_non_persistent", ()))
        skip.discard(name)
        if not persistent:
            skip.add(name)
        self._non_persistent = frozenset(skip)

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ----

    def train(self, mode: bool = True) -> "Module":
        """Training mode (``Dropout`` drops), for this module and every module below it."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for _, m in self.named_modules():
            m.training = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Freezes the parameters (they stop being parameters until unfrozen), or unfreezes
        those this method froze."""
        if requires_grad:
            for _, _, _, t, _ in self._tensors():
                ref = _FROZEN.get(id(t))
                if ref is not None and ref() is t:
                    t.requires_grad = True
                    del _FROZEN[id(t)]
        else:
            for t in self.parameters():
                t.requires_grad = False
                _FROZEN[id(t)] = weakref.ref(t)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops the gradients (the next ``backward`` starts from zero either way)."""
        for p in self.parameters():
            p.grad = None

    # ---- state ----

    def state_dict(self, *args: Any, destination: Optional[Dict[str, Any]] = None,
                   prefix: str = "", keep_vars: bool = False) -> Dict[str, Tensor]:
        """Every parameter and persistent buffer by qualified name, in PyTorch's order; the
        tensors are detached (``keep_vars=True``: the tensors themselves)."""
        out = OrderedDict() if destination is None else destination
        for name, _, _, t, non_persistent in self._tensors(prefix):
            if not non_persistent:
                out[name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = True,
                        assign: bool = False) -> Any:
        """Copies the values of ``state_dict`` into the parameters and buffers of the same names
        (tensors or arrays, cast to each one's dtype). With ``strict``, missing or unexpected
        names raise; a shape that differs always does, before anything is copied. Returns
        ``(missing_keys, unexpected_keys)``."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = OrderedDict()
        for name, owner, key, t, non_persistent in self._tensors():
            if not non_persistent:
                own[name] = (owner, key, t)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        for name, (_, _, t) in own.items():
            if name in state_dict:
                shape = tuple(np.shape(state_dict[name])) if not isinstance(
                    state_dict[name], Tensor) else state_dict[name].shape
                if shape != t.shape:
                    errors.append(f"size mismatch for {name}: copying a param with shape "
                                  f"{list(shape)} from checkpoint, the shape in current model is "
                                  f"{list(t.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with _api.no_grad():
            for name, (owner, key, t) in own.items():
                if name not in state_dict:
                    continue
                value = state_dict[name]
                if assign:
                    new = value if isinstance(value, Tensor) else _api.tensor(value)
                    new = new.detach()
                    new.requires_grad = t.requires_grad
                    _set(owner, key, new)
                else:
                    t.copy_(value)
        return _IncompatibleKeys(missing, unexpected)

    # ---- dtypes and devices ----

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` or keywords: the
        device is checked and every tensor stays where it is (see ``xlaprof.device``); a dtype
        converts the floating-point parameters and buffers (new tensors: make the optimizer
        after this)."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif _device.resolve(arg, strict=False) is not None:
                device = arg
            else:
                dtype = arg
        if device is not None and _device.resolve(device) is None:
            raise TypeError(f"to(): {device!r} is not a device")
        if dtype is not None:
            self._cast(dtype)
        return self

    def _cast(self, dtype: Any) -> "Module":
        for _, owner, key, t, _ in list(self._tensors()):
            if t.is_floating_point():
                with _api.no_grad():
                    new = t.to(dtype).detach()
                new.requires_grad = t.requires_grad
                _set(owner, key, new)
        return self

    def cpu(self) -> "Module":
        return self

    def float(self) -> "Module":
        return self._cast("float32")

    def double(self) -> "Module":
        return self._cast("float64")

    def half(self) -> "Module":
        return self._cast("float16")

    def bfloat16(self) -> "Module":
        return self._cast("bfloat16")

    # ---- printing ----

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self.named_children():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (f"\n  {extra}" if extra else "")
        return head + "\n" + "\n".join(lines) + "\n)"


def _container_modules(value: Any, prefix: str) -> Iterator[Tuple[str, Module]]:
    for name, _, v in _entries(value):
        if isinstance(v, Module):
            yield f"{prefix}.{name}", v
        elif isinstance(v, _CONTAINERS):
            yield from _container_modules(v, f"{prefix}.{name}")


def _set(owner: Any, key: Any, value: Any) -> None:
    if isinstance(owner, Module):
        object.__setattr__(owner, key, value)
    elif isinstance(owner, tuple):
        raise TypeError("cannot replace a tensor held in a tuple; use a list")
    else:
        owner[key] = value


def _check_device(device: Any) -> None:
    if device is not None and _device.resolve(device) is None:
        raise TypeError(f"device must be None, an xlaprof.device or a device name, not {device!r}")


def _leaf(t: Tensor, dtype: Any) -> Tensor:
    """A parameter made by the engine's initializers, in `dtype` (uploaded: device data)."""
    if dtype is None or dtype == t.dtype:
        return t
    return _api.tensor(t.numpy(), dtype=dtype, requires_grad=True)


# ---- layers -------------------------------------------------------------------------------


class Linear(Module):
    """``y = x W^T + b``, with PyTorch's layout and initialization; ``seed`` (an xlaprof
    extension) fixes the initial values."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *, seed: Optional[int] = None) -> None:
        super().__init__()
        _check_device(device)
        made = _native.Linear(in_features, out_features, bias, seed)
        self.in_features, self.out_features = in_features, out_features
        self.weight = _leaf(made.weight, dtype)
        self.bias = None if made.bias is None else _leaf(made.bias, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _square(name: str, value: Any) -> int:
    if isinstance(value, int):
        return value
    a, b = value
    if a != b:
        raise ValueError(f"{name} must be square here, not {tuple(value)}")
    return int(a)


class Conv2d(Module):
    """2-D convolution over ``[N, C, H, W]``, with PyTorch's initialization; square kernels,
    ``padding_mode='zeros'``; ``padding`` may be ``'valid'`` or ``'same'``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, Tuple[int, int]],
                 stride: Union[int, Tuple[int, int]] = 1,
                 padding: Union[str, int, Tuple[int, int]] = 0,
                 dilation: Union[int, Tuple[int, int]] = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None, *,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        _check_device(device)
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode {padding_mode!r} is not supported; only 'zeros'")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        k = _square("kernel_size", kernel_size)
        if padding == "valid":
            padding = 0
        elif padding == "same":
            d = _square("dilation", dilation)
            if _square("stride", stride) != 1 or (d * (k - 1)) % 2:
                raise ValueError("padding='same' needs stride 1 and an odd effective kernel here")
            padding = d * (k - 1) // 2
        made = _native.Conv2d(in_channels // groups, out_channels, k, 1, 0, seed)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k, k)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = _leaf(made.weight, dtype)
        self.bias = _leaf(made.bias, dtype) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")


class LayerNorm(Module):
    """Layer normalization over the last dims, with a learned scale and shift."""

    def __init__(self, normalized_shape: Union[int, Tuple[int, ...]], eps: float = 1e-05,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            made = _native.LayerNorm(list(shape))
            self.weight = _leaf(made.weight, dtype)
            self.bias = _leaf(made.bias, dtype) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    """A table of ``num_embeddings`` vectors, looked up by integer ids; the ``padding_idx`` row
    starts at zero and gets no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: Optional[int] = None, *, device: Any = None, dtype: Any = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        _check_device(device)
        made = _native.Embedding(num_embeddings, embedding_dim, seed)
        weight = made.weight
        if padding_idx is not None:
            if padding_idx < 0:
                padding_idx += num_embeddings
            if not 0 <= padding_idx < num_embeddings:
                raise ValueError("padding_idx must be within num_embeddings")
            values = weight.numpy()
            values[padding_idx] = 0
            weight = _api.tensor(values, requires_grad=True)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = _leaf(weight, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zeroes each element with probability ``p`` in training mode (and scales the others by
    ``1 / (1 - p)``); passes the input through in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class MaxPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding)


class AvgPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding)


# ---- activations --------------------------------------------------------------------------


class ReLU(Module):
    """``inplace=True`` is accepted; the result is a new tensor either way."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return input.relu()


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', not {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)


class SiLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return input.silu()


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Softmax(Module):
    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=4)


class LogSoftmax(Module):
    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=4)


class Identity(Module):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Flatten(Module):
    """Flattens the dims from ``start_dim`` (after the batch, by default) to ``end_dim``."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)


# ---- containers ---------------------------------------------------------------------------


class _Indexed(Module):
    """Modules kept as attributes ``"0"``, ``"1"``, ... (or by name), in order."""

    def __init__(self) -> None:
        super().__init__()
        self._order: List[str] = []

    def _add(self, name: str, module: Any) -> None:
        if name not in self._order:
            self._order.append(name)
        object.__setattr__(self, name, module)

    def _items(self) -> List[Any]:
        return [getattr(self, n) for n in self._order]

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return type(self)(*self._items()[index])
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} is out of range")
        return getattr(self, self._order[index])

    def append(self, module: Any) -> "_Indexed":
        self._add(str(len(self._order)), module)
        return self


class Sequential(_Indexed):
    """Calls its modules in order: ``Sequential(Linear(4, 8), ReLU(), Linear(8, 2))``, or
    ``Sequential(OrderedDict([("fc1", ...), ...]))`` for named ones."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], dict):
            for name, module in args[0].items():
                self._add(name, module)
        else:
            for i, module in enumerate(args):
                self._add(str(i), module)

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(_Indexed):
    def __init__(self, modules: Optional[Iterable[Any]] = None) -> None:
        super().__init__()
        for module in modules or ():
            self.append(module)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ModuleList(self._items()[index])
        return super().__getitem__(index)

    def extend(self, modules: Iterable[Any]) -> "ModuleList":
        for module in modules:
            self.append(module)
        return self


class ModuleDict(Module):
    def __init__(self, modules: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        for name, module in (modules or {}).items():
            setattr(self, name, module)

    def _names(self) -> List[str]:
        return [k for k, _, v in _entries(self) if isinstance(v, Module)]

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, module: Any) -> None:
        setattr(self, key, module)

    def __contains__(self, key: str) -> bool:
        return key in self._names()

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def keys(self) -> List[str]:
        return self._names()

    def values(self) -> List[Any]:
        return [getattr(self, k) for k in self._names()]

    def items(self) -> List[Tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self._names()]


# ---- losses -------------------------------------------------------------------------------


class _Loss(Module):
    def __init__(self, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = F._reduction(size_average, reduce, reduction)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 ignore_index: int = -100, reduce: Optional[bool] = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 ignore_index: int = -100, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(_Loss):
    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None, reduction: str = "mean",
                 pos_weight: Optional[Tensor] = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


__all__ = [
    "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "Conv2d", "CrossEntropyLoss", "Dropout",
    "Embedding", "Flatten", "GELU", "Identity", "L1Loss", "LayerNorm", "LeakyReLU", "Linear",
    "LogSoftmax", "MSELoss", "MaxPool2d", "Module", "ModuleDict", "ModuleList", "NLLLoss",
    "Parameter", "ReLU", "Sequential", "SiLU", "Sigmoid", "Softmax", "Tanh", "functional",
]
