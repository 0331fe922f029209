"""``torch.compile(model, backend="xlaprof")``: Dynamo's graphs run on the engine.

How Dynamo sees the device's tensors. Dynamo traces only tensors it can fake; a ``LazyTensor``
is a wrapper subclass whose value lives in the engine, so it follows torch's traceable-subclass
protocol (``__tensor_flatten__``/``__tensor_unflatten__``, as DTensor does) with one inner tensor:
a shape-only tensor on the meta device. Dynamo and AOTAutograd fake that inner tensor and run the
subclass's ops on it, so the graphs the backend receives are plain aten graphs over meta values;
at run time AOTAutograd unwraps each lazy argument into that same meta tensor, which names the
lazy tensor it stands for, and wraps each meta result back into a lazy tensor.

How a graph runs. Each graph AOTAutograd hands over (forward, backward, inference; an optimizer
step is one more) is recorded once, on its first call, by running it on the real lazy tensors
through the bridge's own dispatcher: one lowering path, the same one eager code takes. The
recorded graph is then captured (`_native.Replay`): compiled once through the compiled-graph and
persistent caches, and from then on each call is one launch on the arguments' device buffers,
with nothing recorded. Values on the CPU (a count kept there) are computed by torch on the CPU
at each call and fed to the device graph as arguments, never baked into it; a compiled
optimizer's step counts are made on the device instead, as Dynamo makes them on CUDA.

One program a step (``XLAPROF_FUSED_STEPS=1``). A capture's runs are recorded into the lazy
trace instead of launched (`_native.Replay.recorded`, from a template of the graph's nodes, no
dispatch), so the next value read computes the step's graphs and the lazy code between them as
one program; a graph called again before its last results were computed runs the pending step
first. Not the default: one program a step gives up the overlap of the device's graph with the
host's next call (docs/design/torch-compile.md).

What cannot be captured. A graph whose recording read values on the host or ran an op on the
CPU (an op with no lowering: the graph splits there; a factory's result would otherwise be a
constant of the capture) is recorded anew at every call, lazily: it gives the same results, pays
the recording, and the split is reported where it happens (the op, its line,
``xt.fallbacks()``); ``XLAPROF_STRICT=1`` makes such an op an error instead.
Dynamo's symbolic sizes are specialized: each new size is a new capture.

Many devices. Arguments split over a mesh (``xt.mark_sharding``, before the call or inside the
compiled function, where it is an op of the graph: `_sharding`) make the captured program a
partitioned one, launched on every device of the mesh, its results split as a sync's are. The
split is part of the program, which Dynamo's guards do not see: a call whose arguments are split
otherwise than at each capture so far is captured again, for that split.
"""

from __future__ import annotations

import operator
import os
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils._pytree import tree_map

from .. import _native
from . import _check
from ._device import DEVICE_TYPE, TO_TORCH
from ._layout import meta_like
from ._tensor import LazyTensor, _DEVICE, rebind, to_cpu, to_engine, value

aten = torch.ops.aten
_META = torch.device("meta")

# True once Dynamo has traced a lazy tensor: only then does the dispatcher look for traced ones.
tracing = False

# Whether a captured graph's runs are recorded into the lazy trace, where the next sync computes
# a step's graphs and the lazy code between them as one program, rather than launched one by one
# (`XLAPROF_FUSED_STEPS=1`; see the module's comment).
FUSED_STEPS = os.environ.get("XLAPROF_FUSED_STEPS", "").strip() not in ("", "0")


# ---- the traceable-subclass protocol (installed on LazyTensor by `_tensor`) -----------------


