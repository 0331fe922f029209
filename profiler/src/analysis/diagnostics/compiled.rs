//! Programs compiled by torch.compile (any backend): graph breaks, recompiles caused by failed
//! guards, and functions given up on at the recompile limit. Each is named at the user's line
//! torch reports (the break, or the line behind the failed guard), with what it cost.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{diff_graphs, plural, times, Diagnostic, GraphChange, Instance, Kind};
use crate::profile::{FunctionCompile, Profile};
use crate::util::format_ns;

/// Every torch.compile finding of a profile.
pub(super) fn findings(p: &Profile) -> Vec<Diagnostic> {
    let mut all = graph_breaks(p);
    all.extend(guard_failures(p));
    all.extend(recompile_limits(p));
    all
}

/// For each captured graph compiled again for the same function, the graph of the compile
/// before it and what changed: `(graph, previous, changes)`.
pub fn captured_recompiles(p: &Profile) -> Vec<(u64, u64, Vec<GraphChange>)> {
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut out = Vec::new();
    for c in &p.function_compiles {
        let Some(&graph) = c.graphs.first() else { continue };
        if let Some(previous) = last.insert(c.frame(), graph) {
            if let (Some(a), Some(b)) = (p.graphs.get(&previous), p.graphs.get(&graph)) {
                if previous != graph {
                    out.push((graph, previous, diff_graphs(p, a, b)));
                }
            }
        }
    }
    out
}

/// `forward` (the compiled function's name) and its line, as findings name it.
fn function_name(p: &Profile, c: &FunctionCompile) -> String {
    match p.locations.get(c.function as usize) {
        Some(l) => {
            let name = l.function.rsplit('.').next().unwrap_or(&l.function);
            format!("`{}` ({}:{})", crate::record::clip(name), crate::record::clip(&l.file), l.line)
        }
        None => "a compiled function".to_string(),
    }
}

/// Dynamo's reason, its first line (the kind of break and what it says), and its first hint.
fn reason_and_hint(reason: &str) -> (&str, Option<&str>) {
    match reason.split_once("\nHint: ") {
        Some((reason, hint)) => (reason.trim(), Some(hint.lines().next().unwrap_or(hint).trim())),
        None => (reason.trim(), None),
    }
}

fn graph_break_advice(reason: &str, hint: Option<&str>) -> String {
    let has = |words: &[&str]| words.iter().any(|w| reason.contains(w));
    if has(&["`print`", "logging", "logger"]) {
        "print or log after the compiled call returns (return the value), or let Dynamo move the call out of the graph: add it to `torch._dynamo.config.reorderable_logging_functions`".into()
    } else if has(&[".item()", "Tensor.item", "tolist", "scalar output"]) {
        "keep the value on the device (`torch.where`, tensor arithmetic) and read it after the compiled call, or let Dynamo capture it: `torch._dynamo.config.capture_scalar_outputs = True`".into()
    } else if has(&["Data-dependent", "data-dependent", "data dependent", "generic_jump"]) {
        "branch on the device instead of in Python: `torch.where(cond, a, b)` for values, `torch.cond(pred, true_fn, false_fn, operands)` for code".into()
    } else if has(&["skip", "not supported", "unsupported", "Unsupported"]) {
        "keep the call out of the compiled function, or make it an op Dynamo can keep in the graph (`torch.library.custom_op`)".into()
    } else {
        match hint {
            Some(h) => format!("Dynamo's hint: {h}"),
            None => "move the code Dynamo cannot trace out of the compiled function".into(),
        }
    }
}

