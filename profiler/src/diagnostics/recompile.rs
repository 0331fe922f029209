//! Why a call site compiled again: the structural difference between a new graph and the
//! nearest graph the same site compiled before; and storms of such recompiles after warm-up.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::{Diagnostic, Instance, Kind, Thresholds};
use crate::analysis::saturating_sum;
use crate::metrics::format_ns;
use crate::profile::{Graph, Profile};
use crate::record::{clip, clip_to, AttrValue, GraphDef, InputRec, NodeRec, ShapeRec, LISTED};

/// One difference between two versions of a graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum GraphChange {
    /// An input changed shape or dtype.
    InputShape { input: usize, from: ShapeRec, to: ShapeRec, created_at: String },
    /// The graph has a different number of inputs.
    InputCount { from: usize, to: usize },
    /// Different tensors were synced (outputs joined or left).
    SyncedTensors { from: usize, to: usize, joined: Vec<ShapeRec>, left: Vec<ShapeRec> },
    /// The op structure diverged at a node.
    Structure { node: usize, from: String, to: String, location: String },
    /// The same op on the same operands, with one attribute changed (its axes, permutation,
    /// slice bounds ...).
    Attribute { node: usize, op: String, name: String, from: String, to: String, location: String },
    /// An input's buffer is donated in one version and not the other.
    Donation { input: usize, donated: bool },
    /// Same ops and shapes: only the pattern of equal host scalars at one line differs.
    ScalarPattern,
}

impl GraphChange {
    /// The change in words.
    pub fn sentence(&self) -> String {
        match self {
            GraphChange::InputShape { input, from, to, created_at } => {
                format!("input {input} changed from {from} to {to} (created at {created_at})")
            }
            GraphChange::InputCount { from, to } => format!("the graph takes {to} inputs instead of {from}"),
            GraphChange::SyncedTensors { from, to, joined, left } => {
                let list = |v: &[ShapeRec]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
                let mut s = format!("{to} tensors were synced instead of {from}");
                if !joined.is_empty() {
                    s += &format!(" (joined: {})", list(joined));
                }
                if !left.is_empty() {
                    s += &format!(" (left: {})", list(left));
                }
                s
            }
            GraphChange::Structure { node, from, to, location } => match (from.as_str(), to.as_str()) {
                (_, NO_NODE) => format!(
                    "the graph is shorter: it ends before node %{node}, where the earlier one went on with `{from}` (recorded at {location})"
                ),
                (NO_NODE, _) => format!(
                    "the graph is longer: node %{node} `{to}` is new (recorded at {location})"
                ),
                _ => format!("the op structure diverged at node %{node}: `{to}` instead of `{from}` (recorded at {location})"),
            },
            GraphChange::Attribute { node, op, name, from, to, location } => format!(
                "`{op}` (node %{node}, recorded at {location}) changed its {name} from {from} to {to}"
            ),
            GraphChange::Donation { input, donated } => {
                if *donated {
                    format!("input {input} is now donated (nothing else holds it any more)")
                } else {
                    format!("input {input} is no longer donated (something still holds it)")
                }
            }
            GraphChange::ScalarPattern => {
                "the same ops and shapes, but host scalars recorded at one line that were equal now differ (or the reverse)".to_string()
            }
        }
    }
}

/// Stands for a node one version of a graph does not have.
const NO_NODE: &str = "(no node)";

/// Whether two nodes are the same op on the same operands, shapes aside (a shape that changes
/// is explained by the inputs that changed it).
fn same_op(x: &NodeRec, y: &NodeRec) -> bool {
    x.op == y.op && x.inputs == y.inputs && x.attrs == y.attrs
}

