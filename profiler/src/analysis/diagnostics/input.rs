//! The input pipeline: steps that waited for their next batch.

use std::collections::{BTreeMap, BTreeSet};

use super::{plural, Diagnostic, Instance, Kind, Thresholds};
use crate::metrics::{format_ns, median};
use crate::profile::Profile;
use crate::util::saturating_sum;

/// Waits for the next batch, per loop: the device had nothing to run meanwhile (the host could
/// not record the next step without its inputs). A loop's first wait is the pipeline filling
/// and is not counted; later ones count when they are a noticeable part of a step, and a loop
/// is a finding when it waited so at least twice.
pub(super) fn data_waits(p: &Profile, t: &Thresholds) -> Vec<Diagnostic> {
    let step = median(p.steps.iter().map(|s| s.duration_ns()).collect()) as f64;
    let noticeable = (t.data_wait_fraction * step).max(t.data_wait_min_ns as f64) as u64;
    let mut sites: BTreeMap<u32, Vec<Instance>> = BTreeMap::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for w in &p.data_waits {
        // `insert` is true for a loop's first wait.
        if seen.insert(w.location) || w.duration_ns < noticeable {
            continue;
        }
        sites.entry(w.location).or_default().push(Instance {
            message: format!(
                "step {}: waited {} for the next batch",
                w.step,
                format_ns(w.duration_ns as f64)
            ),
            sync: None,
            step: Some(w.step),
            cost_ns: w.duration_ns,
        });
    }
    sites
        .into_iter()
        // One wait is a hiccup (a pause of the collector, another process): a pipeline that
        // cannot keep up waits again.
        .filter(|(_, instances)| instances.len() >= 2)
        .map(|(location, instances)| {
            let cost = saturating_sum(instances.iter().map(|i| i.cost_ns));
            let message = format!(
                "the loop at {} waited for its input pipeline in {} ({} in all, {} a step at the median): the next batch was not ready when the step before it was recorded",
                p.location(location),
                plural(instances.len(), "step"),
                format_ns(cost as f64),
                format_ns(cost as f64 / instances.len() as f64)
            );
            let advice = "load and transform batches in worker processes (`DataLoader(num_workers=N, pin_memory=True)`), prefetch further ahead (`DeviceLoader(loader, prefetch=N)`), or move the preprocessing onto the device".to_string();
            Diagnostic::new(p, Kind::DataWait, location, message, Some(advice), instances, Vec::new())
        })
        .collect()
}