/// Graph breaks, one finding per line and reason. A break costs the compiles of the functions
/// Dynamo resumes in after it, and the uncompiled time between the graph before the break and
/// the graph after it, at every call.
fn graph_breaks(p: &Profile) -> Vec<Diagnostic> {
    // One line, one finding: a line can break twice (a `.item()` inside a `print`).
    let mut sites: BTreeMap<u32, Vec<&crate::profile::GraphBreak>> = BTreeMap::new();
    for b in &p.graph_breaks {
        sites.entry(b.location).or_default().push(b);
    }
    let frame_of: HashMap<u64, &str> = p
        .function_compiles
        .iter()
        .flat_map(|c| c.graphs.iter().map(move |&h| (h, c.frame())))
        .collect();
    let at = |id: u32| p.locations.get(id as usize).map(|l| (l.file.as_str(), l.line));
    // Compile time between two moments, from compiles sorted by start and their running sums.
    let mut starts: Vec<(u64, u64)> =
        p.function_compiles.iter().map(|c| (c.start_ns, c.duration_ns)).collect();
    starts.sort_unstable();
    let sums: Vec<u64> = std::iter::once(0)
        .chain(starts.iter().scan(0u64, |total, &(_, ns)| {
            *total = total.saturating_add(ns);
            Some(*total)
        }))
        .collect();
    let compiling_between = |from: u64, to: u64| {
        let lo = starts.partition_point(|&(s, _)| s < from);
        let hi = starts.partition_point(|&(s, _)| s < to).max(lo);
        sums[hi].saturating_sub(sums[lo])
    };
    sites
        .into_iter()
        .map(|(location, breaks)| {
            let mut reasons: Vec<&str> = breaks.iter().map(|b| b.reason.as_str()).collect();
            reasons.sort_unstable();
            reasons.dedup();
            let broken: HashSet<&str> =
                breaks.iter().map(|b| b.compile.split('/').next().unwrap_or("")).collect();
            // Dynamo resumes in a function of its own that starts at the break's line.
            let resumed: Vec<&FunctionCompile> = p
                .function_compiles
                .iter()
                .filter(|c| at(c.function) == at(location) && !broken.contains(c.frame()))
                .collect();
            let resumed_frames: HashSet<&str> = resumed.iter().map(|c| c.frame()).collect();
            let mut eager_ns = 0u64;
            let mut calls = 0usize;
            for pair in p.captured_runs.windows(2) {
                let (before, after) = (&pair[0], &pair[1]);
                let (Some(fb), Some(fa)) = (frame_of.get(&before.hash), frame_of.get(&after.hash))
                else {
                    continue;
                };
                if broken.contains(fb) && resumed_frames.contains(fa) {
                    let end = before.start_ns.saturating_add(before.duration_ns);
                    // A call that compiled what follows the break waited for that compile: it
                    // is counted as the compile's, not as uncompiled time.
                    let compiling = compiling_between(end, after.start_ns);
                    let gap = after.start_ns.saturating_sub(end).saturating_sub(compiling);
                    eager_ns = eager_ns.saturating_add(gap);
                    calls += 1;
                }
            }
            let first_lines: Vec<&str> = reasons
                .iter()
                .map(|r| reason_and_hint(r).0)
                .map(|r| r.lines().next().unwrap_or(r))
                .collect();
            // Dynamo's work on the broken functions that captured nothing (a break in a call
            // it inlined leaves the caller with no graph: each frame down to the break is
            // traced, given up on, and compiled again on its own) is the break's too.
            let ids: HashSet<&str> = breaks.iter().map(|b| b.compile.as_str()).collect();
            let wasted = p
                .function_compiles
                .iter()
                .filter(|c| ids.contains(c.id.as_str()) && c.graphs.is_empty());
            let compile_ns = resumed
                .iter()
                .copied()
                .chain(wasted)
                .fold(0u64, |n, c| n.saturating_add(c.duration_ns));
            let mut instances: Vec<Instance> = breaks
                .iter()
                .map(|b| Instance {
                    message: format!("compile {}: the graph breaks at {}", b.compile, p.line(location)),
                    sync: None,
                    step: Some(b.step),
                    cost_ns: 0,
                })
                .collect();
            if let Some(first) = instances.first_mut() {
                first.cost_ns = eager_ns.saturating_add(compile_ns);
            }
            let function = breaks
                .first()
                .and_then(|b| p.function_compiles.iter().find(|c| c.id == b.compile))
                .map(|c| function_name(p, c))
                .unwrap_or_else(|| "a compiled function".into());
            // A break before any tensor work, whose function and resumed parts captured no
            // graph, splits nothing: a wrapper's bookkeeping (DDP's before each forward) runs
            // as Python around the model, whose own frame is compiled whole.
            let split = breaks
                .iter()
                .filter_map(|b| p.function_compiles.iter().find(|c| c.id == b.compile))
                .chain(resumed.iter().copied())
                .any(|c| !c.graphs.is_empty());
            if !split && calls == 0 {
                let message = format!(
                    "expected once: torch.compile could not trace {function} past {} ({}), but nothing there is tensor work: no graph is split, and the functions it calls are compiled on their own. A one-time cost: {} compiling around the break",
                    p.location(location),
                    first_lines.join("; then "),
                    format_ns(compile_ns as f64)
                );
                let advice = Some("nothing to fix: the break is in Python run around the model (a wrapper's bookkeeping, as DDP's before each forward), and the model's graph is whole".to_string());
                let d = Diagnostic::new(p, Kind::GraphBreak, location, message, advice, instances, Vec::new());
                return Diagnostic { once: true, ..d };
            }
            let message = format!(
                "torch.compile could not capture {function} whole: the graph breaks at {} ({}). The code after it runs uncompiled until Dynamo resumes, at every call{}",
                p.location(location),
                first_lines.join("; then "),
                if calls > 0 {
                    format!(
                        ": {} of uncompiled time between graphs in {}, and {} compiling around the break",
                        format_ns(eager_ns as f64),
                        plural(calls, "call"),
                        format_ns(compile_ns as f64)
                    )
                } else if compile_ns > 0 {
                    format!(": {} compiling around the break", format_ns(compile_ns as f64))
                } else {
                    String::new()
                }
            );
            let graphs = resumed.iter().flat_map(|c| c.graphs.iter().copied()).collect();
            let advice = Some(
                reasons
                    .iter()
                    .map(|r| reason_and_hint(r))
                    .map(|(r, h)| graph_break_advice(r, h))
                    .collect::<Vec<_>>()
                    .join("; "),
            );
            Diagnostic::new(p, Kind::GraphBreak, location, message, advice, instances, graphs)
        })
        .collect()
}

