"""``xt.mark_sharding`` inside a function ``torch.compile`` traces: one op of the graph.

Dynamo cannot trace the engine call that splits a tensor, so a ``mark_sharding`` inside a
compiled function broke the graph there. Inside one it is instead a custom op,
``xlaprof::mark_sharding``, which Dynamo traces. It changes no value, so it is declared as
writing nothing (a write would bump the tensor's version, and autograd refuses a saved
activation that was written) and as having an effect, which keeps it in the graph and in order
(AOTAutograd threads it on effect tokens, as it does `print`). When the backend records the graph
the op reaches the bridge's dispatcher with the lazy tensor itself, whose lowering splits it as
the eager call does: a pending tensor gets a constraint XLA's partitioner honours, so the
captured program is partitioned over the mesh, and the ops after it read the constrained value.

The op's arguments are what a graph can hold: the mesh as a number (a key into the meshes seen
so far, which this module keeps) and the spec as JSON text; both are worked out while Dynamo
traces and become constants of the graph.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

import torch

from ._tensor import assign, value
from .lowerings.registry import lower_raw

# Meshes by key: the graph holds the key, the op's lowering looks the mesh up.
_MESHES: Dict[int, Any] = {}


@torch._dynamo.assume_constant_result
def _mesh_key(mesh: Any) -> int:
    _MESHES[id(mesh)] = mesh
    return id(mesh)


@torch._dynamo.assume_constant_result
def _spec_text(spec: Tuple[Any, ...]) -> str:
    return json.dumps([list(e) if isinstance(e, tuple) else e for e in spec])


def _spec(text: str) -> Tuple[Any, ...]:
    return tuple(tuple(e) if isinstance(e, list) else e for e in json.loads(text))


@torch.library.custom_op("xlaprof::mark_sharding", mutates_args=())
def _op(t: torch.Tensor, mesh: int, spec: str) -> None:
    # Reached only for a tensor that is not on the device (a lazy one takes the lowering below):
    # the eager call's error.
    _eager(t, _MESHES[mesh], _spec(spec))


@_op.register_fake
def _(t: torch.Tensor, mesh: int, spec: str) -> None:
    return None


def _has_an_effect() -> None:
    # (How torch registers the effect of its own `aten::_print`.)
    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    _register_effectful_op(torch.ops.xlaprof.mark_sharding.default, _EffectType.ORDERED)


_has_an_effect()


def traced(t: torch.Tensor, mesh: Any, spec: Tuple[Any, ...]) -> torch.Tensor:
    """``mark_sharding`` as Dynamo traces it."""
    torch.ops.xlaprof.mark_sharding(t, _mesh_key(mesh), _spec_text(spec))
    return t


@lower_raw(torch.ops.xlaprof.mark_sharding.default)
def _lowering(t: Any, mesh: int, spec: str) -> None:
    x = value(t)
    if not x.is_pending:
        # An argument of the graph: split eagerly, its data would be cut on the host once, at
        # the recording, and the replays would leave it whole. A constraint on a pending copy
        # (two reshapes, which XLA removes) splits it inside the program at every run, and the
        # argument is rebound to that split result, as the eager call leaves it.
        assign(t, x.unsqueeze(0).squeeze(0))
    _eager(t, _MESHES[mesh], _spec(spec))


def _eager(t: Any, mesh: Any, spec: Tuple[Any, ...]) -> None:
    from . import mark_sharding  # (the package imports this module)

    mark_sharding(t, mesh, spec)