/// What changed from graph `a` to graph `b`. Linear in the two graphs' sizes; each kind of
/// change lists at most [`LISTED`] instances (the first ones say what to fix, and a crafted
/// graph of a million inputs must not explain every recompile in a million lines).
pub fn diff_graphs(p: &Profile, a: &Graph, b: &Graph) -> Vec<GraphChange> {
    let (da, db) = (&a.def, &b.def);
    // Device data only: host scalars are inputs too, but a change in them shows in the nodes (a
    // dtype) or is the scalar pattern below.
    fn data(d: &GraphDef) -> impl Iterator<Item = &InputRec> {
        d.inputs.iter().filter(|i| i.data)
    }
    let (na, nb) = (data(da).count(), data(db).count());
    let mut changes = Vec::new();
    if na == nb {
        let changed = data(da).zip(data(db)).enumerate().filter(|(_, (x, y))| x.shape != y.shape);
        for (i, (x, y)) in changed.take(LISTED) {
            changes.push(GraphChange::InputShape {
                input: i,
                from: x.shape.clone(),
                to: y.shape.clone(),
                created_at: p.location(y.location),
            });
        }
    } else {
        changes.push(GraphChange::InputCount { from: na, to: nb });
    }
    if da.outputs != db.outputs {
        let (joined, left) = outputs_diff(&da.outputs, &db.outputs);
        if !joined.is_empty() || !left.is_empty() || da.outputs.len() != db.outputs.len() {
            let listed = |v: Vec<&ShapeRec>| v.into_iter().take(LISTED).cloned().collect();
            changes.push(GraphChange::SyncedTensors {
                from: da.outputs.len(),
                to: db.outputs.len(),
                joined: listed(joined),
                left: listed(left),
            });
        }
    }
    let first_diff =
        da.node_defs.iter().zip(&db.node_defs).position(|(x, y)| !same_op(x, y)).or_else(|| {
            (da.node_defs.len() != db.node_defs.len())
                .then(|| da.node_defs.len().min(db.node_defs.len()))
        });
    if let Some(node) = first_diff {
        let (x, y) = (da.node_defs.get(node), db.node_defs.get(node));
        let location = y.or(x).map(|n| p.location(n.location)).unwrap_or_default();
        match (x, y) {
            // Only attributes differ: name each one.
            (Some(x), Some(y))
                if x.op == y.op
                    && x.inputs == y.inputs
                    && x.attrs.iter().map(|a| &a.0).eq(y.attrs.iter().map(|a| &a.0)) =>
            {
                let changed = x.attrs.iter().zip(&y.attrs).filter(|(from, to)| from.1 != to.1);
                for ((name, from), (_, to)) in changed.take(LISTED) {
                    changes.push(GraphChange::Attribute {
                        node,
                        op: clip(&y.op).into_owned(),
                        name: clip(name).into_owned(),
                        from: from.to_string(),
                        to: to.to_string(),
                        location: location.clone(),
                    });
                }
            }
            _ => {
                let text = |n: Option<&NodeRec>| n.map_or_else(|| NO_NODE.into(), |n| n.text(node));
                changes.push(GraphChange::Structure { node, from: text(x), to: text(y), location });
            }
        }
    }
    if na == nb {
        let changed =
            data(da).zip(data(db)).enumerate().filter(|(_, (x, y))| x.donated != y.donated);
        for (i, (_, y)) in changed.take(LISTED) {
            changes.push(GraphChange::Donation { input: i, donated: y.donated });
        }
    }
    if changes.is_empty() {
        changes.push(GraphChange::ScalarPattern);
    }
    changes
}

/// The outputs of `b` that `a` does not have (joined), and those of `a` that `b` does not
/// (left), as multisets: counted, not searched, so it is linear in the outputs. Each list keeps
/// its graph's order; of equal outputs, the first ones are the ones matched.
fn outputs_diff<'g>(
    a: &'g [ShapeRec],
    b: &'g [ShapeRec],
) -> (Vec<&'g ShapeRec>, Vec<&'g ShapeRec>) {
    let mut in_a: HashMap<&ShapeRec, usize> = HashMap::new();
    for o in a {
        *in_a.entry(o).or_default() += 1;
    }
    let mut matched: HashMap<&ShapeRec, usize> = HashMap::new();
    let mut joined = Vec::new();
    for o in b {
        let available = in_a.get(o).copied().unwrap_or(0);
        let used = matched.entry(o).or_default();
        if *used < available {
            *used += 1;
        } else {
            joined.push(o);
        }
    }
    let mut left = Vec::new();
    for o in a {
        match matched.get_mut(o) {
            Some(used) if *used > 0 => *used -= 1,
            _ => left.push(o),
        }
    }
    (joined, left)
}

