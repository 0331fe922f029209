//! Where the time goes as a flamegraph: program -> steps -> sync site -> phase -> graph, in folded
//! stack form (one `frame;frame;... microseconds` line per stack) and as an SVG drawn by inferno.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::profile::Profile;

/// One stack of the flamegraph: its frames, outermost first, and the time spent in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub frames: Vec<String>,
    pub us: u64,
}

/// Every stack with time in it, in the order of their folded lines.
pub fn stacks(p: &Profile) -> Vec<Stack> {
    let mut ns_by_stack: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let in_steps =
        |step: u64| if step as usize <= p.steps.len() { "steps" } else { "after the last step" };
    let mut synced_ns: BTreeMap<&'static str, u64> = BTreeMap::new();
    for s in &p.syncs {
        // `;` separates frames in the folded form.
        let site = format!("sync at {}", p.location(s.location).replace(';', ","));
        let base = ["program", in_steps(s.step), site.as_str()];
        let graph =
            s.hash.map(|h| format!("graph {h:016x}")).unwrap_or_else(|| "graph ?".to_string());
        let mut add = |tail: &[&str], ns: u64| {
            if ns > 0 {
                let frames = base.iter().chain(tail).map(|f| f.to_string()).collect();
                *ns_by_stack.entry(frames).or_default() += ns;
            }
        };
        for (phase, ns) in [
            ("graph build", s.build_ns),
            ("lower", s.lower_ns),
            ("compile", s.compile_ns),
            ("transfer", s.transfer_ns),
            ("execute", s.execute_ns),
        ] {
            add(&[phase, &graph], ns);
        }
        add(&["other"], s.duration_ns().saturating_sub(s.phases_ns()));
        *synced_ns.entry(in_steps(s.step)).or_default() += s.duration_ns();
    }
    // Time in steps outside syncs: the program tracing ops and doing its own work.
    let steps_ns: u64 = p.steps.iter().map(|s| s.duration_ns()).sum();
    let outside = steps_ns.saturating_sub(synced_ns.get("steps").copied().unwrap_or(0));
    if outside > 0 {
        let frames = ["program", "steps", "host (tracing ops, user code)"];
        *ns_by_stack.entry(frames.map(String::from).to_vec()).or_default() += outside;
    }
    let mut stacks: Vec<Stack> = ns_by_stack
        .into_iter()
        .map(|(frames, ns)| Stack { frames, us: ns / 1000 })
        .filter(|s| s.us > 0)
        .collect();
    stacks.sort_by_cached_key(|s| s.frames.join(";"));
    stacks
}

/// Folded stacks (`frame;frame;... microseconds`), sorted.
pub fn folded(p: &Profile) -> Vec<String> {
    stacks(p).into_iter().map(|s| format!("{} {}", s.frames.join(";"), s.us)).collect()
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
