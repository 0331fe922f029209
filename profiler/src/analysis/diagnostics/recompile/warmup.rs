//! Recompiles that are warm-up, not problems: the first step's graph also initialized tensors
//! made before the loop, or the first update created the optimizer's state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::super::{Diagnostic, Instance, Kind};
use super::find::Recompile;
use crate::profile::Profile;
use crate::record::GraphDef;
use crate::util::format_ns;

/// A recompile that is warm-up rather than a problem: the site's first graph also computed
/// tensors made before the loop (initialization), or the optimizer state that its first update
/// created: which of the two, and the lines only the first graph had.
pub(super) struct WarmUp {
    kind: Kind,
    lines: Vec<u32>,
}

/// Whether the first recompile at a site is warm-up: the new graph is the first one without the
/// lines that ran once, and takes the tensors they made as inputs.
/// The lines that recorded each graph's ops (its parameters and host scalars aside), computed
/// once per graph.
#[derive(Default)]
pub(super) struct GraphLines(HashMap<u64, Arc<BTreeSet<u32>>>);

impl GraphLines {
    fn of(&mut self, hash: u64, d: &GraphDef) -> Arc<BTreeSet<u32>> {
        self.0
            .entry(hash)
            .or_insert_with(|| {
                Arc::new(
                    d.node_defs
                        .iter()
                        .filter(|n| n.op != "parameter" && n.op != "scalar")
                        .map(|n| n.location)
                        .collect(),
                )
            })
            .clone()
    }
}

/// Whether two graphs are one program but for which inputs they donate.
pub(super) fn same_but_donation(p: &Profile, a: u64, b: u64) -> bool {
    let (Some(a), Some(b)) = (p.graphs.get(&a), p.graphs.get(&b)) else { return false };
    let (a, b) = (&a.def, &b.def);
    let inputs_alike = a.inputs.len() == b.inputs.len()
        && a.inputs
            .iter()
            .zip(&b.inputs)
            .all(|(x, y)| x.shape == y.shape && x.data == y.data && x.location == y.location);
    inputs_alike && a.outputs == b.outputs && a.node_defs == b.node_defs
}

pub(super) fn warm_up(
    p: &Profile,
    r: &Recompile,
    site_syncs: &[&crate::profile::Sync],
    lines: &mut GraphLines,
) -> Option<WarmUp> {
    // Warm-up happens once: the first graph never runs again at this site, and the new one is
    // the steady state (it runs again, or nothing else compiles there after it). The steady
    // state may still change which inputs it donates, once what held them lets go (the
    // Hugging Face Trainer keeps a buffer until its third step, or not, by the collector's
    // timing): the same program otherwise.
    let later = || site_syncs.iter().filter(|s| s.id > r.sync);
    if later().any(|s| s.hash == Some(r.previous)) {
        return None;
    }
    let steady = |h: Option<u64>| h.is_some_and(|h| h == r.hash || same_but_donation(p, h, r.hash));
    if !later().any(|s| steady(s.hash)) && later().any(|s| s.compiled()) {
        return None;
    }
    let (a, b) = (&p.graphs.get(&r.previous)?.def, &p.graphs.get(&r.hash)?.def);
    let (la, lb) = (lines.of(r.previous, a), lines.of(r.hash, b));
    // The new graph runs no code the first did not, but for a few ops recorded after the first
    // step's end, which land in the second step's graph (a logging callback that resets its
    // accumulator after reading it: the Hugging Face Trainer's).
    let new_code = b
        .node_defs
        .iter()
        .filter(|n| n.op != "parameter" && n.op != "scalar" && !la.contains(&n.location))
        .count();
    if new_code > (b.node_defs.len() / 100).max(4) {
        return None;
    }
    let only_first: Vec<u32> = la.difference(&lb).copied().collect();
    // The device inputs the new graph has beyond the first's, by where they were made.
    let mut before: BTreeMap<u32, usize> = BTreeMap::new();
    for i in a.inputs.iter().filter(|i| i.data) {
        *before.entry(i.location).or_default() += 1;
    }
    // How many each line made, to name the lines that made most first (an optimizer's moments,
    // one or two per parameter, before a buffer that only moved to the line that updates it).
    let mut made_at: BTreeMap<u32, usize> = BTreeMap::new();
    for i in b.inputs.iter().filter(|i| i.data) {
        match before.get_mut(&i.location) {
            Some(n) if *n > 0 => *n -= 1,
            _ => *made_at.entry(i.location).or_default() += 1,
        }
    }
    if made_at.is_empty() {
        return None;
    }
    let new_inputs: BTreeSet<u32> = made_at.keys().copied().collect();
    let mut most_first: Vec<u32> = new_inputs.iter().copied().collect();
    most_first.sort_by_key(|l| std::cmp::Reverse(made_at[l]));
    // Initialization: the inputs were made at lines only the first graph ran. State: they are
    // made by lines every step runs (the update), from what only the first graph created.
    if !only_first.is_empty() {
        // The initialization's lines (only the first graph ran them), or the state's (the
        // lines that made the new inputs: the update).
        return if new_inputs.iter().any(|l| only_first.contains(l)) {
            Some(WarmUp { kind: Kind::Warmup, lines: only_first })
        } else if new_inputs.iter().all(|l| lb.contains(l)) {
            Some(WarmUp { kind: Kind::LazyState, lines: most_first })
        } else {
            None
        };
    }
    // One line both creates the state and updates it (`opt.step()` of torch.optim, whose
    // first call makes the moments): the first graph ran the same lines, and the new graph only
    // adds device inputs, made at those lines, that it then keeps.
    let data = |d: &GraphDef| d.inputs.iter().filter(|i| i.data).count();
    if data(b) > data(a) && new_inputs.iter().all(|l| la.contains(l) && lb.contains(l)) {
        return Some(WarmUp { kind: Kind::LazyState, lines: most_first });
    }
    None
}

pub(super) fn lines_text(p: &Profile, lines: &[u32]) -> String {
    let mut names: Vec<String> = lines.iter().map(|&l| p.location(l)).collect();
    names.dedup();
    if names.len() > 4 {
        let more = names.len() - 3;
        names.truncate(3);
        names.push(format!("{more} more lines"));
    }
    names.join(", ")
}

pub(super) fn warm_up_diagnostic(p: &Profile, r: &Recompile, w: &WarmUp) -> Diagnostic {
    let site = p.location(r.location);
    let made = lines_text(p, &w.lines);
    let (message, advice) = match w.kind {
        Kind::Warmup => (
            format!(
                "warm-up, once: the first graph synced at {site} also initialized the tensors made at {made}; step {} compiled the step's own graph ({})",
                r.step,
                format_ns(r.cost_ns as f64)
            ),
            "expected once, not a problem; an xp.sync() after the initialization, before the loop, separates the two graphs".to_string(),
        ),
        _ => (
            format!(
                "warm-up, once: the first update created state at {made} (optimizer moments or buffers made on first use); from step {} the step takes that state as inputs and compiled its own graph ({})",
                r.step,
                format_ns(r.cost_ns as f64)
            ),
            "expected once, not a problem; create the state before the loop (and sync) if this compile matters".to_string(),
        ),
    };
    let instance = Instance {
        message: format!("step {}: compiled the steady step's graph", r.step),
        sync: Some(r.sync),
        step: Some(r.step),
        cost_ns: r.cost_ns,
    };
    let d = Diagnostic::new(
        p,
        w.kind,
        r.location,
        message,
        Some(advice),
        vec![instance],
        vec![r.previous, r.hash],
    );
    Diagnostic { changes: r.changes.to_vec(), ..d }
}