fn guard_advice(guard: &str) -> String {
    if guard.contains("param_groups") {
        "a scheduler changes the optimizer's learning rate, a Python number the compiled step reads: give the optimizer a tensor learning rate (`AdamW(params, lr=torch.tensor(1e-3))`), which the scheduler updates in place".into()
    } else if guard.contains("size mismatch") || guard.contains("stride mismatch") {
        "a tensor came with a new size: Dynamo compiles again, then treats the size as dynamic. Give every call one size (pad, or drop the smaller last batch: `drop_last=True`), or mark the dimension dynamic before the first call (`torch._dynamo.mark_dynamic(x, 0)`)".into()
    } else if guard.contains("dtype mismatch") {
        "give the input one dtype at every call (cast it where it is made)".into()
    } else if guard.contains("requires_grad mismatch") {
        "call the compiled function with inputs that require grad alike, or compile the inference path separately (under `torch.no_grad()`)".into()
    } else if guard.contains(".training") {
        "each switch between `train()` and `eval()` is a guard: compile once per mode (a compiled function for evaluation), or keep one mode inside the compiled loop".into()
    } else if guard.contains("==") || guard.contains("!=") {
        "a Python value read inside the compiled function is a constant of its graph: each new value compiles again. Keep it in a tensor (updated in place with `.fill_()` or `.copy_()`), or pass it as an argument".into()
    } else {
        "find what changes between calls at the line named and keep it constant, or pass it as a tensor".into()
    }
}

