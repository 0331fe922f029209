"""torch.compile, seen by the profiler, with any backend (inductor, aot_eager, a custom one).

Everything comes from torch's own instrumentation: its structured compile trace (the records
tlparse reads: each compile's start and call stack, its metrics and phases, graph breaks with
Dynamo's reasons, the guards that failed) through a handler on the ``torch.__trace`` logger, and
Dynamo's call of the backend, wrapped so each captured graph is described and each of its runs
timed. Installed while a profile records (``XLAPROF_PROFILE``, ``xp.profile()``,
``%%xla_profile``); nothing here changes what torch compiles or runs.

A guard names what it checked as the compiled function sees it (``L['x']``, ``s.scale``); the
line behind it is found in the caller's source: for an attribute, where the caller's code sets
it; for a tensor passed in, where the caller made the variable it passed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import linecache
import logging
import os
import re
import sys
import time
import weakref
from typing import Any, Dict, List, Optional, Tuple

from . import _native

Frame = Tuple[str, int, str]

_installed = False
_TORCH_DIR: Optional[str] = None
# Per compile id (`0/1`): when it started, the user's call stack, the graphs it captured.
_compiles: Dict[str, Dict[str, Any]] = {}
# The last guard failures Dynamo reported (for a compile refused at the recompile limit, whose
# metrics do not repeat them).
_last_reasons: List[str] = []
# Graph breaks reported, by (compile, line): Dynamo reports a break once per attempt.
_breaks_seen: set = set()
# The compiled function of each frame (`0` of `0/1`): a compile refused at the recompile limit
# does not name it again.
_frame_functions: Dict[str, Frame] = {}
_frame_callers: Dict[str, List[Frame]] = {}
# Runs of captured graphs since the last step, not counting the optimizer's own (`_timed`).
_runs = [0]
_OPTIM = os.sep + os.path.join("torch", "optim") + os.sep


def install() -> None:
    """Starts watching torch.compile (once per process; torch must be importable), and starts
    counting steps afresh (a new profile's steps)."""
    global _installed
    _runs[0] = 0
    _optimizers.clear()
    if _installed:
        return
    _installed = True
    watch_runs()
    trace = logging.getLogger("torch.__trace")
    trace.addHandler(_Handler())
    trace.setLevel(logging.DEBUG)
    trace.propagate = False


_watching_runs = False


def watch_runs() -> None:
    """Times each run of every graph compiled from now on, and ends steps at optimizers' steps,
    before any profile records: a profile started once the program has compiled (a notebook's
    later cell, a benchmark's timed loop) then still has the runs and the steps. Called where
    torch's Dynamo is loaded anyway (`import xlaprof.torch`), and by `install`."""
    global _watching_runs, _TORCH_DIR
    if _watching_runs:
        return
    _watching_runs = True
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    _patch_backend_call()
    # Dynamo skips this package (`xlaprof.torch._compile.register`); it must trace the hook, which
    # adds nothing to a compiled step, instead of breaking the optimizer's graph at it.
    traced = getattr(torch._dynamo, "dont_skip_tracing", lambda f: f)
    register_optimizer_step_post_hook(traced(_optimizer_stepped))


def _optimizer_stepped(optimizer: Any, *_: Any) -> None:
    # A step of a torch.compile program ends at its optimizer's step, when compiled graphs ran
    # since the last one (an eager optimizer beside it, say a reference run, or a program on
    # the lazy device, which ends its steps with `xt.step()`, makes no steps here). Inside a
    # compiled optimizer step Dynamo traces this hook: it must add nothing to the graph, and
    # the step then ends where the optimizer's compiled graph has run (`_timed`).
    import torch

    if torch.compiler.is_compiling() or not _runs[0]:
        return
    if _ends_step(weakref.ref(optimizer)):
        _runs[0] = 0
        _native.mark_step()


# The optimizers of the training loop, in the order of their first steps: a loop that steps
# several each iteration (a GAN's discriminator and generator) ends its step at the last one's.
_optimizers: List[Any] = []


def _ends_step(optimizer: Any) -> bool:
    """Whether this optimizer's step, after graphs of the model ran, ends the step (an
    optimizer not known apart from the others ends one)."""
    if optimizer is None:
        return True
    # An optimizer since dropped (a notebook's cell run again makes a new one) is no longer the
    # loop's.
    _optimizers[:] = [o for o in _optimizers if not isinstance(o, weakref.ref) or o() is not None]
    if optimizer not in _optimizers:
        _optimizers.append(optimizer)
        # A second optimizer in the first iteration: the first one's step, which ended a step
        # when it looked like the only one, ended this iteration's already.
        return len(_optimizers) == 1
    return optimizer == _optimizers[-1]  # else not the iteration's last optimizer


class _Handler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        try:
            _on_record(metadata, getattr(record, "payload", None))
        except Exception:  # the profiler never breaks the user's compile
            if os.environ.get("XLAPROF_DEBUG"):
                raise


def _in_torch(path: str) -> bool:
    return bool(_TORCH_DIR) and os.path.abspath(path).startswith(_TORCH_DIR)


def _compile_id(metadata: Dict[str, Any]) -> Optional[str]:
    if "frame_id" not in metadata:
        return None
    return f"{metadata['frame_id']}/{metadata.get('frame_compile_id', 0)}"


def _on_record(metadata: Dict[str, Any], payload: Any) -> None:
    if "dynamo_start" in metadata:
        cid = _compile_id(metadata)
        # Compile ids start again after `torch._dynamo.reset()`: an id whose compile ended is
        # a new compile (a restart within one compile keeps its entry).
        if cid is not None and (cid not in _compiles or _compiles[cid].get("done")):
            _patch_backend_call()
            _breaks_seen.difference_update({k for k in _breaks_seen if k[0] == cid})
            # Dynamo compiles as the call starts: the frames below this handler are the
            # program's, the caller's among them (Dynamo's own record of the stack can stop at
            # the compiled function).
            user = _python_stack()
            _compiles[cid] = {"start": time.perf_counter(), "stack": user, "caller": user, "graphs": []}
    elif "artifact" in metadata:
        name = metadata["artifact"].get("name")
        if name == "dynamo_graph_break_reason" and isinstance(payload, str):
            _on_graph_break(_compile_id(metadata) or "?", payload)
        elif name == "recompile_reasons" and payload:
            reasons = json.loads(payload) if isinstance(payload, str) and payload.lstrip().startswith("[") else [payload]
            _last_reasons[:] = [str(r) for r in reasons]
    elif "compilation_metrics" in metadata:
        _on_compiled(metadata["compilation_metrics"], backward=False)
    elif "bwd_compilation_metrics" in metadata:
        _on_compiled(metadata["bwd_compilation_metrics"], backward=True)


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LOGGING = os.path.dirname(os.path.abspath(logging.__file__)) + os.sep


def _python_stack() -> List[Frame]:
    """The running program's frames outside torch, this package and `logging`, innermost first."""
    frames = []
    f = sys._getframe(1)
    while f is not None:
        path = f.f_code.co_filename
        if not (_in_torch(path) or path.startswith(_HERE) or path.startswith(_LOGGING)):
            frames.append((path, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return frames


_FILE_LINE = re.compile(r'^\s*File "(.*)", line (\d+)(?:, in (.*))?$')


def _traceback_frames(text: str) -> List[Frame]:
    """The frames of a Python traceback's text, innermost first."""
    frames = []
    for line in text.splitlines():
        m = _FILE_LINE.match(line)
        if m:
            frames.append((m.group(1), int(m.group(2)), m.group(3) or ""))
    frames.reverse()
    return frames


def _on_graph_break(cid: str, text: str) -> None:
    # The user's traceback, then Dynamo's own: only the first is the program's.
    user_part = text.split("User code traceback:", 1)[-1].split("Traceback (most recent call last)", 1)[0]
    all_frames = _traceback_frames(user_part)
    frames = [f for f in all_frames if not _in_torch(f[0]) or "/optim/" in f[0] or "/nn/" in f[0]]
    lines = [l.strip() for l in text.splitlines()]
    kind = next((l for i, l in enumerate(lines) if i > 0 and lines[i - 1] == "" and l and not l.startswith("Graph Break")), "")
    explanation = next((l[len("Explanation:"):].strip() for l in lines if l.startswith("Explanation:")), "")
    hint = next((l[len("Hint:"):].strip() for l in lines if l.startswith("Hint:")), None)
    # PyTorch breaks its own graphs on purpose (the optimizer's step, around `no_grad`): not the
    # program's to fix.
    if all_frames and _in_torch(all_frames[0][0]) and "torch._dynamo.graph_break()" in kind:
        return
    # ... and compiles some of its own functions apart (an optimizer's `step`, in a frame of its
    # own): Dynamo says they are skipped "intentionally".
    if "intentionally" in explanation and (_TORCH_DIR or "?") in explanation:
        return
    if not frames:
        return
    key = (cid, frames[0][:2])
    if key in _breaks_seen:
        return
    _breaks_seen.add(key)
    reason = f"{kind}: {explanation}" if kind and explanation else (kind or explanation or "Dynamo could not trace it")
    if hint:
        reason += f"\nHint: {hint}"
    _native.graph_break(cid, reason, frames)


def _phases(m: Dict[str, Any], total: float) -> List[Tuple[str, float]]:
    """Where a compile's time went: Dynamo's tracing, AOTAutograd, the backend's own compile."""
    seconds = lambda key: (m.get(key) or 0) / 1e6  # noqa: E731
    backend = m.get("backend_compile_time_s") or 0.0
    aot = min(seconds("aot_autograd_cumulative_compile_time_us"), backend)
    inductor = min(seconds("inductor_cumulative_compile_time_us"), aot or backend)
    phases = [("Dynamo", max(total - backend, 0.0))]
    if aot:
        phases.append(("AOTAutograd", max(aot - inductor, 0.0)))
    phases.append(("backend", max(backend - (aot - inductor if aot else 0.0), 0.0)))
    return phases


def _function_of(m: Dict[str, Any], graphs: List[Dict[str, Any]]) -> Frame:
    """The compiled function: its code, or, for torch's own wrapper of a module's forward, the
    user's function its graph was traced from."""
    path, line, name = m.get("co_filename") or "?", int(m.get("co_firstlineno") or 0), m.get("co_name") or "?"
    if not _in_torch(path):
        return (path, line, name)
    for g in graphs:
        if g.get("function"):
            return g["function"]
    return (path, line, name)


def _on_compiled(m: Dict[str, Any], backward: bool) -> None:
    cid = str(m.get("compile_id") or "?")
    info = _compiles.get(cid, {"start": time.perf_counter(), "caller": [], "graphs": []})
    if backward:
        total = (m.get("inductor_compile_time_s") or m.get("entire_frame_compile_time_s") or 0.0)
        total = total or (m.get("backward_cumulative_compile_time_us") or 0) / 1e6
        function = info.get("function") or ("?", 0, "?")
        _native.function_compiled(f"{cid} backward", function, info["caller"], total, [("backend", total)], [])
        return
    total = m.get("entire_frame_compile_time_s")
    if total is None:
        total = time.perf_counter() - info["start"]
    frame = cid.split("/")[0]
    function = _function_of(m, info["graphs"])
    if function[0] == "?" and frame in _frame_functions:
        function = _frame_functions[frame]
    # A frame's first compile names it (ids start again after `torch._dynamo.reset()`).
    if cid.endswith("/0") or frame not in _frame_functions:
        _frame_functions[frame] = function
    info["function"] = function
    info["done"] = True
    # The stack may end in the compiled function itself: its caller is the frame outside it.
    code = (m.get("co_filename"), m.get("co_name"))
    info["caller"] = [f for f in info.get("stack", []) if (f[0], f[2]) != code] or (
        [] if cid.endswith("/0") else _frame_callers.get(frame, [])
    )
    _frame_callers[frame] = info["caller"]
    _compiles[cid] = info
    failure = m.get("fail_reason")
    if failure and "recompile limit" in failure:
        failure = "recompile limit: " + failure.splitlines()[0]
    elif failure:
        failure = None  # another failure: Dynamo says so itself, and the function runs as before
    reason_text = m.get("recompile_reason") or (_last_reasons[0] if failure and _last_reasons else None)
    reason, reason_stack = (None, None)
    # A function Dynamo resumes in after a graph break recompiles when the function before it
    # did, for the same cause: that recompile is the break's cost, not a cause of its own.
    resumed = str(m.get("co_name") or "").startswith("torch_dynamo_resume_in_")
    if reason_text and not resumed and (failure or not cid.endswith("/0")):
        reason, reason_stack = _guard(reason_text, function, info["caller"])
    _native.function_compiled(
        cid,
        function,
        info["caller"],
        float(total),
        _phases(m, float(total)),
        [g["hash"] for g in info["graphs"]],
        reason,
        reason_stack,
        failure,
    )


# ---- the graphs Dynamo gives its backend ----

_DTYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "s64",
    "int32": "s32", "int16": "s16", "int8": "s8", "uint8": "u8", "bool": "pred",
    "complex64": "c64", "complex128": "c128",
}


def _patch_backend_call() -> None:
    from torch._dynamo.output_graph import OutputGraph

    if getattr(OutputGraph.call_user_compiler, "_xlaprof", False):
        return
    original = OutputGraph.call_user_compiler

    @functools.wraps(original)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        compiled = original(self, gm, example_inputs)
        try:
            import torch

            cid = str(torch._guards.CompileContext.current_compile_id())
            graph = _describe(gm, cid)
        except Exception:
            if os.environ.get("XLAPROF_DEBUG"):
                raise
            return compiled
        _compiles.setdefault(cid, {"start": time.perf_counter(), "caller": [], "graphs": []})["graphs"].append(graph)
        return _timed(compiled, graph["hash"], _compiles_optimizer(self))

    call_user_compiler._xlaprof = True  # type: ignore[attr-defined]
    OutputGraph.call_user_compiler = call_user_compiler


def _compiles_optimizer(output_graph: Any) -> bool:
    """Whether Dynamo compiled an optimizer's step (`torch.compile(opt.step)` compiles torch's
    wrapper of every optimizer's step, in torch/optim)."""
    fields = getattr(output_graph, "co_fields", None) or {}
    return _OPTIM in os.path.abspath(str(fields.get("co_filename") or ""))


def _optimizer_of(args: Tuple[Any, ...]) -> Any:
    """Which optimizer a compiled optimizer step's graph steps, as far as its inputs tell: the
    shape and dtype of its first tensor, a parameter (the same whether the graph that runs is
    the first step's, which makes the state, or a later one's; the tensors themselves are not
    the same objects from call to call)."""
    import torch

    flat = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    first = next((a for a in flat if isinstance(a, torch.Tensor)), None)
    return None if first is None else ("compiled", tuple(first.shape), first.dtype)


def _timed(compiled: Any, graph: int, optimizer: bool = False) -> Any:
    """The compiled graph, each run timed and reported. A run of an optimizer's graph ends the
    step when the model's graphs ran since the last one: where torch compiles the optimizer's
    step whole, its step hooks are traced into the graph and never run."""
    now, report, runs, mark = time.perf_counter, _native.captured_run, _runs, _native.mark_step

    def run(*args: Any, **kwargs: Any) -> Any:
        start = now()
        try:
            return compiled(*args, **kwargs)
        finally:
            report(graph, now() - start)
            if not optimizer:
                runs[0] += 1
            elif runs[0] and _ends_step(_optimizer_of(args)):
                runs[0] = 0
                mark()

    # What Dynamo reads off a compiled function (its calling convention) stays readable.
    try:
        run.__dict__.update(getattr(compiled, "__dict__", {}))
    except Exception:
        pass
    for attr in ("_boxed_call",):
        if hasattr(compiled, attr):
            setattr(run, attr, getattr(compiled, attr))
    return run


def _value_type(value: Any) -> Tuple[str, List[int]]:
    import torch

    if isinstance(value, torch.Tensor):
        # A dynamic dimension (a SymInt) is -1.
        dims = [d if type(d) is int else -1 for d in value.shape]
        return _DTYPES.get(str(value.dtype).replace("torch.", ""), str(value.dtype).replace("torch.", "")), dims
    if isinstance(value, (tuple, list)) and value:
        return _value_type(value[0])
    return ("scalar", [])


def _describe(gm: Any, cid: str) -> Dict[str, Any]:
    """A captured graph, told to the profiler: its nodes with their ops, types and lines."""
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    index = {n: i for i, n in enumerate(nodes)}
    inputs = sum(1 for n in nodes if n.op == "placeholder")
    described = []
    function: Optional[Frame] = None
    for n in nodes:
        if n.op == "placeholder":
            op = "input"
        elif n.op == "call_function":
            op = getattr(n.target, "__name__", str(n.target))
        elif n.op == "get_attr":
            op = "constant"
        else:
            op = str(n.target)
        dtype, dims = _value_type(n.meta.get("example_value", n.meta.get("val")))
        stack = _traceback_frames(n.meta.get("stack_trace") or "")
        user = [f for f in stack if not _in_torch(f[0])]
        if user and function is None:
            function = user[-1]
        described.append((op, [index[a] for a in n.all_input_nodes if a in index], dtype, dims, stack))
    digest = hashlib.blake2b(repr((cid, [d[:4] for d in described])).encode(), digest_size=8).digest()
    graph = int.from_bytes(digest, "little")
    _native.captured_graph(graph, described, inputs)
    return {"hash": graph, "function": function}


# ---- the line behind a failed guard ----

_TENSOR_GUARD = re.compile(r"tensor '([^']+)' (\w+) mismatch")


def _clean_guard(text: str) -> str:
    """`0/1: s.scale == 1.0  # y = ... # file.py:12 in forward` -> `s.scale == 1.0`."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"^\d+/\d+: ", "", first)
    return first.partition("  # ")[0].strip()


def _guard(text: str, function: Frame, caller: List[Frame]) -> Tuple[str, Optional[List[Frame]]]:
    guard = _clean_guard(text)
    try:
        return guard, _guard_line(guard, function, caller)
    except Exception:  # source that cannot be read or parsed: the guard alone is still told
        if os.environ.get("XLAPROF_DEBUG"):
            raise
        return guard, None


def _guard_line(guard: str, function: Frame, caller: List[Frame]) -> Optional[List[Frame]]:
    m = _TENSOR_GUARD.search(guard)
    if m:
        line = _tensor_made_at(m.group(1), m.group(2), function, caller)
    elif "param_groups" in guard:
        line = _scheduler_step_at(function, caller)
    else:
        line = _attribute_set_at(guard, caller)
    return [line] if line else None


def _scheduler_step_at(function: Frame, caller: List[Frame]) -> Optional[Frame]:
    """An optimizer's hyperparameters (`param_groups[0]['lr']`) change at a scheduler's step:
    the caller's `sched.step()` (in the caller's scope, or the compiled function around it)."""
    for path, line, fn in caller:
        tree = _tree(path)
        if tree is None:
            continue
        for node in ast.walk(_enclosing(tree, line)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "step"
                and "sched" in ast.unparse(node.func.value).lower()
            ):
                return (path, node.lineno, fn)
    return None


def _source_name(source: str) -> Tuple[Optional[str], List[str]]:
    """`L['self'].scale` or `s.scale` -> ('self' or 's', ['scale']); `G['lr']` -> ('lr', [])."""
    source = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", source)
    source = re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", source)
    parts = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", source.split("[")[0])
    if not parts:
        return None, []
    return parts[0], parts[1:]


def _tree(path: str) -> Optional[ast.AST]:
    try:
        return ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None


def _enclosing(tree: ast.AST, line: int) -> ast.AST:
    """The innermost function around `line` (the module when none)."""
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno) and node.lineno >= getattr(best, "lineno", 0):
                best = node
    return best


def _attribute_set_at(guard: str, caller: List[Frame]) -> Optional[Frame]:
    """Where the caller's code sets what a guard checked: `x.attr = ...`, `model.train()` /
    `model.eval()` for `training`, or a global's assignment."""
    expr = re.split(r"\s*(?:==|!=|\bis\b|<=|>=|<|>)\s*", guard)[0]
    expr = re.sub(r"^___\w+\((.*?)[,)].*$", r"\1", expr)
    root, attrs = _source_name(expr)
    source = _caller_source(caller)
    if root is None or source is None:
        return None
    path, at_line, fn, tree = source
    hits: List[int] = []
    for node in ast.walk(_enclosing(tree, at_line)):
        if attrs:
            if any(isinstance(t, ast.Attribute) and t.attr == attrs[-1] for t in _targets(node)):
                hits.append(node.lineno)
            if attrs[-1] == "training" and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("train", "eval"):
                hits.append(node.lineno)
        elif any(isinstance(t, ast.Name) and t.id == root for t in _targets(node)):
            hits.append(node.lineno)
    if not hits:
        return None
    # The setting nearest before the call (the loop's own), else the first one.
    before = [h for h in hits if h <= at_line]
    line = max(before) if before else min(hits)
    return (path, line, fn)


def _tensor_made_at(name: str, what: str, function: Frame, caller: List[Frame]) -> Optional[Frame]:
    """Where the caller made the tensor it passed as parameter `name` of the compiled function:
    the last assignment of the variable it passed (for `requires_grad`, the last line that set
    it), or the call itself when it passed an expression."""
    root, _ = _source_name(name)
    source = _caller_source(caller)
    if root is None or source is None:
        return None
    path, at_line, fn, tree = source
    params = _parameters(function)
    # The call on that line that calls the compiled function: by its name where it has it
    # (`f(x)`), else the innermost call that takes as many arguments (`model(x)` inside
    # `loss_fn(model(x), y)`), never torch's or NumPy's own (`torch.randn(n)` inside `f(...)`).
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (n.args or n.keywords)
        and n.lineno <= at_line <= (n.end_lineno or n.lineno)
        and not ast.unparse(n.func).startswith(("torch.", "np.", "numpy."))
    ]
    name = function[2].rsplit(".", 1)[-1]
    named = [n for n in calls if getattr(n.func, "id", getattr(n.func, "attr", None)) == name]
    fitting = [n for n in calls if len(n.args) + len(n.keywords) in (len(params), len(params) - 1)]
    calls = named or fitting or calls
    if not calls:
        return (path, at_line, fn)
    call = min(calls, key=lambda n: ((n.end_lineno or n.lineno) - n.lineno, (n.end_col_offset or 0) - n.col_offset))
    # A module's `forward(self, x)` is called as `model(x)`.
    if params and len(call.args) + len(call.keywords) < len(params):
        params = params[1:]
    argument: Optional[ast.AST] = next((kw.value for kw in call.keywords if kw.arg == root), None)
    if argument is None and root in params and params.index(root) < len(call.args):
        argument = call.args[params.index(root)]
    if argument is None and len(call.args) == 1:
        argument = call.args[0]
    if not isinstance(argument, ast.Name):
        return (path, at_line, fn)
    scope = _enclosing(tree, at_line)
    variable = argument.id
    if what == "requires_grad":
        # `x.requires_grad_(True)` or `x.requires_grad = True`
        made = [
            n.lineno
            for n in ast.walk(scope)
            if getattr(n, "lineno", at_line + 1) <= at_line
            and (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "requires_grad_"
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id == variable
                or isinstance(n, ast.Assign)
                and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name) and t.value.id == variable
                    for t in n.targets
                )
            )
        ]
        if made:
            return (path, max(made), fn)
    made = [
        n.lineno
        for n in ast.walk(scope)
        if getattr(n, "lineno", at_line + 1) <= at_line
        and any(isinstance(t, ast.Name) and t.id == variable for t in _assigned(n))
    ]
    return (path, max(made), fn) if made else (path, at_line, fn)


def _caller_source(caller: List[Frame]) -> Optional[Tuple[str, int, str, ast.AST]]:
    """The innermost user frame of `caller`, with its file's syntax tree."""
    if not caller:
        return None
    path, line, fn = caller[0]
    tree = _tree(path)
    return None if tree is None else (path, line, fn, tree)


def _targets(node: ast.AST) -> List[ast.AST]:
    """What an assignment (or a `for`) assigns to; nothing for another node."""
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
        return [node.target]
    return []


def _assigned(node: ast.AST) -> List[ast.AST]:
    """Every name an assignment binds, tuple targets unpacked."""
    return [n for t in _targets(node) for n in ast.walk(t)]


def _parameters(function: Frame) -> List[str]:
    """The compiled function's parameter names, read from its source."""
    path, line, name = function
    tree = _tree(path)
    if tree is None:
        return []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A decorated function's code starts at its first decorator.
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first <= line <= (node.end_lineno or node.lineno) and node.name == name.rsplit(".", 1)[-1]:
                return [a.arg for a in node.args.args]
    return []
