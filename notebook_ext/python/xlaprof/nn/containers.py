"""``Sequential``, ``ModuleList``, ``ModuleDict``."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .module import Module, entries


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
        return [k for k, _, v in entries(self) if isinstance(v, Module)]

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
