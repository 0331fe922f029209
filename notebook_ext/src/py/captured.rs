//! What torch.compile did, told to the profiler by the Python package's watcher
//! (`xlaprof/_torch_compile.py`): the graphs Dynamo captured, each compile with its phases and
//! the guard that caused it, graph breaks, and each run of a compiled graph. Locations come as
//! stacks of `(path, line, function)`, innermost first.

use std::sync::Arc;

use pyo3::prelude::*;
use xlaprof_core::events::{self, CapturedGraph, CapturedNode, FunctionCompile};
use xlaprof_core::location::SourceLocation;

use super::functions::nanoseconds;
use super::location;

type Frame = (String, u32, String);

fn at(py: Python<'_>, stack: &[Frame]) -> Option<SourceLocation> {
    location::from_stack(py, stack).map(SourceLocation::External)
}

/// The program's line in `stack`; where it has none (all of it torch's, say), its innermost
/// frame as given: never this extension's own Rust source.
fn at_or_innermost(py: Python<'_>, stack: &[Frame]) -> SourceLocation {
    at(py, stack).unwrap_or_else(|| SourceLocation::External(location::as_given(py, stack.first())))
}

/// A graph Dynamo captured: `nodes` in order, inputs first, each `(op, operands, dtype, dims,
/// stack)`.
#[pyfunction]
pub(crate) fn captured_graph(
    py: Python<'_>,
    hash: u64,
    nodes: Vec<(String, Vec<u32>, String, Vec<i64>, Vec<Frame>)>,
    inputs: usize,
) {
    if !events::enabled() {
        return;
    }
    let nodes = nodes
        .into_iter()
        .map(|(op, operands, dtype, dims, stack)| CapturedNode {
            op: op.into(),
            operands,
            dtype: dtype.into(),
            dims,
            location: at_or_innermost(py, &stack),
        })
        .collect();
    events::captured_graph(hash, CapturedGraph { nodes, inputs });
}

/// One compile of a function, ending now.
#[pyfunction]
#[pyo3(signature = (id, function, caller, seconds, phases, graphs, reason=None, reason_stack=None, failure=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn function_compiled(
    py: Python<'_>,
    id: &str,
    function: Frame,
    caller: Vec<Frame>,
    seconds: f64,
    phases: Vec<(String, f64)>,
    graphs: Vec<u64>,
    reason: Option<String>,
    reason_stack: Option<Vec<Frame>>,
    failure: Option<String>,
) {
    if !events::enabled() {
        return;
    }
    let function = at_or_innermost(py, std::slice::from_ref(&function));
    events::function_compiled(FunctionCompile {
        id: id.into(),
        function,
        caller: at(py, &caller),
        duration_ns: nanoseconds(seconds),
        phases: phases.into_iter().map(|(n, s)| (Arc::from(n), nanoseconds(s))).collect(),
        graphs,
        reason: reason.map(Arc::from),
        reason_location: reason_stack.and_then(|s| at(py, &s)),
        failure: failure.map(Arc::from),
    });
}

/// A graph break in compile `compile`, at the innermost user frame of `stack`.
#[pyfunction]
pub(crate) fn graph_break(py: Python<'_>, compile: &str, reason: &str, stack: Vec<Frame>) {
    if !events::enabled() {
        return;
    }
    events::graph_break(compile, reason, at_or_innermost(py, &stack));
}

/// A run of captured graph `hash` that took `seconds`, ending now.
#[pyfunction]
pub(crate) fn captured_run(hash: u64, seconds: f64) {
    events::captured_run(hash, nanoseconds(seconds));
}

/// Ends a training step without a sync (a torch.compile program's optimizer step), at the
/// caller's line. Does not start the engine.
#[pyfunction]
pub(crate) fn mark_step(py: Python<'_>) {
    // Called from inside the optimizer: the step is the user's line that called it.
    let location = location::current_with_caller(py)
        .map(|l| l.caller.clone().unwrap_or(l))
        .map(SourceLocation::External);
    xlaprof_core::mark_step(location.unwrap_or_else(SourceLocation::caller));
}