/// Recompiles caused by failed guards, one finding per function and guard, at the line behind
/// the guard where it is known (what set the value, or made the tensor).
fn guard_failures(p: &Profile) -> Vec<Diagnostic> {
    // A function that hit the recompile limit is one finding with the recompiles of its cause.
    let given_up: HashSet<(&str, String)> = p
        .function_compiles
        .iter()
        .filter(|c| gave_up(c))
        .map(|c| (c.frame(), guard_kind(c.reason.as_deref().unwrap_or(""))))
        .collect();
    let mut sites: BTreeMap<(u32, String), Vec<&FunctionCompile>> = BTreeMap::new();
    for c in &p.function_compiles {
        if let (Some(reason), None) = (&c.reason, &c.failure) {
            if given_up.contains(&(c.frame(), guard_kind(reason))) {
                continue;
            }
            // Keyed by the user's line: a call from the user's line and one from a library
            // it called into (a context manager's `__enter__`) are one cause.
            let at = site(c);
            let user = p.callers.get(&at).copied().unwrap_or(at);
            sites.entry((user, guard_kind(reason))).or_default().push(c);
        }
    }
    sites
        .into_values()
        .map(|compiles| {
            // Named at the user's own line where one of the calls was made there.
            let location = compiles
                .iter()
                .map(|c| site(c))
                .find(|at| !p.callers.contains_key(at))
                .unwrap_or(site(compiles[0]));
            let guard = compiles.last().and_then(|c| c.reason.as_deref()).unwrap_or("?");
            let instances: Vec<Instance> = compiles
                .iter()
                .map(|c| Instance {
                    message: format!(
                        "compile {} took {}: guard `{}` failed",
                        c.id,
                        format_ns(c.duration_ns as f64),
                        c.reason.as_deref().unwrap_or("?")
                    ),
                    sync: None,
                    step: Some(c.step),
                    cost_ns: c.duration_ns,
                })
                .collect();
            let function = function_name(p, compiles[0]);
            let cause = match (compiles[0].reason_location, compiles[0].caller) {
                (Some(at), Some(call)) if call != at => format!(
                    " at the call at {}, and what it checks comes from {}",
                    p.location(call),
                    p.location(at)
                ),
                (Some(at), _) => format!(", and what it checks comes from {}", p.location(at)),
                (None, Some(call)) => format!(", at the call at {}", p.location(call)),
                (None, None) => String::new(),
            };
            let graphs = compiles.iter().flat_map(|c| c.graphs.iter().copied()).collect();
            // A switch of mode compiled once is a graph for that mode, kept beside the first:
            // expected, paid once (an evaluation under `no_grad()`, a model in `eval()`). A call
            // whose graph breaks compiles each function on its way once for the mode (a DDP
            // wrapper, then the model it wraps).
            let frames: HashSet<&str> = compiles.iter().map(|c| c.frame()).collect();
            if let (Some(mode), true) = (mode_switch(guard), frames.len() == compiles.len()) {
                let more = match compiles.len() - 1 {
                    0 => String::new(),
                    n => format!(" and {} on its way", plural(n, "function")),
                };
                let each = if compiles.len() > 1 { " each" } else { "" };
                let message = format!(
                    "expected once: torch.compile compiled {function}{more} a second graph{each}, for {mode}: its guard `{guard}` failed{cause}. Both graphs are kept, and later calls reuse them"
                );
                let advice = Some(
                    "nothing to fix: one graph more, compiled once and reused, not one per step. If it matters, make that call once before timing, or compile that path apart (a function of its own)".to_string(),
                );
                let d = Diagnostic::new(p, Kind::Recompile, location, message, advice, instances, graphs);
                return Diagnostic { once: true, ..d };
            }
            // `self.config.problem_type is None` failed once: the first call set what was None
            // (transformers sets its config's `problem_type` so), and every later call passes.
            if let (Some(attribute), [_]) = (guard.strip_suffix(" is None"), &compiles[..]) {
                let message = format!(
                    "once: torch.compile compiled {function} again after its first call set `{attribute}`, which was None when it was compiled: its guard `{guard}` failed{cause}. Later calls pass it"
                );
                let advice = Some(format!(
                    "a one-time cost: set `{attribute}` before the first call (for transformers' models, `problem_type` in the config) to save this compile"
                ));
                let d = Diagnostic::new(p, Kind::Recompile, location, message, advice, instances, graphs);
                return Diagnostic { once: true, ..d };
            }
            let varied = compiles.iter().any(|c| c.reason.as_deref() != Some(guard));
            let guard_text = match varied {
                true => format!("`{}` failed, for a new value each time", guard_kind(guard)),
                false => format!("`{guard}` failed"),
            };
            // Compiles that stopped, the function's graphs then run without another: each
            // was one more graph kept and reused (a first epoch's variants), paid once.
            let settled = settled(p, compiles[0].frame());
            let message = format!(
                "torch.compile compiled {function} again {}: its guard {guard_text}{cause}{}",
                times(compiles.len()),
                if settled { ". Later steps reuse its graphs without compiling again: a one-time cost" } else { "" },
            );
            let advice = Some(guard_advice(guard));
            let d = Diagnostic::new(p, Kind::Recompile, location, message, advice, instances, graphs);
            Diagnostic { once: settled, ..d }
        })
        .collect()
}

