//! Why a call site compiled again: the structural difference between a new graph and the
//! nearest graph the same site compiled before; and storms of such recompiles after warm-up.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Diagnostic, Instance, Kind, Thresholds};
use crate::metrics::format_ns;
use crate::profile::{Graph, Profile};
use crate::record::{NodeRec, ShapeRec};

/// One difference between two versions of a graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// What changed from graph `a` to graph `b`.
pub fn diff_graphs(p: &Profile, a: &Graph, b: &Graph) -> Vec<GraphChange> {
    let (da, db) = (&a.def, &b.def);
    // Device data only: host scalars are inputs too, but a change in them shows in the nodes (a
    // dtype) or is the scalar pattern below.
    let data = |d: &'_ crate::record::GraphDef| -> Vec<crate::record::InputRec> {
        d.inputs.iter().filter(|i| i.data).cloned().collect()
    };
    let (ia, ib) = (data(da), data(db));
    let mut changes = Vec::new();
    if ia.len() == ib.len() {
        for (i, (x, y)) in ia.iter().zip(&ib).enumerate() {
            if x.shape != y.shape {
                changes.push(GraphChange::InputShape {
                    input: i,
                    from: x.shape.clone(),
                    to: y.shape.clone(),
                    created_at: p.location(y.location),
                });
            }
        }
    } else {
        changes.push(GraphChange::InputCount { from: ia.len(), to: ib.len() });
    }
    if da.outputs != db.outputs {
        let mut left: Vec<ShapeRec> = da.outputs.clone();
        let mut joined = Vec::new();
        for o in &db.outputs {
            match left.iter().position(|l| l == o) {
                Some(i) => {
                    left.remove(i);
                }
                None => joined.push(o.clone()),
            }
        }
        if !joined.is_empty() || !left.is_empty() || da.outputs.len() != db.outputs.len() {
            changes.push(GraphChange::SyncedTensors {
                from: da.outputs.len(),
                to: db.outputs.len(),
                joined,
                left,
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
                for ((name, from), (_, to)) in x.attrs.iter().zip(&y.attrs) {
                    if from != to {
                        changes.push(GraphChange::Attribute {
                            node,
                            op: y.op.clone(),
                            name: name.clone(),
                            from: from.to_string(),
                            to: to.to_string(),
                            location: location.clone(),
                        });
                    }
                }
            }
            _ => {
                let text = |n: Option<&NodeRec>| n.map_or_else(|| NO_NODE.into(), |n| n.text(node));
                changes.push(GraphChange::Structure { node, from: text(x), to: text(y), location });
            }
        }
    }
    if ia.len() == ib.len() {
        for (i, (x, y)) in ia.iter().zip(&ib).enumerate() {
            if x.donated != y.donated {
                changes.push(GraphChange::Donation { input: i, donated: y.donated });
            }
        }
    }
    if changes.is_empty() {
        changes.push(GraphChange::ScalarPattern);
    }
    changes
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
    pub changes: Vec<GraphChange>,
}

/// Every recompile of the profile, in sync order. It diffs graphs, so an analysis computes it
/// once ([`crate::Analysis::recompiles`]) for the findings and the graph table alike.
pub fn find_recompiles(p: &Profile) -> Vec<Recompile> {
    let mut compiled_at: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut out = Vec::new();
    for s in p.syncs.iter().filter(|s| s.compiled() || s.persistent_hit) {
        let Some(hash) = s.hash else { continue };
        let earlier = compiled_at.entry(s.location).or_default();
        if let Some(graph) = p.graphs.get(&hash) {
            // The nearest of the most recent graphs of this site (a long storm is not compared
            // with every graph it ever compiled).
            let nearest = earlier
                .iter()
                .rev()
                .take(16)
                .filter_map(|h| p.graphs.get(h).map(|g| (h, diff_graphs(p, g, graph))))
                .min_by_key(|(_, c)| distance(c));
            if let Some((&previous, changes)) = nearest {
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
        if !earlier.contains(&hash) {
            earlier.push(hash);
        }
    }
    out
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
    by_site(all.iter())
        .into_iter()
        .map(|(location, rs)| {
            let cost_ns: u64 = rs.iter().map(|r| r.cost_ns).sum();
            let mut changes: Vec<GraphChange> = Vec::new();
            for c in rs.iter().flat_map(|r| r.changes.iter()) {
                if !changes.contains(c) {
                    changes.push(c.clone());
                }
            }
            let instances: Vec<Instance> = rs
                .iter()
                .map(|r| Instance {
                    message: format!(
                        "step {}: recompiled because {}",
                        r.step,
                        r.changes.iter().map(|c| c.sentence()).collect::<Vec<_>>().join("; ")
                    ),
                    sync: Some(r.sync),
                    step: Some(r.step),
                    cost_ns: r.cost_ns,
                })
                .collect();
            let site = p.location(location);
            let first = rs[0].changes.iter().map(|c| c.sentence()).collect::<Vec<_>>().join("; ");
            let message = if rs.len() == 1 {
                format!(
                    "{site} compiled a second graph ({}) because {first}",
                    format_ns(cost_ns as f64)
                )
            } else {
                format!(
                    "{site} recompiled {} ({}); the first time because {first}",
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
    let mut out = Vec::new();
    for (location, rs) in by_site(all.iter().filter(|r| r.step > t.warmup_steps)) {
        if (rs.len() as u64) < t.storm_compiles {
            continue;
        }
        // Input dims that vary across the graphs compiled at this site.
        let graphs: Vec<&Graph> = rs.iter().filter_map(|r| p.graphs.get(&r.hash)).collect();
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
            for g in &graphs {
                for (&(i, d), values) in varying.iter_mut() {
                    if let Some(v) = g.def.inputs.get(i).and_then(|inp| inp.shape.dims.get(d)) {
                        values.insert(*v);
                    }
                }
            }
        }
        let cost_ns: u64 = rs.iter().map(|r| r.cost_ns).sum();
        let mean = cost_ns / rs.len().max(1) as u64;
        let site = p.location(location);
        // The widest-varying dimension is the one to fix.
        let worst = varying.iter().max_by_key(|(_, v)| v.len());
        let (message, advice) = match worst {
            Some((&(input, dim), values)) => {
                let seen: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                let buckets: BTreeSet<i64> =
                    values.iter().map(|&v| (v.max(1) as u64).next_power_of_two() as i64).collect();
                let bucket_list: Vec<String> = buckets.iter().map(|v| v.to_string()).collect();
                let saved = values.len().saturating_sub(buckets.len());
                (
                    format!(
                        "{site} compiled {} graphs after warm-up (step {}+), {}: dimension {dim} of input {input} took {} values ({})",
                        rs.len(),
                        t.warmup_steps + 1,
                        format_ns(cost_ns as f64),
                        values.len(),
                        seen.join(", ")
                    ),
                    format!(
                        "pad or bucket dimension {dim} of input {input} to {{{}}}: {} graphs instead of {}, saving {saved} compiles (about {})",
                        bucket_list.join(", "),
                        buckets.len(),
                        values.len(),
                        format_ns((saved as u64 * mean) as f64)
                    ),
                )
            }
            None => (
                format!(
                    "{site} compiled {} graphs after warm-up (step {}+), {}",
                    rs.len(),
                    t.warmup_steps + 1,
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