def meta_of(t: LazyTensor) -> torch.Tensor:
    """The shape-only tensor that stands for ``t`` in Dynamo's graphs (one per tensor, kept; a
    traced tensor's is the fake it was made from). AOTAutograd unwraps a compiled graph's
    arguments just before the call and may drop the lazy tensor itself (a gradient passed to a
    backward graph), so the stand-in carries the tensor's value until the graph has read it.
    The common case, a stand-in already made, is `LazyTensor._compile_meta`'s own: Dynamo's
    guards and AOTAutograd's unwrapping ask it twice per argument per call. A stand-in is
    made once for its tensor's shape and dtype: the data setter, through which everything that
    changes them in place goes (`views._reshape_in_place`), drops it."""
    d = t.__dict__
    m = d.get("_meta")
    if t._traced:
        return m
    if m is None:
        m = _laid_out_like(t)
        m._xlaprof_owner = weakref.ref(t)
        d["_meta"] = m
    m._xlaprof_value = value(t)
    return m


def _laid_out_like(t: LazyTensor) -> torch.Tensor:
    """A meta tensor of ``t``'s shape, dtype and layout (a view's strides and offset in its
    root, `_layout`: Dynamo checks that the stand-in's strides are the tensor's)."""
    if not t._strided:
        return torch.empty(t.shape, dtype=t.dtype, device=_META)
    return meta_like(t)


def unflatten(inner: Dict[str, torch.Tensor], ctx: Any, size: Any, stride: Any) -> LazyTensor:
    m = inner["_compile_meta"]
    if type(m) is torch.Tensor:
        d = m.__dict__
        made = d.get("_xlaprof_value")
        if made is not None:  # a result of a compiled graph
            t = LazyTensor(made)
            if "_xlaprof_owner" not in d:
                # Its stand-in from now on: the guards and the unwrapping of the next call that
                # takes it find one made (a `torch.empty` a call saved). The value stays on it
                # until a call takes the tensor (`_native.compiled_arguments`), as on any
                # stand-in `meta_of` gave.
                d["_xlaprof_owner"] = weakref.ref(t)
                t.__dict__["_meta"] = m
            return t
    return traced(m, stride)


def traced(inner: torch.Tensor, strides: Any = None) -> LazyTensor:
    """A lazy tensor as Dynamo and AOTAutograd trace it: its ops run on ``inner`` (a fake).
    Its strides are the fake's, or those torch asks of it (``strides``: the outer tensor's,
    which the protocol's unflattening must keep where a functionalized inner lays out a
    written view afresh)."""
    global tracing
    tracing = True
    # The fake's strides too: torch's decompositions check them (a view of a transpose).
    t = torch.Tensor._make_wrapper_subclass(
        LazyTensor, inner.shape, strides=inner.stride() if strides is None else strides,
        storage_offset=inner.storage_offset(),
        dtype=inner.dtype, device=_DEVICE, requires_grad=inner.requires_grad,
    )
    t._xp = None
    t._traced = True
    # Complex to the native dispatcher: it hands every op to the Python one (`_dispatch`).
    t._complex = True
    t.__dict__["_meta"] = inner
    return t


