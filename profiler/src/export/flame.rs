//! Where the time goes as a flamegraph: program -> steps -> sync site -> phase -> graph, in folded
//! stack form (one `frame;frame;... microseconds` line per stack) and as an SVG drawn by inferno.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::profile::Profile;

/// Folded stacks, microseconds per stack, sorted.
pub fn folded(p: &Profile) -> Vec<String> {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    let in_steps =
        |step: u64| if step as usize <= p.steps.len() { "steps" } else { "after the last step" };
    let mut synced_ns: BTreeMap<&'static str, u64> = BTreeMap::new();
    for s in &p.syncs {
        let base = format!(
            "program;{};sync at {}",
            in_steps(s.step),
            p.location(s.location).replace(';', ",")
        );
        let graph =
            s.hash.map(|h| format!("graph {h:016x}")).unwrap_or_else(|| "graph ?".to_string());
        for (phase, ns) in [
            ("graph build", s.build_ns),
            ("lower", s.lower_ns),
            ("compile", s.compile_ns),
            ("transfer", s.transfer_ns),
            ("execute", s.execute_ns),
        ] {
            if ns > 0 {
                *stacks.entry(format!("{base};{phase};{graph}")).or_default() += ns;
            }
        }
        let phases = s.build_ns + s.lower_ns + s.compile_ns + s.transfer_ns + s.execute_ns;
        let rest = s.duration_ns().saturating_sub(phases);
        if rest > 0 {
            *stacks.entry(format!("{base};other")).or_default() += rest;
        }
        *synced_ns.entry(in_steps(s.step)).or_default() += s.duration_ns();
    }
    // Time in steps outside syncs: the program tracing ops and doing its own work.
    let steps_ns: u64 = p.steps.iter().map(|s| s.duration_ns()).sum();
    let outside = steps_ns.saturating_sub(synced_ns.get("steps").copied().unwrap_or(0));
    if outside > 0 {
        *stacks.entry("program;steps;host (tracing ops, user code)".to_string()).or_default() +=
            outside;
    }
    stacks
        .into_iter()
        .map(|(stack, ns)| (stack, ns / 1000))
        .filter(|(_, us)| *us > 0)
        .map(|(stack, us)| format!("{stack} {us}"))
        .collect()
}

/// The flamegraph of [`folded`] as an SVG document.
pub fn svg(p: &Profile) -> Result<Vec<u8>> {
    let lines = folded(p);
    let mut options = inferno::flamegraph::Options::default();
    options.title = "xlaprof: where the time goes".to_string();
    options.count_name = "µs".to_string();
    let mut out = Vec::new();
    if lines.is_empty() {
        return Err(Error::Export {
            what: "flamegraph",
            reason: "the profile has no syncs".to_string(),
        });
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| Error::Export { what: "flamegraph", reason: e.to_string() })?;
    Ok(out)
}
