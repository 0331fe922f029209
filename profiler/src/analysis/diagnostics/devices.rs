//! Findings about programs partitioned over several devices: a split tensor gathered whole on
//! every device, collectives that move more than the program's own inputs, and devices that
//! wait on one another.

use std::collections::BTreeMap;

use super::{plural, Diagnostic, Instance, Kind};
use crate::metrics::{format_bytes, format_ns, median};
use crate::profile::{Graph, Profile};
use crate::util::saturating_sum;

/// A device finishing this fraction of the execution after the first is a straggler worth a
/// finding (with at least [`SKEW_MIN_NS`]): below it, scheduling noise.
const SKEW_FRACTION: f64 = 0.2;
const SKEW_MIN_NS: u64 = 100_000;

/// Where a graph's finding is reported when nothing better is known: its first sync's line.
fn graph_site(p: &Profile, g: &Graph) -> u32 {
    p.sync(g.first_sync).map(|s| s.location).unwrap_or(0)
}

/// The graph's split inputs: `('data', None) (created at train.py:10)`.
fn split_inputs(p: &Profile, g: &Graph, plan: &crate::record::PartitionRec) -> String {
    let split: Vec<String> = plan
        .inputs
        .iter()
        .zip(&g.def.inputs)
        .filter_map(|(s, input)| {
            let s = s.as_ref()?;
            Some(format!(
                "{} {} from {}",
                input.shape,
                crate::record::clip_to(s, 66),
                p.location(input.location)
            ))
        })
        .take(3)
        .collect();
    if split.is_empty() {
        "the values split inside it".to_string()
    } else {
        split.join("; ")
    }
}

/// The all-gathers (and all-to-alls) XLA put in a partitioned graph: split tensors made whole
/// on every device, one finding per line of the ops that needed them whole.
pub(super) fn gathers(p: &Profile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for g in p.graphs.values() {
        let Some(plan) = &g.partition else { continue };
        let mut sites: BTreeMap<u32, Vec<&crate::record::CollectiveRec>> = BTreeMap::new();
        for c in
            plan.collectives.iter().filter(|c| c.kind == "all-gather" || c.kind == "all-to-all")
        {
            sites.entry(c.location.unwrap_or_else(|| graph_site(p, g))).or_default().push(c);
        }
        for (location, gathers) in sites {
            let bytes = saturating_sum(gathers.iter().map(|c| c.bytes));
            let list: Vec<String> = gathers.iter().take(4).map(|c| c.text()).collect();
            let more = match gathers.len() {
                n if n > 4 => format!(" and {} more", n - 4),
                _ => String::new(),
            };
            let instances = gathers
                .iter()
                .take(64)
                .map(|c| Instance { message: c.text(), sync: None, step: None, cost_ns: 0 })
                .collect();
            let message = format!(
                "{} at {} {} whole on every device ({} per device, in each of the graph's {} executions): {}{more}; split inputs: {}",
                plural(gathers.len(), "gather"),
                p.location(location),
                if gathers.len() == 1 { "makes a split tensor" } else { "make split tensors" },
                format_bytes(bytes as f64),
                g.executions,
                list.join("; "),
                split_inputs(p, g, plan)
            );
            let advice = "expected for FSDP's parameters (gathered for their matmuls); elsewhere, split the op's other operand the same way or mark its result with xp.mark_sharding so it stays split".to_string();
            out.push(Diagnostic::new(
                p,
                Kind::Gather,
                location,
                message,
                Some(advice),
                instances,
                vec![g.def.hash],
            ));
        }
    }
    out
}

