//! Every recompile of a profile: each compile at a call site that compiled before, paired with
//! the nearest earlier graph of that site, within a work budget.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::profile::Profile;
use crate::record::{AttrValue, GraphDef, NodeRec, ShapeRec};
use crate::util::saturating_sum;

use super::changes::*;

/// A compile at a call site that compiled before, with its explanation.
#[derive(Debug, Clone, PartialEq)]
pub struct Recompile {
    pub location: u32,
    pub sync: u64,
    pub step: u64,
    pub hash: u64,
    pub previous: u64,
    pub cost_ns: u64,
    /// What changed from `previous`; empty when the graphs were not compared (see [`Budget`]).
    /// Shared by every recompile of the same pair of graphs.
    pub changes: Arc<[GraphChange]>,
}

/// Work on graphs (comparing two, reading their inputs), in units of their size. Any number of
/// cheap records (a compile at one more call site, one more recompile) can each ask for work
/// on one huge graph; all of it shares this budget, proportional to the size of the profile's
/// graphs and far above what a real profile uses (each new graph is compared with at most 16
/// others). A crafted profile that spends it gets its later recompiles listed unexplained.
pub(super) struct Budget {
    pub(super) left: u64,
    pub(super) sizes: HashMap<u64, u64>,
}

impl Budget {
    pub(super) fn new(p: &Profile) -> Budget {
        let sizes: HashMap<u64, u64> =
            p.graphs.iter().map(|(&hash, g)| (hash, size(&g.def))).collect();
        let total = saturating_sum(sizes.values().copied());
        Budget { left: total.saturating_mul(64).saturating_add(1 << 24), sizes }
    }

    /// Spends the work on graphs `hashes`, if the budget has it.
    fn spend(&mut self, hashes: impl IntoIterator<Item = u64>) -> bool {
        let sizes = hashes.into_iter().map(|h| self.sizes.get(&h).copied().unwrap_or(0));
        let cost = saturating_sum(sizes);
        let ok = cost <= self.left;
        if ok {
            self.left -= cost;
        }
        ok
    }
}

/// A graph's size: about one unit per value its definition holds, strings by their length.
pub(super) fn size(d: &GraphDef) -> u64 {
    let shape = |s: &ShapeRec| 1 + s.dtype.len() + s.dims.len();
    let attr = |(name, value): &(String, AttrValue)| {
        1 + name.len()
            + match value {
                AttrValue::Int(_) => 1,
                AttrValue::Ints(v) => v.len(),
                AttrValue::Pairs(v) => v.len(),
                AttrValue::Name(n) => n.len(),
            }
    };
    let node = |n: &NodeRec| {
        1 + n.op.len() + n.inputs.len() + n.attrs.iter().map(attr).sum::<usize>() + shape(&n.shape)
    };
    let total = d.node_defs.iter().map(node).sum::<usize>()
        + d.inputs.iter().map(|i| shape(&i.shape)).sum::<usize>()
        + d.outputs.iter().map(shape).sum::<usize>();
    total as u64
}

/// Every recompile of the profile, in sync order. It diffs graphs, so an analysis computes it
/// once ([`crate::Analysis::recompiles`]) for the findings and the graph table alike.
pub fn find_recompiles(p: &Profile) -> Vec<Recompile> {
    find_recompiles_within(p, Budget::new(p))
}

