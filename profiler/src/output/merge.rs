//! Profiles of one job's processes (its ranks, or one per host in a multi-process run) on one
//! timeline: each process keeps its own profile and analysis, placed by the collectives they took
//! part in together (`job::offsets`; else by the wall-clock time each started), so the trace
//! shows a lane group per process, and the report says what the ranks show side by side
//! (`job`), then compares their steps.

use std::fmt::Write;

use crate::analysis::Analysis;
use crate::profile::Profile;
use crate::util::format_ns;

/// One process of a merged job.
pub struct Process<'a> {
    pub profile: &'a Profile,
    pub analysis: &'a Analysis,
    /// Its time zero on the merged timeline (ns after the earliest process started).
    pub offset_ns: u64,
}

/// The processes, each placed by its `Meta::start_unix_ms`, then by the collectives they took
/// part in together where they did (`job::offsets`).
pub fn place<'a>(runs: &[(&'a Profile, &'a Analysis)]) -> Vec<Process<'a>> {
    let offsets = crate::job::offsets(runs);
    runs.iter()
        .zip(offsets)
        .map(|(&(profile, analysis), offset)| Process {
            profile,
            analysis,
            offset_ns: offset.max(0) as u64,
        })
        .collect()
}

/// The merged report: each process's summary line, then how far apart the processes end each
/// step they all ran (the slowest process holds the others back at every collective), then each
/// process's short report.
pub fn text(processes: &[Process]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "xlaprof merged report: {} processes", processes.len());
    let runs: Vec<(&Profile, &Analysis)> = processes.iter().map(|p| (p.profile, p.analysis)).collect();
    if runs.iter().any(|(p, _)| p.job.is_some() || !p.collectives.is_empty()) {
        out.push_str(&crate::job::text(&crate::job::analyze(&runs)));
    }
    for (i, p) in processes.iter().enumerate() {
        let s = &p.analysis.summary;
        let _ = writeln!(
            out,
            "  process {i}{}: {} (pid {}), starts at +{}, {} steps, step median {}, {} compiles",
            p.profile.job.map(|j| format!(" (rank {} of {})", j.rank, j.world)).unwrap_or_default(),
            if s.program.is_empty() { "(unnamed program)" } else { &s.program },
            p.profile.meta.pid,
            format_ns(p.offset_ns as f64),
            s.steps,
            format_ns(s.step_median_ns as f64),
            s.compiles
        );
    }
    let common = processes.iter().map(|p| p.profile.steps.len()).min().unwrap_or(0);
    if processes.len() > 1 && common > 0 {
        let mut spreads = Vec::with_capacity(common);
        let mut last_count = vec![0u64; processes.len()];
        for step in 0..common {
            let ends: Vec<u64> = processes
                .iter()
                .map(|p| p.offset_ns.saturating_add(p.profile.steps[step].end_ns))
                .collect();
            let min = ends.iter().copied().min().unwrap_or(0);
            let max = ends.iter().copied().max().unwrap_or(0);
            spreads.push(max - min);
            if let Some(last) = ends.iter().position(|&e| e == max) {
                last_count[last] += 1;
            }
        }
        let median = crate::metrics::median(spreads);
        let (slowest, n) = last_count
            .iter()
            .enumerate()
            .max_by_key(|(_, &n)| n)
            .map(|(i, &n)| (i, n))
            .unwrap_or((0, 0));
        let _ = writeln!(
            out,
            "  steps 1..{common}: the processes end each step a median {} apart; process {slowest} ends last in {n} of {common}",
            format_ns(median as f64)
        );
    }
    for (i, p) in processes.iter().enumerate() {
        let _ = writeln!(out, "\n== process {i}");
        out.push_str(&crate::report::short(p.analysis));
    }
    out
}
