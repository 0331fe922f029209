//! Sizes the data decides: an op whose result's size the front end read from the device (the
//! torch bridge's `x[mask]`, `masked_select`, `nonzero`, `unique`, `bincount`, as CUDA reads
//! them). Each read is a sync inside the step, and each new size a graph of its own. One cause,
//! one finding, at the op's line: it takes over the hidden syncs of those reads and the
//! recompiles whose changes are at that line, which would otherwise read as a value read to
//! move after the step and a slice bound from a Python number.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::recompile::{GraphChange, Recompile};
use super::{plural, span_of_each_sync, times, Diagnostic, Instance, Kind};
use crate::metrics::format_ns;
use crate::profile::Profile;
use crate::record::LISTED;
use crate::util::saturating_sum;

/// What the findings here explain: the syncs the size reads forced, and the recompiles (by
/// sync) that a size read's line caused. The other findings leave these out.
#[derive(Default)]
pub(super) struct Explained {
    pub syncs: HashSet<u64>,
    pub recompiles: HashSet<u64>,
}

pub(super) fn findings(p: &Profile, recompiles: &[Recompile]) -> (Vec<Diagnostic>, Explained) {
    let mut explained = Explained::default();
    if p.size_reads.is_empty() {
        return (Vec::new(), explained);
    }
    let spans: Vec<(u64, u64, u32)> =
        p.size_reads.iter().map(|r| (r.start_ns, r.duration_ns, r.location)).collect();
    // Per site: its reads with the sync each forced, and the recompiles its line caused.
    let mut forced: Vec<Option<&crate::profile::Sync>> = vec![None; p.size_reads.len()];
    // The read's line, whichever column of it the front end named (a Rust front end's read and
    // its report are two calls on one line).
    let same_line = |a: u32, b: u32| a == b || p.location(a) == p.location(b);
    for (s, read) in p.syncs.iter().zip(span_of_each_sync(p, &spans, same_line)) {
        if let Some(r) = read {
            forced[r] = Some(s);
            explained.syncs.insert(s.id);
        }
    }
    let sites: BTreeMap<String, u32> =
        p.size_reads.iter().map(|r| (p.location(r.location), r.location)).collect();
    let mut caused: BTreeMap<u32, Vec<&Recompile>> = BTreeMap::new();
    for r in recompiles {
        if let Some(&site) =
            r.changes.iter().find_map(|c| changed_at(c).and_then(|at| sites.get(at)))
        {
            caused.entry(site).or_default().push(r);
            explained.recompiles.insert(r.sync);
        }
    }
    let mut by_site: BTreeMap<(u32, &str, &str), Vec<usize>> = BTreeMap::new();
    for (i, r) in p.size_reads.iter().enumerate() {
        by_site.entry((r.location, r.op.as_str(), r.what.as_str())).or_default().push(i);
    }
    let mut out = Vec::new();
    for ((location, op, what), reads) in by_site {
        let compiled = caused.remove(&location).unwrap_or_default();
        let mut instances = Vec::new();
        let mut sizes = BTreeSet::new();
        let mut syncs = 0;
        for &i in &reads {
            let r = &p.size_reads[i];
            sizes.insert(r.size);
            let Some(s) = forced[i] else { continue };
            syncs += 1;
            instances.push(Instance {
                message: format!(
                    "step {}: size {} read, running a graph of {} tensors ({} compiling, {} waiting for the device)",
                    r.step,
                    r.size,
                    s.tensors,
                    format_ns(s.compile_ns as f64),
                    format_ns(s.execute_ns as f64)
                ),
                sync: Some(s.id),
                step: Some(r.step),
                cost_ns: s.compile_ns.saturating_add(s.execute_ns),
            });
        }
        for r in &compiled {
            instances.push(Instance {
                message: format!(
                    "step {}: a graph for a new size compiled ({})",
                    r.step,
                    format_ns(r.cost_ns as f64)
                ),
                sync: Some(r.sync),
                step: Some(r.step),
                cost_ns: r.cost_ns,
            });
        }
        if instances.is_empty() {
            continue;
        }
        let mut steps: Vec<u64> = reads.iter().map(|&i| p.size_reads[i].step).collect();
        steps.dedup();
        let listed: Vec<String> = sizes.iter().take(LISTED).map(|s| s.to_string()).collect();
        let more = if sizes.len() > LISTED {
            format!(", … {} more", sizes.len() - LISTED)
        } else {
            String::new()
        };
        let compiles = if compiled.is_empty() {
            String::new()
        } else {
            let late = saturating_sum(compiled.iter().map(|r| r.cost_ns));
            format!(
                ", and {} for new sizes ({})",
                plural(compiled.len(), "graph"),
                format_ns(late as f64)
            )
        };
        let synced = match syncs {
            0 => String::new(),
            n if n == reads.len() => " (each a sync that ran the step so far)".to_string(),
            n => format!(" ({n} of them a sync that ran the step so far)"),
        };
        let message = format!(
            "`{op}` at {} takes its size from the data ({what}): it was read from the device {} in {}{synced}, {} ({}{more}){compiles}",
            p.location(location),
            times(reads.len()),
            plural(steps.len(), "step"),
            plural(sizes.len(), "size"),
            listed.join(", "),
        );
        let advice = "keep the shape fixed: compute with the mask rather than select by it (`torch.where(mask, x, 0)`; a masked mean as `(x * mask).sum() / mask.sum()`), pad to a size you choose (`nonzero_static(size=...)`), or count over a range you know (`one_hot(x, n).sum(0)` instead of `bincount`); CUDA reads such sizes too, but compiles nothing for each".to_string();
        let mut graphs: Vec<u64> = compiled.iter().map(|r| r.hash).collect();
        graphs.dedup();
        out.push(Diagnostic::new(
            p,
            Kind::DataDependentShape,
            location,
            message,
            Some(advice),
            instances,
            graphs,
        ));
    }
    (out, explained)
}

/// The line a change of a graph is at, where it names one: the node that changed, or the line
/// that made an input that changed.
fn changed_at(c: &GraphChange) -> Option<&str> {
    match c {
        GraphChange::NodeShape { location, .. }
        | GraphChange::Structure { location, .. }
        | GraphChange::Attribute { location, .. } => Some(location),
        GraphChange::InputShape { created_at, .. } => Some(created_at),
        _ => None,
    }
}
