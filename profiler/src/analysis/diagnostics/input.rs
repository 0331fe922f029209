//! The input pipeline: steps that waited for their next batch.

use std::collections::{BTreeMap, BTreeSet};

use super::{plural, Diagnostic, Instance, Kind, Thresholds};
use crate::metrics::{format_ns, median};
use crate::profile::Profile;
use crate::util::saturating_sum;

/// Waits for the next batch, per loop: the device had nothing to run meanwhile (the host could
/// not record the next step without its inputs). A loop's first wait is the pipeline filling
/// and is not counted; later ones count when they are a noticeable part of a step, and a loop
/// is a finding when it waited so at least twice and those waits are a noticeable part of the
/// steps' time, compiles aside.
pub(super) fn data_waits(p: &Profile, t: &Thresholds) -> Vec<Diagnostic> {
    let step = median(p.steps.iter().map(|s| s.duration_ns()).collect()) as f64;
    // The waits are weighed against the steps after warm-up, compiling aside: the first steps
    // (compiling for seconds, a program's set-up before its loop) say nothing of what the
    // loop's waits cost once it runs.
    let settled = |step: u64| step > t.warmup_steps || p.steps.len() as u64 <= t.warmup_steps;
    let compiling = saturating_sum(
        p.syncs
            .iter()
            .filter(|s| settled(s.step))
            .map(|s| s.compile_ns)
            .chain(p.function_compiles.iter().filter(|c| settled(c.step)).map(|c| c.duration_ns)),
    );
    let run = saturating_sum(p.steps.iter().filter(|s| settled(s.index)).map(|s| s.duration_ns()))
        .saturating_sub(compiling);
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
        // A few milliseconds over a run of many steps (each epoch's loader started again, the
        // machine busy elsewhere) cost the run nothing worth changing its pipeline for.
        .filter(|(_, instances)| {
            let waited = instances.iter().filter(|i| i.step.is_some_and(settled)).map(|i| i.cost_ns);
            saturating_sum(waited) as f64 >= t.data_wait_fraction * run as f64
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{DataWait, FunctionCompile, Step};

    const MS: u64 = 1_000_000;

    /// `steps` steps of 20 ms (numbered from 1), with a wait of `wait` at each step in `waiting`.
    fn run(steps: u64, waiting: &[u64], wait: u64) -> Profile {
        let mut p = Profile::default();
        for index in 1..=steps {
            let start_ns = index * 20 * MS;
            p.steps.push(Step { index, start_ns, end_ns: start_ns + 20 * MS, location: 0 });
            if waiting.contains(&index) {
                p.data_waits.push(DataWait {
                    location: 0,
                    start_ns,
                    duration_ns: wait,
                    step: index,
                });
            }
        }
        p
    }

    #[test]
    fn a_loop_that_waits_at_every_step_is_a_finding() {
        let all: Vec<u64> = (1..=18).collect();
        let found = data_waits(&run(18, &all, 8 * MS), &Thresholds::default());
        assert_eq!(found.len(), 1);
        // The first wait is the pipeline filling.
        assert_eq!(found[0].instances.len(), 17);
    }

    #[test]
    fn a_few_milliseconds_over_a_long_run_are_not() {
        // Each epoch's loader started again, 3 ms twice in 18 steps of 20 ms: under 2 % of the run.
        let p = run(18, &[1, 7, 13], 3 * MS);
        assert!(data_waits(&p, &Thresholds::default()).is_empty());
        // The same waits in a run of 3 steps are most of it.
        let p = run(3, &[1, 2, 3], 3 * MS);
        assert_eq!(data_waits(&p, &Thresholds::default()).len(), 1);
    }

    #[test]
    fn compiles_do_not_hide_the_waits_beside_them() {
        // 8 steps of 20 ms, each after the first waiting 8 ms; the first step compiled for 10 s,
        // and the fourth for 1 s.
        let all: Vec<u64> = (1..=8).collect();
        let mut p = run(8, &all, 8 * MS);
        p.steps[0].end_ns += 10_000 * MS;
        p.function_compiles.push(FunctionCompile {
            id: "0/0".into(),
            function: 0,
            caller: None,
            start_ns: 0,
            duration_ns: 10_000 * MS,
            phases: Vec::new(),
            graphs: Vec::new(),
            reason: None,
            reason_location: None,
            failure: None,
            step: 1,
        });
        p.steps[3].end_ns += 1_000 * MS;
        p.function_compiles.push(FunctionCompile {
            id: "0/1".into(),
            duration_ns: 1_000 * MS,
            step: 4,
            ..p.function_compiles[0].clone()
        });
        assert_eq!(data_waits(&p, &Thresholds::default()).len(), 1);
    }
}