/// A partitioned graph whose collectives move more bytes to each device per execution than all
/// its device inputs hold: a sharding that makes data travel, not just gradients.
pub(super) fn heavy_collectives(p: &Profile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for g in p.graphs.values() {
        let Some(plan) = &g.partition else { continue };
        let moved = plan.collective_bytes();
        let inputs =
            saturating_sum(g.def.inputs.iter().filter(|i| i.data).map(|i| i.shape.bytes()));
        if moved <= inputs || g.executions == 0 {
            continue;
        }
        let location = graph_site(p, g);
        let mut biggest: Vec<&crate::record::CollectiveRec> = plan.collectives.iter().collect();
        biggest.sort_by(|a, b| b.bytes.cmp(&a.bytes));
        let list: Vec<String> = biggest.iter().take(3).map(|c| c.text()).collect();
        let instances = vec![Instance {
            message: format!(
                "{} per device per execution, {} executions",
                format_bytes(moved as f64),
                g.executions
            ),
            sync: Some(g.first_sync),
            step: None,
            cost_ns: 0,
        }];
        let message = format!(
            "the collectives of the graph synced at {} move {} to each device per execution, more than all its device inputs hold ({}): {}",
            p.location(location),
            format_bytes(moved as f64),
            format_bytes(inputs as f64),
            list.join("; ")
        );
        let advice = "data parallelism moves about the gradients' size; more means tensors are resharded inside the step: keep activations split like the batch and parameters as they are used".to_string();
        out.push(Diagnostic::new(
            p,
            Kind::HeavyCollectives,
            location,
            message,
            Some(advice),
            instances,
            vec![g.def.hash],
        ));
    }
    out
}

/// Devices that finish a partitioned execution well after the first: the others waited.
pub(super) fn device_skew(p: &Profile) -> Vec<Diagnostic> {
    let mut runs_of: BTreeMap<u64, Vec<(&crate::profile::Execution, (u64, u64, usize))>> =
        BTreeMap::new();
    for e in &p.executions {
        if let Some(spread) = e.device_spread() {
            runs_of.entry(e.hash).or_default().push((e, spread));
        }
    }
    let mut out = Vec::new();
    for (hash, runs) in runs_of {
        let Some(g) = p.graphs.get(&hash) else { continue };
        let Some(plan) = &g.partition else { continue };
        let mut lasts = vec![0u64; runs[0].0.device_end_ns.len()];
        let mut instances = Vec::new();
        for &(e, (first, last, last_at)) in &runs {
            let skew = last - first;
            if let Some(n) = lasts.get_mut(last_at) {
                *n += 1;
            }
            if skew as f64 > SKEW_FRACTION * e.duration_ns as f64 && skew >= SKEW_MIN_NS {
                instances.push(Instance {
                    message: format!(
                        "sync {}: device {} finished {} after the first",
                        e.sync,
                        plan.device(last_at),
                        format_ns(skew as f64)
                    ),
                    sync: Some(e.sync),
                    step: p.sync(e.sync).map(|s| s.step),
                    cost_ns: skew,
                });
            }
        }
        let median_skew = median(runs.iter().map(|(_, (first, last, _))| last - first).collect());
        let median_run = median(runs.iter().map(|(e, _)| e.duration_ns).collect());
        if (median_skew as f64) <= SKEW_FRACTION * median_run as f64 || median_skew < SKEW_MIN_NS {
            continue;
        }
        let (straggler, count) = lasts
            .iter()
            .enumerate()
            .max_by_key(|(_, &n)| n)
            .map(|(i, &n)| (i, n))
            .unwrap_or((0, 0));
        let location = graph_site(p, g);
        let message = format!(
            "devices wait on one another in the graph synced at {}: device {} finished last in {} of {} executions; the last device finishes a median {} after the first ({:.0}% of the execution)",
            p.location(location),
            plan.device(straggler),
            count,
            runs.len(),
            format_ns(median_skew as f64),
            100.0 * median_skew as f64 / median_run.max(1) as f64
        );
        let advice = "uneven shards (a dimension split unevenly, data-dependent work) or more devices than cores: give every device the same work, or use fewer devices".to_string();
        out.push(Diagnostic::new(
            p,
            Kind::DeviceSkew,
            location,
            message,
            Some(advice),
            instances,
            vec![hash],
        ));
    }
    out
}
