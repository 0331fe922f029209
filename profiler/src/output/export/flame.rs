//! Where the time goes as a flamegraph: program -> steps -> sync site -> phase -> graph, in folded
//! stack form (one `frame;frame;... microseconds` line per stack) and as an SVG drawn by inferno.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::record::clip;
use crate::util::saturating_sum;
use crate::views::Phase;

/// One stack of the flamegraph: its frames, outermost first, and the time spent in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub frames: Vec<String>,
    pub us: u64,
}

/// A sync's stack before its frames are spelled out: many syncs share one, and each is
/// formatted once. `phase` is `None` for the time in no phase.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    in_steps: bool,
    location: u32,
    phase: Option<Phase>,
    hash: Option<u64>,
}

/// A name from the profile as a frame: in the folded form `;` separates frames and a line break
/// ends a stack, so `;` becomes `,` and every control character `\u{fffd}`; a name of any length
/// is cut to a label's (see [`clip`]).
fn frame_name(name: &str) -> String {
    clip(name)
        .chars()
        .map(|c| {
            if c == ';' {
                ','
            } else if c.is_control() {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// Every stack with time in it, in the order of their folded lines.
pub fn stacks(p: &Profile) -> Vec<Stack> {
    let mut ns_by_key: BTreeMap<Key, u64> = BTreeMap::new();
    let mut synced_in_steps_ns = 0;
    for s in &p.syncs {
        let in_steps = s.step as usize <= p.steps.len();
        let mut add = |phase: Option<Phase>, hash: Option<u64>, ns: u64| {
            if ns > 0 {
                let key = Key { in_steps, location: s.location, phase, hash };
                let total = ns_by_key.entry(key).or_default();
                *total = total.saturating_add(ns);
            }
        };
        let phases = [s.build_ns, s.lower_ns, s.compile_ns, s.transfer_ns, s.execute_ns];
        for (phase, ns) in Phase::OF_SYNCS.into_iter().zip(phases) {
            add(Some(phase), s.hash, ns);
        }
        add(None, None, s.duration_ns().saturating_sub(s.phases_ns()));
        if in_steps {
            synced_in_steps_ns = s.duration_ns().saturating_add(synced_in_steps_ns);
        }
    }
    // Keys that read the same (two locations with one text) are one stack, as in the folded form.
    let mut ns_by_stack: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let mut sites: BTreeMap<u32, String> = BTreeMap::new();
    for (key, ns) in ns_by_key {
        let site = sites
            .entry(key.location)
            .or_insert_with(|| format!("sync at {}", frame_name(&p.location(key.location))));
        let in_steps = if key.in_steps { "steps" } else { "after the last step" };
        let mut frames = vec!["program".to_string(), in_steps.to_string(), site.clone()];
        match key.phase {
            Some(phase) => {
                let graph =
                    key.hash.map_or_else(|| "graph ?".to_string(), |h| format!("graph {h:016x}"));
                frames.extend([phase.name().to_string(), graph]);
            }
            None => frames.push("other".to_string()),
        }
        let total = ns_by_stack.entry(frames).or_default();
        *total = total.saturating_add(ns);
    }
    // Time in steps outside syncs: the program tracing ops and doing its own work.
    let steps_ns = saturating_sum(p.steps.iter().map(|s| s.duration_ns()));
    let outside = steps_ns.saturating_sub(synced_in_steps_ns);
    if outside > 0 {
        let frames = ["program", "steps", "host (tracing ops, user code)"];
        let total = ns_by_stack.entry(frames.map(String::from).to_vec()).or_default();
        *total = total.saturating_add(outside);
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