def any_traced(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """Whether an op's arguments hold a traced lazy tensor (asked of every op the Python
    dispatcher takes once a compile has traced one: the flat arguments first, cheaply)."""
    for a in args:
        if isinstance(a, LazyTensor):
            if a._traced:
                return True
        elif isinstance(a, (list, tuple)):
            if any(isinstance(t, LazyTensor) and t._traced for t in a):
                return True
    return any(isinstance(v, LazyTensor) and v._traced for v in kwargs.values()) if kwargs else False


def traced_dispatch(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """An op while tracing: run on the inner fakes; a plain tensor on the device (a factory's)
    meets them on the meta device, which the backend reads as the device again. The device as
    an argument is the meta device too: an op that makes a tensor of a traced one on the device
    (`new_empty(x, ..., device=dev)`, which torch's circular padding then writes into) makes a
    traced tensor, whose writes the graph records. A real tensor made there would be taken into
    the graph as a copy of its values, and writes into it lost."""

    def inner(a: Any) -> Any:
        if isinstance(a, torch.device) and a.type == DEVICE_TYPE:
            return _META
        if isinstance(a, LazyTensor) and a._traced:
            return a.__dict__["_meta"]
        if isinstance(a, LazyTensor):
            # A real one made while tracing (`torch.tensor([], device=dev)` inside the compiled
            # code): a constant of the graph, by its values.
            return aten.lift_fresh_copy.default(to_cpu(a)).to(_META)
        if isinstance(a, torch.Tensor) and a.device.type == DEVICE_TYPE:
            return a.to(_META)
        return a

    out = func(*tree_map(inner, args), **tree_map(inner, kwargs))
    # An in-place op returns its argument: the traced tensor itself, re-described where the op
    # changed its fake's shape (`squeeze_`, which C++ kernels such as `quantile` apply to their
    # own results; the object they hold must see it, as in `views._reshape_in_place`).
    owners = {id(a.__dict__["_meta"]): a for a in (*args, *kwargs.values())
              if isinstance(a, LazyTensor) and a._traced}

    def outer(r: Any) -> Any:
        if not isinstance(r, torch.Tensor) or r.device.type != "meta":
            return r
        owner = owners.get(id(r))
        if owner is None:
            return traced(r)
        if owner.shape != r.shape or owner.stride() != r.stride():
            torch.Tensor.data.__set__(owner, traced(r))  # type: ignore[attr-defined]
        return owner

    return tree_map(outer, out)


# ---- the backend ----------------------------------------------------------------------------


def backend(gm: torch.fx.GraphModule, example_inputs: List[Any], **options: Any) -> Any:
    """The ``xlaprof`` backend: AOTAutograd's forward, backward and inference graphs, each run
    on the engine (see the module's comment)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    def compiler(kind: str) -> Any:
        def compile_graph(g: torch.fx.GraphModule, inputs: List[Any]) -> Any:
            graph = CompiledGraph(fold_identity_views(g), kind)

            def run(args: List[Any]) -> List[Any]:
                return graph(args)

            run._boxed_call = True  # type: ignore[attr-defined]  (takes the argument list)
            run.graph = graph  # type: ignore[attr-defined]
            return run

        return compile_graph

    return aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        # An optimizer's step writes every parameter and state: written inside the graph (a
        # `copy_` node) the writes cost nothing per tensor, where AOTAutograd's own epilogue
        # would dispatch one `copy_` per tensor after each call.
        keep_inference_input_mutations=True,
        # The forward saves a weight, not its transpose, and the backward recomputes the views
        # and cheap ops it needs, which XLA folds into its products (the default partition made
        # every forward write a transposed copy of each weight: docs/design/torch-compile.md).
        partition_fn=min_cut_rematerialization_partition,
    )(gm, example_inputs)


_PERMUTES = {aten.t.default, aten.transpose.int, aten.permute.default}


def _permutation(node: torch.fx.Node) -> Optional[List[int]]:
    """The dimension order a `t`, `transpose` or `permute` node gives its input (None for
    another node, or one whose rank tracing did not record)."""
    if node.op != "call_function" or node.target not in _PERMUTES:
        return None
    val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    rank = val.dim()
    order = list(range(rank))
    if node.target is aten.permute.default:
        return [d % rank for d in node.args[1]] if rank else order
    if node.target is aten.t.default:
        a, b = (0, 1) if rank == 2 else (0, 0)
    else:
        a, b = (node.args[1] % rank, node.args[2] % rank) if rank else (0, 0)
    order[a], order[b] = order[b], order[a]
    return order


def fold_identity_views(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with each chain of transposes that gives back its input (``t(t(w))``) replaced
    by that input.

    Where Dynamo traces sizes symbolically (a recompile for a new batch size), the partitioner
    saves ``t(t(w))`` for the backward rather than ``w``: a forward output that is a new array,
    so every forward would write a copy of the weight. As ``w`` itself it is an argument, which
    the forward hands back without a copy."""
    changed = False
    for node in gm.graph.nodes:
        order = _permutation(node)
        if order is None:
            continue
        identity = list(range(len(order)))
        base = node.args[0]
        while order != identity and (inner := _permutation(base)) is not None:
            order = [inner[d] for d in order]
            base = base.args[0]
        if order == identity:
            node.replace_all_uses_with(base)
            changed = True
    # The chains' own nodes, now unused (views: nothing else to keep them for).
    for node in reversed(list(gm.graph.nodes)):
        if _permutation(node) is not None and not node.users:
            gm.graph.erase_node(node)
            changed = True
    if changed:
        gm.recompile()
    return gm


def register() -> None:
    """Registers ``backend="xlaprof"`` with Dynamo (idempotent)."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    from torch._subclasses.fake_tensor import FakeTensorMode

    # Registered here unless torch knows it already: from its entry point, which torch loads
    # itself (this import may be that load: registering twice is an error).
    if "xlaprof" not in _BACKENDS:
        register_backend(backend, name="xlaprof")
    # Dynamo must never trace the bridge: where it runs an op eagerly (after a graph break) the
    # op's dispatch through our Python would otherwise be compiled as the user's code.
    torch._dynamo.trace_rules.add("xlaprof")
    # Fake tensors fold ops on small constants by running them for real; one that moves a
    # constant onto the device (`torch.tensor(0).to(dev)`) makes a real lazy tensor, which torch
    # would then make a constant fake of, and a lazy tensor's fake is a traced lazy tensor, not
    # a FakeTensor. Such results stay values of the graph instead.
    may_turn_const = FakeTensorMode.may_turn_const
    if not getattr(may_turn_const, "_xlaprof", False):
        def lazy_never_const(self: Any, t: torch.Tensor) -> bool:
            return not isinstance(t, LazyTensor) and may_turn_const(self, t)

        lazy_never_const._xlaprof = True  # type: ignore[attr-defined]
        FakeTensorMode.may_turn_const = lazy_never_const  # type: ignore[method-assign]
    _steps_on_the_device()


def _steps_on_the_device() -> None:
    """A compiled optimizer's step counts live on the device, as Dynamo puts them for CUDA.

    torch keeps an optimizer's step counts on the CPU unless it is capturable; when Dynamo first
    traces a step whose parameters are all on a GPU it makes them capturable for the state's
    creation, so the counts and the bias corrections made from them are part of the device graph.
    The same for this device: else each call computes them on the CPU with torch, uploads them and
    writes the counts back: a fifth of a small GPT-2's compiled AdamW step (see
    ``bench/compiled_optimizer.py``). (Then, as on CUDA, an eager step on that state reads each
    count back.)"""
    try:
        from torch._dynamo.variables.optimizer import OptimizerVariable
    except ImportError:  # another torch: its own placement stands
        return
    gpu_only = getattr(OptimizerVariable, "_safe_to_set_capturable", None)
    if gpu_only is None or getattr(gpu_only, "_xlaprof", False):
        return

    def device_too(self: Any, group: Dict[str, Any]) -> bool:
        params = group.get("params", [])
        if (params and "capturable" in group and all(p.device.type == DEVICE_TYPE for p in params)
                and all(p not in self.value.state for p in params)):
            return True
        return gpu_only(self, group)

    device_too._xlaprof = True  # type: ignore[attr-defined]
    device_too.gpu_only = gpu_only  # type: ignore[attr-defined]
    OptimizerVariable._safe_to_set_capturable = device_too  # type: ignore[method-assign]


# What the backend did, for tests and the bench: graphs captured, graphs recorded at each call
# for want of a capture (and why), runs of captured graphs.
STATS = {"captured": 0, "uncaptured": 0, "replays": 0, "recorded_runs": 0}


def stats() -> Dict[str, int]:
    return dict(STATS)


def _where(node: torch.fx.Node) -> str:
    """Where a value lives (a foreach op's list of them), from the fakes tracing gave it."""
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    devices = {v.device.type for v in vals if isinstance(v, torch.Tensor)}
    if not devices:
        return "other"
    return "host" if devices == {"cpu"} else "device"


def _writes_input(node: torch.fx.Node) -> bool:
    return node.target is aten.copy_.default and node.args[0].op == "placeholder"


class CompiledGraph:
    """One graph from AOTAutograd: captured on its first call (per set of sizes), replayed after."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str) -> None:
        self.gm = gm
        self.kind = kind
        nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.outputs = list(nodes[-1].args[0])
        self.constants = {n: getattr(gm, n.target) for n in nodes if n.op == "get_attr"}
        # The CPU arguments are fed to the device part at each call (never constants of its
        # capture: a parameter the optimizer updates on the CPU, the next batch). A graph of CPU
        # tensors alone (a function called with CPU tensors) runs on the device whole, its
        # results read back and its writes into its arguments copied back, at each call. Else
        # the graph's CPU part (CPU values made from CPU values only: an optimizer's step counts)
        # is computed by torch at each call, the rest on the device.
        on_device = any(_where(n) == "device" for n in nodes)
        host = {n for n in self.placeholders if _where(n) == "host"}
        host.update(n for n, v in self.constants.items()
                    if isinstance(v, torch.Tensor) and v.device.type == "cpu")
        self.host_nodes: List[torch.fx.Node] = []
        for n in nodes if on_device else ():
            if n.op == "call_function" and _where(n) == "host" and set(n.all_input_nodes) <= host:
                host.add(n)
                self.host_nodes.append(n)
        self.host = host
        # Writes into CPU arguments wait until the device part has read the values it needs.
        self.host_writes = [n for n in self.host_nodes if _writes_input(n)]
        self.host_nodes = [n for n in self.host_nodes if not _writes_input(n)]
        # A graph of CPU tensors alone: its writes into its arguments, computed on the device,
        # and the CPU its ops name (autocast's casts back to float32 in a backward) the device.
        self.written_back = [] if on_device else [n for n in nodes if _writes_input(n)]
        self.cpu_alone = not on_device
        self.host_inputs = [n for n in nodes if n in host and n.op != "call_function"]
        self.host_part = _subgraph(gm, self.host_inputs, self.host_nodes)
        self.host_write_part = _subgraph(gm, self.host_inputs + self.host_nodes, self.host_writes)
        from .._torch_compile import _traceback_frames

        self.stacks = {n: _traceback_frames(n.meta["stack_trace"]) or None
                       for n in nodes if n.meta.get("stack_trace")}
        # Per tuple of the integer arguments (symbolic sizes, specialized): the captures, one per
        # way the arguments were split over a mesh, or None where the graph is recorded anew at
        # each call (see the module's comment).
        self.captures: Dict[Tuple[int, ...], List[Optional[Capture]]] = {}
        # Where the integer arguments may be (the placeholders tracing gave no tensor).
        self.sizes_at = [i for i, n in enumerate(self.placeholders)
                         if not isinstance(n.meta.get("val"), torch.Tensor)]

    def __call__(self, args: List[Any]) -> List[Any]:
        # (Per argument, no Python statement of ours: a compiled optimizer's step has four
        # arguments per parameter.)
        given = _native.compiled_arguments(args, torch.Tensor, LazyTensor)
        args.clear()  # the boxed convention: the graph owns its arguments now
        env: Dict[torch.fx.Node, Any] = dict(self.constants)
        env.update(zip(self.placeholders, given))
        key = tuple([given[i] for i in self.sizes_at if type(given[i]) is int])
        if self.host_nodes:
            env.update(zip(self.host_nodes, self.host_part(*[env[n] for n in self.host_inputs])))
        captures = self.captures.get(key)
        if captures is None:
            captures = self.captures[key] = []
        for capture in captures:
            # A capture's run is None where the arguments are split over a mesh otherwise than
            # at that capture (a program of its own).
            out = self._recorded(env) if capture is None else capture.run(self, env)
            if out is not None:
                break
        else:
            # The recording is this call's run either way: a graph that writes its arguments
            # must not run twice.
            capture, out = Capture.record(self, env)
            captures.append(capture)
        if self.host_writes:
            self.host_write_part(*[env[n] for n in self.host_inputs + self.host_nodes])
        return out

    def _recorded(self, env: Dict[torch.fx.Node, Any]) -> List[Any]:
        """The graph recorded on the lazy device and run, as eager code would be."""
        STATS["recorded_runs"] += 1
        return self.results_of(_interpret(self, env, {}))

    def results_of(self, outs: Dict[torch.fx.Node, Any]) -> List[Any]:
        """The graph's outputs from a recording of it, run."""
        _native.sync()
        return [_result(n, outs[n] if isinstance(n, torch.fx.Node) else n) for n in self.outputs]


class Capture:
    """A graph recorded once and captured: where the replay's arguments come from, which lazy
    arguments it writes, and how its results make the graph's outputs."""

    def __init__(self, replay: Any, arguments: List[torch.fx.Node], fed: List[List[torch.fx.Node]],
                 writes: List[torch.fx.Node], outputs: List[Tuple[str, Any]],
                 written_back: List[torch.fx.Node]) -> None:
        self.replay = replay
        # The lazy arguments, then the CPU values the device part reads, packed per dtype.
        self.arguments = arguments
        self.fed = fed
        # Lazy arguments the graph writes: the replay's results after the outputs' ones.
        self.writes = writes
        # Where they are among the arguments: a run hands their old values over (`run`).
        self.written_at = [arguments.index(n) for n in writes]
        # Per graph output: ("meta", (i, like)) the replay's i-th result, handed back as a meta
        # stand-in made from ``like`` (decided once: `_result`), ("device", i) that result
        # otherwise, ("node", n) a CPU value or a non-tensor of the graph, ("const", v) a constant.
        self.outputs = outputs
        # CPU arguments the graph writes (a graph of CPU tensors alone): the replay's results
        # after the outputs' ones, copied into them after each run.
        self.written_back = written_back

    @staticmethod
    def record(graph: CompiledGraph, env: Dict[torch.fx.Node, Any]) -> Tuple[Optional["Capture"], List[Any]]:
        """Records the graph on this call's arguments and captures it: the capture (None where
        it cannot be captured) and this call's outputs."""
        lazy_args = [n for n in graph.placeholders if isinstance(env[n], LazyTensor)]
        _native.materialize([value(env[n]) for n in lazy_args])
        before = {n: value(env[n]) for n in lazy_args}
        syncs, fallbacks = _native.counters()["syncs"], _fallback_calls()
        # (AOTAutograd's effect tokens are CPU values of the graph that hold no tensor.)
        fed = [g for g in ([n for n in group if isinstance(env[n], torch.Tensor)] for group in _fed(graph)) if g]
        uploads: Dict[torch.fx.Node, LazyTensor] = {}
        packed = []
        for group in fed:
            whole = _pack(group, env)
            packed.append(value(whole))
            at = 0
            for n in group:
                size = env[n].numel()
                piece = value(whole)[at:at + size].reshape(*env[n].shape)
                uploads[n] = LazyTensor(piece)
                at += size
        outs = _interpret(graph, env, uploads)
        if _native.counters()["syncs"] != syncs or _fallback_calls() != fallbacks:
            # Recording it read values on the host, or an op ran on the CPU (see `_dispatch`;
            # a factory's result, random numbers perhaps, would be a constant of the capture):
            # the graph splits there, so it is recorded anew at each call.
            STATS["uncaptured"] += 1
            return None, graph.results_of(outs)
        STATS["captured"] += 1
        writes = [n for n in lazy_args if value(env[n]) is not before[n]]
        device_outs: List[Any] = []
        layout: List[Tuple[str, Any]] = []
        for n in graph.outputs:
            v = outs.get(n) if isinstance(n, torch.fx.Node) else n
            if isinstance(v, LazyTensor):
                if _traced_as_meta(n):
                    like = torch.empty(v.shape, dtype=v.dtype, device=_META)
                    layout.append(("meta", (len(device_outs), like)))
                else:
                    layout.append(("device", len(device_outs)))
                device_outs.append(value(v))
            elif isinstance(n, torch.fx.Node) and n in graph.host:
                layout.append(("node", n))
            else:
                layout.append(("const", v))
        written = [value(env[n]) for n in writes]
        written_back = [value(outs[n]) for n in graph.written_back]
        arg_values = [before[n] for n in lazy_args] + packed
        results = device_outs + written_back + written
        # Recorded into the trace, the graph is computed by the next sync with the rest of the step.
        recorded = _native.Replay.recorded(arg_values, results) if FUSED_STEPS else None
        replay, results = recorded or _native.Replay.capture(arg_values, results)
        back = [n.args[0] for n in graph.written_back]
        capture = Capture(replay, lazy_args, fed, writes, layout, back)
        return capture, capture._finish(graph, env, results)

    def run(self, graph: CompiledGraph, env: Dict[torch.fx.Node, Any]) -> Optional[List[Any]]:
        """The graph's outputs; None, with nothing run, where the arguments are split over a
        mesh otherwise than at the capture."""
        # The run and its writes in one native call (`Replay.run_on_tensors`): a written
        # argument's old value goes to the program for its new one (donated, as a sync donates an
        # updated parameter's buffer) when its tensor alone holds it, and the tensor is rebound.
        results = self.replay.run_on_tensors(
            list(map(env.__getitem__, self.arguments)),
            [value(_pack(group, env)) for group in self.fed],
            self.written_at, value, rebind,
        )
        if results is None:
            return None
        STATS["replays"] += 1
        self._write_back(env, results)
        return self._outputs(graph, env, results)

    def _write_back(self, env: Dict[torch.fx.Node, Any], results: List[Any]) -> None:
        """The CPU arguments the graph writes, written (they follow the outputs' results)."""
        first = len(results) - len(self.writes) - len(self.written_back)
        for node, new in zip(self.written_back, results[first:]):
            env[node].copy_(to_cpu(LazyTensor(new)))

    def _finish(self, graph: CompiledGraph, env: Dict[torch.fx.Node, Any], results: List[Any]) -> List[Any]:
        """Writes the lazy arguments the graph writes; the graph's outputs."""
        n_out = len(results) - len(self.writes)
        for node, new in zip(self.writes, results[n_out:]):
            rebind(env[node], new)  # the capture's own result for it: its dtype and shape
        self._write_back(env, results)
        return self._outputs(graph, env, results)

    def _outputs(self, graph: CompiledGraph, env: Dict[torch.fx.Node, Any], results: List[Any]) -> List[Any]:
        """The graph's outputs, from the replay's results for them (the first ones)."""
        out = []
        for (kind, what), n in zip(self.outputs, graph.outputs):
            if kind == "meta":  # no lazy tensor made and dropped: AOTAutograd makes the user's
                i, like = what
                m = like.detach()  # (a third of `torch.empty`'s cost)
                m._xlaprof_value = results[i]
                out.append(m)
            elif kind == "device":
                out.append(_result(n, LazyTensor(results[what])))
            elif kind == "node":
                out.append(env[what])
            else:
                out.append(what)
        return out


def _fallback_calls() -> int:
    from ._dispatch import fallbacks

    return sum(calls for calls, _ in fallbacks().values())


def _subgraph(gm: torch.fx.GraphModule, inputs: List[torch.fx.Node],
              nodes: List[torch.fx.Node]) -> Any:
    """``nodes`` of ``gm`` as a function of ``inputs`` returning their values: torch's own code
    generation, so a call costs the ops themselves."""
    g = torch.fx.Graph()
    remap = {n: g.placeholder(n.name) for n in inputs}
    for n in nodes:
        remap[n] = g.node_copy(n, lambda a: remap[a])
    g.output(tuple(remap[n] for n in nodes))
    return torch.fx.GraphModule(gm, g)


def _fed(graph: CompiledGraph) -> List[List[torch.fx.Node]]:
    """The CPU values the device part reads, grouped by dtype (one upload per group a call)."""
    groups: Dict[torch.dtype, List[torch.fx.Node]] = {}
    for node in graph.gm.graph.nodes:
        if node.op != "call_function" or node in graph.host or node in graph.host_writes:
            continue
        for inp in node.all_input_nodes:
            val = inp.meta.get("val")
            if inp in graph.host and isinstance(val, torch.Tensor):
                group = groups.setdefault(val.dtype, [])
                if inp not in group:
                    group.append(inp)
    return list(groups.values())


def _pack(group: List[torch.fx.Node], env: Dict[torch.fx.Node, Any]) -> LazyTensor:
    """One upload of a group's values, end to end."""
    flat = torch.cat([env[n].reshape(-1) for n in group]) if len(group) > 1 else env[group[0]].reshape(-1)
    return LazyTensor(to_engine(flat))


def _traced_as_meta(node: Any) -> bool:
    """Whether tracing saw a lazy tensor (a meta value) at ``node``."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.device.type == "meta"


def _stand_in(x: Any) -> torch.Tensor:
    """The meta stand-in of the engine value ``x``, carrying it (see `meta_of`)."""
    m = torch.empty(tuple(x.shape), dtype=TO_TORCH[x.dtype], device=_META)
    m._xlaprof_value = x
    return m


def _result(node: Any, v: Any) -> Any:
    """A result as AOTAutograd expects it: a meta stand-in where tracing saw a lazy tensor, a
    CPU tensor where it saw one (a graph of CPU tensors run on the device)."""
    if not isinstance(v, LazyTensor):
        return v
    if _traced_as_meta(node):
        return _stand_in(value(v))
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return to_cpu(v) if isinstance(val, torch.Tensor) and val.device.type == "cpu" else v


def _load(node: torch.fx.Node, env: Dict[torch.fx.Node, Any],
          uploads: Optional[Dict[torch.fx.Node, LazyTensor]] = None) -> Tuple[Any, Any]:
    def get(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return uploads[a] if uploads and a in uploads else env[a]
        if isinstance(a, torch.device) and a.type == "meta":
            return _DEVICE
        return a

    return (torch.fx.node.map_aggregate(node.args, get),
            torch.fx.node.map_aggregate(node.kwargs, get))


def _is_cpu(device: Any) -> bool:
    return device == "cpu" or isinstance(device, torch.device) and device.type == "cpu"


def _run(node: torch.fx.Node, env: Dict[torch.fx.Node, Any],
         uploads: Optional[Dict[torch.fx.Node, LazyTensor]] = None, cpu_alone: bool = False) -> Any:
    args, kwargs = _load(node, env, uploads)
    if node.target is operator.getitem:
        return args[0][args[1]]
    if node.target is torch.ops.higher_order.with_effects:
        # AOTAutograd's ordering of ops with side effects (an assert): the token, then the op.
        token, op, *rest = args
        return (token, op(*rest, **kwargs))
    device = kwargs.get("device")
    if node.target is aten._to_copy.default and (device == _DEVICE or cpu_alone and _is_cpu(device)):
        # A device value that met traced ones on the meta device, or an uploaded CPU value:
        # on the device already. In a graph of CPU tensors alone, the CPU is the device.
        kwargs = {k: v for k, v in kwargs.items() if k != "device"}
    return node.target(*args, **kwargs)


def _interpret(graph: CompiledGraph, env: Dict[torch.fx.Node, Any],
               uploads: Dict[torch.fx.Node, LazyTensor]) -> Dict[torch.fx.Node, Any]:
    """Records the graph's device part on the lazy device (the CPU part is in ``env`` already);
    the CPU values it reads are uploaded, into ``uploads`` (a capture's arguments). Its indices
    are not checked (`_check.unchecked`)."""
    env = dict(env)
    try:
        with _check.unchecked():
            for node in graph.gm.graph.nodes:
                if node.op != "call_function" or node in env or node in graph.host_writes:
                    continue
                for inp in node.all_input_nodes:
                    v = env[inp]
                    if inp not in uploads and isinstance(v, torch.Tensor) and not isinstance(v, LazyTensor):
                        uploads[inp] = LazyTensor(to_engine(v))
                # Each op at the user's line its node came from (the profile's graph view, a
                # fallback's finding), not at the backend's loop.
                _native.pin_location(graph.stacks.get(node))
                env[node] = _run(node, env, uploads, graph.cpu_alone)
    finally:
        _native.pin_location(None)
    return env
