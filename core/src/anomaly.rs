//! `detect_anomaly()`: every sync's results checked for NaN and Inf on the device, and on a hit
//! the op that made the first one named, with its line and its inputs' ranges.
//!
//! The check is one scalar per sync: `Σ (x - x).sum()` over the synced floating-point results,
//! which is 0 when every value is finite and NaN as soon as one is not (∞ - ∞ and NaN - NaN are
//! NaN), computed by the sync's own program as one more output (`Graph::check_finite`). On a
//! hit the sync's graph runs again, on the same inputs (donation is off while anomalies are
//! looked for), with that sum taken of every node, read back as one vector: the first node in
//! graph order whose sum is not finite made the first NaN or Inf (its inputs, earlier in the
//! order, were finite).

use std::collections::HashSet;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::exec::watch::{self, Synced};
use crate::ir::{Node, NodeRef, Op};
use crate::location::SourceLocation;
use crate::tensor::{Tensor, TensorInner};

pub use crate::exec::{detect_anomalies, DetectingAnomalies};

/// Computes every live pending tensor in one graph and makes each device data
/// (torch_xla's `mark_step`); checked for NaN and Inf inside `detect_anomalies()`.
#[track_caller]
pub fn sync() -> Result<()> {
    crate::exec::sync()?;
    after_sync()?;
    crate::breaks::take()
}

/// Like [`sync`], marking the end of a training step.
#[track_caller]
pub fn step() -> Result<()> {
    crate::exec::step()?;
    after_sync()?;
    crate::breaks::take()
}

/// Checks what the syncs on this thread computed, when anomalies are looked for, the ones
/// still running included (the end of a `detect_anomalies()` block, a wait for the device).
pub fn check_all() -> Result<()> {
    check(watch::take(true))
}

/// Checks what the syncs on this thread computed, when anomalies are looked for, but the last
/// one when its program runs ahead: that is checked at the next sync, once the host has
/// queued the next program (as it would without the check).
pub(crate) fn after_sync() -> Result<()> {
    check(watch::take(false))
}

/// Each sync's program said whether its results were finite, or (a graph over a mesh) a graph
/// of its own says: the first one that was not is located.
fn check(syncs: Vec<Synced>) -> Result<()> {
    if syncs.is_empty() {
        return Ok(());
    }
    watch::unchecked(|| {
        for synced in syncs {
            let finite = match &synced.marker {
                Some(marker) => marker.to_vec::<f32>()?.first().is_some_and(|v| v.is_finite()),
                None => all_finite(&synced)?,
            };
            if !finite {
                return Err(locate(&synced)?);
            }
            // The step's graph, kept for a rerun not needed: freed off the step's path.
            crate::trace::bury_nodes(synced.roots);
        }
        Ok(())
    })
}

/// `Σ (x - x).sum()` over `tensors`: 0 when all their values are finite, NaN otherwise.
fn marker_of(tensors: &[Tensor]) -> Result<Option<Tensor>> {
    let mut total: Option<Tensor> = None;
    for t in tensors {
        let marker = not_finite_marker(t)?;
        total = Some(match total {
            None => marker,
            Some(sum) => sum.add(&marker)?,
        });
    }
    Ok(total)
}

fn tensor_of(node: &NodeRef) -> Tensor {
    Tensor(TensorInner::new(node.clone(), None))
}

/// `(x - x).sum()` as f32: 0 when every value of `x` is finite, NaN when one is not.
fn not_finite_marker(x: &Tensor) -> Result<Tensor> {
    let sum = x.sub(x)?.sum(&[], false)?;
    match sum.dtype() {
        DType::F32 => Ok(sum),
        _ => sum.cast(DType::F32),
    }
}

fn all_finite(synced: &Synced) -> Result<bool> {
    let floats: Vec<Tensor> =
        synced.outputs.iter().filter(|n| n.shape.dtype.is_float()).map(tensor_of).collect();
    match marker_of(&floats)? {
        Some(total) => Ok(total.item()?.is_finite()),
        None => Ok(true),
    }
}

/// Every node of the graph below `roots`, operands before the nodes that use them.
fn graph_order(roots: &[NodeRef]) -> Vec<NodeRef> {
    let mut seen: HashSet<*const Node> = HashSet::new();
    let mut order = Vec::new();
    let mut stack: Vec<(NodeRef, bool)> = roots.iter().rev().map(|r| (r.clone(), false)).collect();
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            order.push(node);
            continue;
        }
        if !seen.insert(Arc::as_ptr(&node)) {
            continue;
        }
        stack.push((node.clone(), true));
        for input in node.inputs.iter().rev() {
            if !seen.contains(&Arc::as_ptr(input)) {
                stack.push((input.clone(), false));
            }
        }
    }
    order
}

/// Runs the sync's graph again with every floating-point node checked, and names the first
/// that is not finite.
fn locate(synced: &Synced) -> Result<Error> {
    let order: Vec<NodeRef> = graph_order(&synced.roots)
        .into_iter()
        .filter(|n| n.shape.dtype.is_float() && !matches!(n.op, Op::Scalar(_)))
        .collect();
    let markers: Vec<Tensor> =
        order.iter().map(|n| not_finite_marker(&tensor_of(n))).collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = markers.iter().collect();
    let values = Tensor::stack(&refs, 0)?.to_vec::<f32>()?;
    let Some(first) = values.iter().position(|v| !v.is_finite()) else {
        // The graph ran clean this time (a value that was NaN only in the first run).
        return Ok(anomaly(synced, "a result of this sync", &synced.location, String::new()));
    };
    let node = &order[first];
    if let Op::Data(_) = node.op {
        let what = format!("an input of the graph, {}, made at {},", node.shape, node.location);
        return Ok(anomaly(
            synced,
            &what,
            &node.location,
            " (it held NaN or Inf before this sync)".into(),
        ));
    }
    let mut ranges = Vec::new();
    for input in node.inputs.iter().filter(|i| i.shape.dtype.is_float()) {
        let t = tensor_of(input);
        let low = t.amin(&[], false)?.cast(DType::F64)?;
        let high = t.amax(&[], false)?.cast(DType::F64)?;
        let both = Tensor::stack(&[&low, &high], 0)?.to_vec::<f64>()?;
        ranges.push(format!("{} in [{}, {}]", input.shape, both[0], both[1]));
    }
    let inputs = match ranges.is_empty() {
        true => String::new(),
        false => format!("; its inputs: {}", ranges.join(", ")),
    };
    let what = format!("`{}` ({})", node.op.name(), node.shape);
    Ok(anomaly(synced, &what, &node.location, inputs))
}

fn anomaly(synced: &Synced, what: &str, at: &SourceLocation, detail: String) -> Error {
    let message = format!("{what} made the first NaN or Inf, at {at}{detail}");
    crate::events::caught(crate::events::Tool::Anomaly, &message, at.clone());
    Error::Anomaly { message, location: synced.location.clone() }
}