/// How different two changes lists are, to pick the nearest earlier graph.
fn distance(changes: &[GraphChange]) -> usize {
    changes
        .iter()
        .map(|c| match c {
            GraphChange::Structure { .. }
            | GraphChange::Attribute { .. }
            | GraphChange::InputCount { .. } => 10,
            GraphChange::SyncedTensors { .. } => 5,
            _ => 1,
        })
        .sum()
}

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
struct Budget {
    left: u64,
    sizes: HashMap<u64, u64>,
}

impl Budget {
    fn new(p: &Profile) -> Budget {
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
fn size(d: &GraphDef) -> u64 {
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

fn find_recompiles_within(p: &Profile, mut budget: Budget) -> Vec<Recompile> {
    /// The graphs a call site compiled, in the order it first compiled them.
    #[derive(Default)]
    struct Site {
        order: Vec<u64>,
        seen: HashSet<u64>,
    }
    let mut sites: BTreeMap<u32, Site> = BTreeMap::new();
    // Each pair of graphs is compared once, however often the pair recurs (a graph compiled
    // again after its cache entry was evicted).
    let mut diffs: HashMap<(u64, u64), Arc<[GraphChange]>> = HashMap::new();
    let mut out = Vec::new();
    for s in p.syncs.iter().filter(|s| s.compiled() || s.persistent_hit) {
        let Some(hash) = s.hash else { continue };
        let site = sites.entry(s.location).or_default();
        if p.graphs.contains_key(&hash) {
            // The nearest of the most recent graphs of this site (a long storm is not compared
            // with every graph it ever compiled); the first found of equally near ones.
            let mut nearest: Option<(u64, Arc<[GraphChange]>, usize)> = None;
            let mut unexplained = None;
            for &h in site.order.iter().rev().take(16) {
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
            if let Some((previous, changes)) = found {
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
        }
    }
    out
}

/// `because a; b; c`: the changes as a clause, cut to a paragraph's length (every instance of a
/// finding repeats it).
fn because(changes: &[GraphChange]) -> String {
    if changes.is_empty() {
        return "(not compared with the graph before it: the profile asks for more comparisons \
                than one analysis makes)"
            .to_string();
    }
    let sentences: Vec<String> = changes.iter().map(|c| c.sentence()).collect();
    clip_to(&format!("because {}", sentences.join("; ")), 1024).into_owned()
}

/// Recompiles grouped by call site, each site's in sync order.
fn by_site<'a>(
    recompiles: impl Iterator<Item = &'a Recompile>,
) -> BTreeMap<u32, Vec<&'a Recompile>> {
    let mut by_site: BTreeMap<u32, Vec<&Recompile>> = BTreeMap::new();
    for r in recompiles {
        by_site.entry(r.location).or_default().push(r);
    }
    by_site
}

pub(super) fn recompiles(p: &Profile, all: &[Recompile]) -> Vec<Diagnostic> {
    // Spelled once per pair of graphs: many recompiles share one.
    let mut clauses: HashMap<(u64, u64), String> = HashMap::new();
    let mut clause = |r: &Recompile| {
        clauses.entry((r.previous, r.hash)).or_insert_with(|| because(&r.changes)).clone()
    };
    by_site(all.iter())
        .into_iter()
        .map(|(location, rs)| {
            let cost_ns = saturating_sum(rs.iter().map(|r| r.cost_ns));
            let mut seen: HashSet<&GraphChange> = HashSet::new();
            let changes: Vec<GraphChange> = rs
                .iter()
                .flat_map(|r| r.changes.iter())
                .filter(|c| seen.insert(c))
                .cloned()
                .collect();
            let instances: Vec<Instance> = rs
                .iter()
                .map(|r| Instance {
                    message: format!("step {}: recompiled {}", r.step, clause(r)),
                    sync: Some(r.sync),
                    step: Some(r.step),
                    cost_ns: r.cost_ns,
                })
                .collect();
            let site = p.location(location);
            let first = clause(rs[0]);
            let message = if rs.len() == 1 {
                format!("{site} compiled a second graph ({}) {first}", format_ns(cost_ns as f64))
            } else {
                format!(
                    "{site} recompiled {} ({}); the first time {first}",
                    super::times(rs.len()),
                    format_ns(cost_ns as f64)
                )
            };
            let mut graphs: Vec<u64> = rs.iter().flat_map(|r| [r.previous, r.hash]).collect();
            graphs.dedup();
            let advice = advice_for(&changes);
            let kind = Kind::Recompile;
            let d = Diagnostic::new(p, kind, location, message, advice, instances, graphs);
            Diagnostic { changes, ..d }
        })
        .collect()
}

fn advice_for(changes: &[GraphChange]) -> Option<String> {
    changes.iter().find_map(|c| match c {
        GraphChange::InputShape { from, to, .. } if from.dtype != to.dtype => {
            Some("keep the input's dtype the same from step to step (cast it once where it is created)".to_string())
        }
        GraphChange::InputShape { .. } => Some(
            "keep input shapes fixed: pad or bucket the varying dimension so a few graphs serve every size".to_string(),
        ),
        GraphChange::SyncedTensors { .. } => Some(
            "sync the same tensors every step: a tensor kept alive (or dropped) across the sync changes the graph's outputs".to_string(),
        ),
        GraphChange::Attribute { name, .. } => Some(format!(
            "the op's {name} is computed from a value that changes between steps (a Python number used as axes, dims or bounds); keep it fixed, or pass what varies as a tensor so the graph stays the same"
        )),
        GraphChange::Structure { .. } => Some(
            "the program records different ops on different steps (a Python/Rust branch on data, or a changing loop count); make the step's ops the same every time".to_string(),
        ),
        _ => None,
    })
}

/// For each call site with many compiles after warm-up: the dimension that varies, the values
/// seen, and the buckets that would serve them.
pub(super) fn storms(p: &Profile, t: &Thresholds, all: &[Recompile]) -> Vec<Diagnostic> {
    let mut budget = Budget::new(p);
    let mut out = Vec::new();
    for (location, rs) in by_site(all.iter().filter(|r| r.step > t.warmup_steps)) {
        if (rs.len() as u64) < t.storm_compiles {
            continue;
        }
        // Input dims that vary across the graphs compiled at this site, each graph read once
        // (and within the budget: the same graph can be compiled at any number of sites).
        let mut distinct = HashSet::new();
        let hashes: Vec<u64> = rs.iter().map(|r| r.hash).filter(|&h| distinct.insert(h)).collect();
        let graphs: Vec<&Graph> = if budget.spend(hashes.iter().copied()) {
            hashes.iter().filter_map(|h| p.graphs.get(h)).collect()
        } else {
            Vec::new()
        };
        let mut varying: BTreeMap<(usize, usize), BTreeSet<i64>> = BTreeMap::new();
        if let Some(first) = graphs.first() {
            for g in &graphs {
                if g.def.inputs.len() != first.def.inputs.len() {
                    continue;
                }
                for (i, (a, b)) in first.def.inputs.iter().zip(&g.def.inputs).enumerate() {
                    if a.shape.dims.len() != b.shape.dims.len() {
                        continue;
                    }
                    for (d, (&x, &y)) in a.shape.dims.iter().zip(&b.shape.dims).enumerate() {
                        if x != y {
                            varying.entry((i, d)).or_default().extend([x, y]);
                        }
                    }
                }
            }
            if !varying.is_empty() {
                for g in &graphs {
                    for (i, input) in g.def.inputs.iter().enumerate() {
                        for (d, v) in input.shape.dims.iter().enumerate() {
                            if let Some(values) = varying.get_mut(&(i, d)) {
                                values.insert(*v);
                            }
                        }
                    }
                }
            }
        }
        let cost_ns = saturating_sum(rs.iter().map(|r| r.cost_ns));
        let mean = cost_ns / rs.len().max(1) as u64;
        let site = p.location(location);
        // The widest-varying dimension is the one to fix.
        let worst = varying.iter().max_by_key(|(_, v)| v.len());
        let (message, advice) = match worst {
            Some((&(input, dim), values)) => {
                let seen: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                // A value past the largest power of two an i64 holds is its own bucket.
                let bucket = |v: i64| {
                    let up = (v.max(1) as u64).checked_next_power_of_two();
                    up.and_then(|b| i64::try_from(b).ok()).unwrap_or(v)
                };
                let buckets: BTreeSet<i64> = values.iter().map(|&v| bucket(v)).collect();
                let bucket_list: Vec<String> = buckets.iter().map(|v| v.to_string()).collect();
                let saved = values.len().saturating_sub(buckets.len());
                (
                    format!(
                        "{site} compiled {} graphs after warm-up (step {}+), {}: dimension {dim} of input {input} took {} values ({})",
                        rs.len(),
                        t.warmup_steps.saturating_add(1),
                        format_ns(cost_ns as f64),
                        values.len(),
                        seen.join(", ")
                    ),
                    format!(
                        "pad or bucket dimension {dim} of input {input} to {{{}}}: {} graphs instead of {}, saving {saved} compiles (about {})",
                        bucket_list.join(", "),
                        buckets.len(),
                        values.len(),
                        format_ns((saved as u64).saturating_mul(mean) as f64)
                    ),
                )
            }
            None => (
                format!(
                    "{site} compiled {} graphs after warm-up (step {}+), {}",
                    rs.len(),
                    t.warmup_steps.saturating_add(1),
                    format_ns(cost_ns as f64)
                ),
                "see the recompile explanations for what changes between these graphs".to_string(),
            ),
        };
        let instances = rs
            .iter()
            .map(|r| Instance {
                message: format!("step {}: compiled graph {:016x}", r.step, r.hash),
                sync: Some(r.sync),
                step: Some(r.step),
                cost_ns: r.cost_ns,
            })
            .collect();
        let graphs = rs.iter().map(|r| r.hash).collect();
        let kind = Kind::RecompileStorm;
        out.push(Diagnostic::new(p, kind, location, message, Some(advice), instances, graphs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Cause, Record};

    /// A site that compiles graphs 1, 2, 3: two recompiles.
    fn profile() -> Profile {
        let mut records = Vec::new();
        for (sync, hash) in [(1, 1), (2, 2), (3, 3)] {
            let shape = ShapeRec { dtype: "f32".into(), dims: vec![hash as i64] };
            let def = GraphDef {
                hash,
                nodes: 0,
                ops: Vec::new(),
                inputs: Vec::new(),
                outputs: vec![shape],
                node_defs: Vec::new(),
            };
            records.extend([
                Record::Graph(Box::new(def)),
                Record::SyncBegin { t: sync, sync, cause: Cause::StepEnd, location: 0, tensors: 1 },
                Record::GraphBuilt { t: sync, sync, hash, dur: 1 },
                Record::Compiled { t: sync, sync, hash, dur: 1, memory: None, cost: None },
            ]);
        }
        Profile::from_records(records)
    }

    #[test]
    fn recompiles_past_the_budget_are_listed_unexplained() {
        let p = profile();
        let explained = find_recompiles(&p);
        assert_eq!(explained.len(), 2);
        assert!(explained.iter().all(|r| !r.changes.is_empty()));
        let unexplained =
            find_recompiles_within(&p, Budget { left: 0, sizes: Budget::new(&p).sizes });
        assert_eq!(unexplained.len(), 2);
        assert!(unexplained.iter().all(|r| r.changes.is_empty()));
        assert_eq!(
            (unexplained[1].hash, unexplained[1].previous),
            (3, 2),
            "the latest earlier graph"
        );
        let findings = recompiles(&p, &unexplained);
        assert!(findings[0].message.contains("not compared"), "{}", findings[0].message);
    }
}