/// The line a guard failure is named at: what set the value it checks where that is known,
/// else the call.
fn site(c: &FunctionCompile) -> u32 {
    c.reason_location.or(c.caller).unwrap_or(c.function)
}

/// Whether the compiled function of `frame` stopped compiling: a graph of it ran at a step
/// after its last compile.
fn settled(p: &Profile, frame: &str) -> bool {
    let compiles: Vec<&FunctionCompile> =
        p.function_compiles.iter().filter(|c| c.frame() == frame).collect();
    let Some(last) = compiles.iter().map(|c| c.step).max() else { return false };
    let graphs: HashSet<u64> = compiles.iter().flat_map(|c| c.graphs.iter().copied()).collect();
    p.captured_runs.iter().any(|r| r.step > last && graphs.contains(&r.hash))
}

/// The mode a guard on global state or a module's mode switches to, in words: what a program
/// switches deliberately, from training to evaluation.
fn mode_switch(guard: &str) -> Option<&'static str> {
    if guard.contains("grad_mode") {
        Some("calls under `torch.no_grad()` (evaluation)")
    } else if guard.contains(".training") {
        Some("the model in `eval()` mode")
    } else if guard.contains("autocast") {
        Some("calls under autocast")
    } else if guard.contains("requires_grad mismatch") {
        // Two values, so at most one more graph: a GAN's discriminator called on `fake.detach()`
        // and on `fake`, a frozen encoder's output and a trained one's.
        Some("inputs that require grad where the first call's did not, or the other way round (a network called on a tensor and on its `.detach()`)")
    } else {
        None
    }
}

/// A guard without the value it compared with: `s.depth == 5` and `s.depth == 6` are one cause.
fn guard_kind(guard: &str) -> String {
    for op in [" == ", " != ", " is not ", " is ", " <= ", " >= ", " < ", " > "] {
        if let Some((lhs, _)) = guard.split_once(op) {
            return format!("{}{op}…", lhs.trim());
        }
    }
    match guard.find(". expected") {
        Some(at) => guard[..at].to_string(),
        None => guard.to_string(),
    }
}

fn gave_up(c: &FunctionCompile) -> bool {
    c.failure.as_deref().is_some_and(|f| f.contains("recompile limit"))
}

/// Functions torch.compile gave up on: past its recompile limit a function runs uncompiled,
/// silently. The cost is the recompiles that led there.
fn recompile_limits(p: &Profile) -> Vec<Diagnostic> {
    p.function_compiles
        .iter()
        .filter(|c| gave_up(c))
        .map(|c| {
            let cause = guard_kind(c.reason.as_deref().unwrap_or(""));
            let all = p.function_compiles.iter().filter(|o| o.frame() == c.frame()).count();
            let recompiles: Vec<&FunctionCompile> = p
                .function_compiles
                .iter()
                .filter(|o| o.frame() == c.frame() && o.failure.is_none())
                .filter(|o| o.reason.as_deref().is_some_and(|r| guard_kind(r) == cause))
                .collect();
            let instances = recompiles
                .iter()
                .map(|o| Instance {
                    message: format!("compile {} took {}", o.id, format_ns(o.duration_ns as f64)),
                    sync: None,
                    step: Some(o.step),
                    cost_ns: o.duration_ns,
                })
                .collect();
            let location = c.reason_location.or(c.caller).unwrap_or(c.function);
            let last = match (&c.reason, c.reason_location) {
                (Some(r), Some(at)) => format!(" The guard that kept failing: `{r}`, from {}", p.location(at)),
                (Some(r), None) => format!(" The guard that kept failing: `{r}`"),
                _ => String::new(),
            };
            let message = format!(
                "torch.compile gave up on {} after {}: it hit the recompile limit, and from then on the function runs uncompiled (eagerly), without a warning in the results.{last}",
                function_name(p, c),
                plural(all.saturating_sub(1), "compile"),
            );
            let advice = Some("fix what the guard checks (keep it constant, or make it a tensor); raising `torch._dynamo.config.recompile_limit` only moves the cliff".to_string());
            let graphs = recompiles.iter().flat_map(|o| o.graphs.iter().copied()).collect();
            Diagnostic::new(p, Kind::RecompileLimit, location, message, advice, instances, graphs)
        })
        .collect()
}