pub(super) fn find_recompiles_within(p: &Profile, mut budget: Budget) -> Vec<Recompile> {
    /// The graphs a call site compiled, in the order it first compiled them.
    #[derive(Default)]
    struct Site {
        order: Vec<u64>,
        seen: HashSet<u64>,
        /// Each graph's place among the site's syncs of its step (the second read at one line).
        place: HashMap<u64, usize>,
        /// The step of the site's last sync, and how many syncs it had there.
        step: (u64, usize),
    }
    // A site is a line and whether its syncs end steps: a step's graph is compared with the
    // steps' graphs at its line, not with a sync made there for another reason (a loader's
    // sync, at its loop's line, of what was pending before the loop).
    let mut sites: BTreeMap<(u32, bool), Site> = BTreeMap::new();
    // Each pair of graphs is compared once, however often the pair recurs (a graph compiled
    // again after its cache entry was evicted).
    let mut diffs: HashMap<(u64, u64), Arc<[GraphChange]>> = HashMap::new();
    let mut out = Vec::new();
    // A torch.compile graph's compile is Dynamo's to explain (a guard that failed, `compiled.rs`):
    // graphs captured at one call are its forward, backward and the pieces between breaks.
    let engine_compiles = p.syncs.iter().filter(|s| s.cause != crate::record::Cause::CompiledGraph);
    for s in engine_compiles {
        let Some(hash) = s.hash else { continue };
        let site = sites.entry((s.location, s.cause == crate::record::Cause::StepEnd)).or_default();
        // A line that syncs twice a step (two reads) has two graphs: each is compared with the
        // graphs at its own place where there are some.
        site.step = if site.step.0 == s.step { (s.step, site.step.1 + 1) } else { (s.step, 0) };
        let place = site.step.1;
        if !(s.compiled() || s.persistent_hit) {
            continue;
        }
        if p.graphs.contains_key(&hash) {
            // The nearest of the most recent graphs of this site (a long storm is not compared
            // with every graph it ever compiled); the first found of equally near ones.
            let mut nearest: Option<(u64, Arc<[GraphChange]>, usize)> = None;
            let mut unexplained = None;
            let same_place = site.order.iter().any(|h| site.place.get(h) == Some(&place));
            let candidates = site.order.iter().rev().filter(|h| !same_place || site.place.get(h) == Some(&place));
            for &h in candidates.take(16) {
                let Some(earlier) = p.graphs.get(&h) else { continue };
                let changes = match diffs.get(&(h, hash)) {
                    Some(changes) => changes.clone(),
                    None if budget.spend([h, hash]) => {
                        let changes: Arc<[GraphChange]> =
                            diff_graphs(p, earlier, &p.graphs[&hash]).into();
                        diffs.insert((h, hash), changes.clone());
                        changes
                    }
                    None => {
                        unexplained = unexplained.or(Some(h));
                        continue;
                    }
                };
                let d = distance(&changes);
                if nearest.as_ref().is_none_or(|n| d < n.2) {
                    nearest = Some((h, changes, d));
                }
            }
            let found = nearest
                .map(|(h, changes, _)| (h, changes))
                .or_else(|| unexplained.map(|h| (h, Arc::from([]))));
            // The first graph of a line's second (third ...) value read in a step, other ops than
            // its first's: another read at that line, not a recompile. (Of other shapes, the same
            // ops: a loop inside the step, each length compiled.)
            let another_read = place > 0
                && !same_place
                && s.cause == crate::record::Cause::ValueRead
                && found.as_ref().is_some_and(|(_, changes)| {
                    !changes.is_empty()
                        && changes.iter().all(|c| {
                            matches!(
                                c,
                                GraphChange::Work { .. }
                                    | GraphChange::Structure { .. }
                                    | GraphChange::Attribute { .. }
                                    | GraphChange::InputCount { .. }
                                    | GraphChange::SyncedTensors { .. }
                            )
                        })
                });
            if let (Some((previous, changes)), false) = (found, another_read) {
                let changes = split_by_a_read(p, s, changes);
                out.push(Recompile {
                    location: s.location,
                    sync: s.id,
                    step: s.step,
                    hash,
                    previous,
                    cost_ns: s.compile_ns,
                    changes,
                });
            }
        }
        if site.seen.insert(hash) {
            site.order.push(hash);
            site.place.insert(hash, place);
        }
    }
    out
}

/// A graph with fewer ops than the site's earlier one, where a value read earlier in its step
/// computed them: the read split the step, and the smaller graph follows from it (the read is
/// its own finding). Else the changes as they are.
fn split_by_a_read(p: &Profile, s: &crate::profile::Sync, changes: Arc<[GraphChange]>) -> Arc<[GraphChange]> {
    let Some(GraphChange::Work { node, lines }) = changes.first() else { return changes };
    if lines.iter().any(|(_, n)| *n > 0) {
        return changes;
    }
    let at = p.syncs.partition_point(|x| x.id < s.id);
    let earlier = p.syncs[..at].iter().rev().take_while(|x| x.step == s.step).take(64);
    let read = earlier
        .filter(|x| x.cause == crate::record::Cause::ValueRead)
        .find(|x| {
            let Some(g) = x.hash.and_then(|h| p.graphs.get(&h)) else { return false };
            let lines_of_read: HashSet<String> =
                g.def.node_defs.iter().map(|n| p.location(n.location)).collect();
            lines.iter().all(|(line, _)| lines_of_read.contains(line))
        });
    match read {
        Some(r) => Arc::from([GraphChange::SplitBy {
            node: *node,
            read_at: p.location(r.location),
            ops: lines.iter().map(|(_, n)| n.unsigned_abs() as usize).sum(),
        }]),
        None => changes,
    }
}
