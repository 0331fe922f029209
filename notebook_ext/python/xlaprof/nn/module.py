"""``Module``: parameters and buffers found by walking attributes in the order they were set,
``state_dict()`` as PyTorch names it, ``train``/``eval``, ``to``, ``requires_grad_``; and
``Parameter``."""

from __future__ import annotations

import weakref
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .. import _api, _device, _native
from .._native import Tensor

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

def entries(node: Any) -> List[Tuple[str, Any, Any]]:
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
        for child_name, _, value in entries(node):
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
        for name, _, value in entries(self):
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
            for name, key, value in entries(node):
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
    for name, _, v in entries(value):
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

def check_device(device: Any) -> None:
    if device is not None and _device.resolve(device) is None:
        raise TypeError(f"device must be None, an xlaprof.device or a device name, not {device!r}")

def leaf(t: Tensor, dtype: Any) -> Tensor:
    """A parameter made by the engine's initializers, in `dtype` (uploaded: device data)."""
    if dtype is None or dtype == t.dtype:
        return t
    return _api.tensor(t.numpy(), dtype=dtype, requires_grad=True)
