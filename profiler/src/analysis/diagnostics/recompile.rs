//! Why a call site compiled again: the structural difference between a new graph and the
//! nearest graph the same site compiled before; and storms of such recompiles after warm-up.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::{Diagnostic, Instance, Kind, Thresholds};
use crate::profile::{Graph, Profile};
use crate::record::{
    clip, clip_to, AttrValue, GraphDef, InputName, InputRec, NodeRec, ShapeRec, LISTED,
};
use crate::util::format_ns;
use crate::util::saturating_sum;

/// One difference between two versions of a graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum GraphChange {
    /// An input changed shape or dtype. `input` is its position (the views highlight it); the
    /// words name it by `name` and `created_at`.
    InputShape {
        input: usize,
        from: ShapeRec,
        to: ShapeRec,
        created_at: String,
        name: Option<InputName>,
    },
    /// The graph has a different number of inputs.
    InputCount { from: usize, to: usize },
    /// Different tensors were synced (outputs joined or left).
    SyncedTensors { from: usize, to: usize, joined: Vec<ShapeRec>, left: Vec<ShapeRec> },
    /// A tensor made on the device (randn, full, arange, ...) from unchanged operands has a
    /// different shape: its size came from a Python number.
    NodeShape { node: usize, op: String, from: ShapeRec, to: ShapeRec, location: String },
    /// The op structure diverged at a node.
    Structure { node: usize, from: String, to: String, location: String },
    /// The same op on the same operands, with one attribute changed (its axes, permutation,
    /// slice bounds ...).
    Attribute { node: usize, op: String, name: String, from: String, to: String, location: String },
    /// An input's buffer is donated in one version and not the other.
    Donation { input: usize, donated: bool, created_at: String, name: Option<InputName> },
    /// Same ops and shapes: only the pattern of equal host scalars at one line differs.
    ScalarPattern,
}

impl GraphChange {
    /// The change in words.
    pub fn sentence(&self) -> String {
        match self {
            GraphChange::InputShape { from, to, created_at, name, .. } => format!(
                "{} changed from {from} to {to} ({})",
                input_name(name.as_ref(), created_at),
                shape_difference(from, to)
            ),
            GraphChange::NodeShape { op, from, to, location, .. } => format!(
                "the tensor made by `{op}` at {location} is {to} instead of {from} ({})",
                shape_difference(from, to)
            ),
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
            GraphChange::Structure { from, to, location, .. } => match (from.as_str(), to.as_str()) {
                (_, NO_NODE) => format!(
                    "the graph is shorter: it ends where the earlier one went on with {from} at {location}"
                ),
                (NO_NODE, _) => {
                    format!("the graph is longer: it goes on with {to} at {location}, where the earlier one ended")
                }
                _ => format!("the ops differ from {location} on: {to} where the earlier graph had {from}"),
            },
            GraphChange::Attribute { op, name, from, to, location, .. } => {
                format!("`{op}` at {location} changed its {name} from {from} to {to}")
            }
            GraphChange::Donation { donated, created_at, name, .. } => {
                let input = input_name(name.as_ref(), created_at);
                if *donated {
                    format!("{input} is now donated to the graph's outputs (nothing else holds it any more)")
                } else {
                    format!("{input} is no longer donated to the graph's outputs (something still holds it)")
                }
            }
            GraphChange::ScalarPattern => {
                "the same ops and shapes, but host scalars recorded at one line that were equal now differ (or the reverse)".to_string()
            }
        }
    }
}

/// What differs between two shapes, in words: "dimension 0 went from 32 to 17".
pub fn shape_difference(from: &ShapeRec, to: &ShapeRec) -> String {
    let mut parts = Vec::new();
    if from.dtype != to.dtype {
        parts.push(format!("dtype went from {} to {}", from.dtype, to.dtype));
    }
    if from.dims.len() != to.dims.len() {
        parts.push(format!("rank went from {} to {}", from.dims.len(), to.dims.len()));
    } else {
        for (d, (a, b)) in from.dims.iter().zip(&to.dims).enumerate() {
            if a != b {
                parts.push(format!("dimension {d} went from {a} to {b}"));
            }
        }
    }
    if parts.is_empty() {
        parts.push("same shape".to_string());
    }
    parts.join(", ")
}

/// Stands for a node one version of a graph does not have.
const NO_NODE: &str = "(no node)";

/// Whether two nodes are the same op on the same operands, shapes aside (a shape that changes
/// is explained by the inputs that changed it).
fn same_op(x: &NodeRec, y: &NodeRec) -> bool {
    x.op == y.op && x.inputs == y.inputs && x.attrs == y.attrs
}

/// A node's operand, as [`same_but_scalar_operands`] compares them.
#[derive(PartialEq)]
enum Operand<'a> {
    /// A node that is not a host scalar, by its position among such nodes.
    Node(usize),
    /// A host scalar (broadcast or not) of this shape, whichever node holds it.
    Scalar(&'a ShapeRec),
}

/// Whether two graphs are the same but for which ops share a host scalar operand: the engine
/// records one operand for equal scalars at a line, so values that stop (or start) being equal
/// give a graph with more (or fewer) scalar nodes and otherwise the same ops.
fn same_but_scalar_operands(a: &GraphDef, b: &GraphDef) -> bool {
    fn without_scalars(d: &GraphDef) -> Vec<(&NodeRec, Vec<Operand<'_>>)> {
        let mut scalar = vec![false; d.node_defs.len()];
        let mut position = vec![0; d.node_defs.len()];
        let mut kept = Vec::new();
        for (i, n) in d.node_defs.iter().enumerate() {
            let of_scalar = |&o: &u32| scalar.get(o as usize).copied().unwrap_or(false);
            scalar[i] = n.op == "scalar"
                || (n.op == "broadcast_in_dim" && n.inputs.len() == 1 && of_scalar(&n.inputs[0]));
            if scalar[i] {
                continue;
            }
            position[i] = kept.len();
            let operands = n
                .inputs
                .iter()
                .map(|&o| match d.node_defs.get(o as usize) {
                    Some(m) if scalar[o as usize] => Operand::Scalar(&m.shape),
                    _ => Operand::Node(position.get(o as usize).copied().unwrap_or(usize::MAX)),
                })
                .collect();
            kept.push((n, operands));
        }
        kept
    }
    let same = |(x, xs): &(&NodeRec, Vec<Operand>), (y, ys): &(&NodeRec, Vec<Operand>)| {
        x.op == y.op && x.attrs == y.attrs && x.shape == y.shape && xs == ys
    };
    let (x, y) = (without_scalars(a), without_scalars(b));
    x.len() == y.len() && x.iter().zip(&y).all(|(m, n)| same(m, n))
}

/// A graph input as findings name it: by the name the front end gave it (a parameter's), else
/// by the variable and the line that made it.
fn input_name(name: Option<&InputName>, created_at: &str) -> String {
    match name {
        Some(InputName::Given(name)) => format!("`{name}`"),
        Some(InputName::Variable(v)) => format!("`{v}` made at {created_at}"),
        None => format!("the tensor made at {created_at}"),
    }
}

/// A node in words, for the place two graphs diverge: its op and what it gives (an input or a
/// host scalar as such, not as the IR's `parameter` or `scalar`).
fn node_words(n: &NodeRec) -> String {
    match n.op.as_str() {
        "parameter" => format!("an input of {}", n.shape),
        "scalar" => format!("a host scalar of {}", n.shape),
        op => format!("`{}` giving {}", clip(op), n.shape),
    }
}

/// For each input of the new graph, the input of the old one it stands for: the one made at the
/// same line (the k-th of that line for the k-th), else the next one left, in order. Inputs are
/// ordered by when their tensors were made, so a batch made anew (another dtype) moves past the
/// parameters: matched by position, a dtype change at one line read as inputs swapping shapes.
fn paired_inputs(xs: &[&InputRec], ys: &[&InputRec]) -> Vec<usize> {
    let mut by_line: HashMap<u32, std::collections::VecDeque<usize>> = HashMap::new();
    for (i, x) in xs.iter().enumerate() {
        by_line.entry(x.location).or_default().push_back(i);
    }
    let mut taken = vec![false; xs.len()];
    let mut pairs: Vec<Option<usize>> = ys
        .iter()
        .map(|y| {
            let i = by_line.get_mut(&y.location)?.pop_front()?;
            taken[i] = true;
            Some(i)
        })
        .collect();
    let mut left = (0..xs.len()).filter(|&i| !taken[i]);
    for pair in pairs.iter_mut().filter(|p| p.is_none()) {
        *pair = left.next();
    }
    pairs.into_iter().enumerate().map(|(j, p)| p.unwrap_or(j)).collect()
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
    // Each input of `b` with the input of `a` it stands for (see `paired_inputs`).
    let (xs, ys): (Vec<&InputRec>, Vec<&InputRec>) = (data(da).collect(), data(db).collect());
    let pairs: Vec<(usize, &InputRec, &InputRec)> = if na == nb {
        paired_inputs(&xs, &ys).into_iter().enumerate().map(|(j, i)| (j, xs[i], ys[j])).collect()
    } else {
        Vec::new()
    };
    if na == nb {
        let changed = pairs.iter().filter(|(_, x, y)| x.shape != y.shape);
        for &(j, x, y) in changed.take(LISTED) {
            changes.push(GraphChange::InputShape {
                input: j,
                from: x.shape.clone(),
                to: y.shape.clone(),
                created_at: p.location(y.location),
                name: y.name.clone(),
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
    // The same ops on other host scalars, equal ones shared: the scalar pattern below (the
    // positions of the nodes then differ, so neither is compared node by node).
    let sharing = first_diff.is_some() && same_but_scalar_operands(da, db);
    let first_diff = first_diff.filter(|_| !sharing);
    // A node made on the device whose shape changed while its operands did not: the size came
    // from the host (`randn(bs, 784)`). Later differences follow from it.
    let limit = first_diff.unwrap_or(da.node_defs.len().min(db.node_defs.len()));
    // Only when no input explains it: a node's shape follows from its inputs' otherwise.
    let inputs_changed = changes
        .iter()
        .any(|c| matches!(c, GraphChange::InputShape { .. } | GraphChange::InputCount { .. }));
    let source = (0..limit).filter(|_| !inputs_changed && !sharing).find(|&i| {
        let (x, y) = (&da.node_defs[i], &db.node_defs[i]);
        x.op != "parameter"
            && x.shape != y.shape
            && x.inputs.iter().all(|&o| {
                da.node_defs.get(o as usize).map(|n| &n.shape)
                    == db.node_defs.get(o as usize).map(|n| &n.shape)
            })
    });
    if let Some(node) = source {
        let (x, y) = (&da.node_defs[node], &db.node_defs[node]);
        changes.push(GraphChange::NodeShape {
            node,
            op: y.op.clone(),
            from: x.shape.clone(),
            to: y.shape.clone(),
            location: p.location(y.location),
        });
    } else if let Some(node) = first_diff {
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
                let text = |n: Option<&NodeRec>| n.map_or_else(|| NO_NODE.into(), node_words);
                changes.push(GraphChange::Structure { node, from: text(x), to: text(y), location });
            }
        }
    }
    if na == nb {
        let changed = pairs.iter().filter(|(_, x, y)| x.donated != y.donated);
        for &(i, _, y) in changed.take(LISTED) {
            changes.push(GraphChange::Donation {
                input: i,
                donated: y.donated,
                created_at: p.location(y.location),
                name: y.name.clone(),
            });
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
            GraphChange::NodeShape { .. } => 2,
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
    // A torch.compile graph's compile is Dynamo's to explain (a guard that failed, `compiled.rs`):
    // graphs captured at one call are its forward, backward and the pieces between breaks.
    let engine_compiles = p.syncs.iter().filter(|s| s.cause != crate::record::Cause::CompiledGraph);
    for s in engine_compiles.filter(|s| s.compiled() || s.persistent_hit) {
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

/// What a recompile's changes have in common with others of the same cause: the change's
/// subject without its values ("dimension 0 of the tensor made at x.py:3").
fn cause_of(changes: &[GraphChange]) -> String {
    let Some(c) = changes.first() else { return because(changes) };
    if let Some((subject, from, to)) = reshaped(c) {
        return format!("because {subject} changed its {}", varying_part(from, to));
    }
    let cause = match c {
        GraphChange::Attribute { op, name, location, .. } => {
            format!("`{op}` at {location} changed its {name}")
        }
        GraphChange::Structure { location, .. } => {
            format!("the op structure diverged (at {location})")
        }
        GraphChange::SyncedTensors { .. } => "different tensors were synced".to_string(),
        GraphChange::InputCount { .. } => "the graph took a different number of inputs".to_string(),
        GraphChange::Donation { donated, created_at, name, .. } => {
            let input = input_name(name.as_ref(), created_at);
            if *donated {
                format!("{input} is now donated to the graph's outputs")
            } else {
                format!("{input} is no longer donated to the graph's outputs (something still holds it)")
            }
        }
        GraphChange::ScalarPattern => "the pattern of equal host scalars changed".to_string(),
        // Named by `reshaped` above.
        GraphChange::InputShape { .. } | GraphChange::NodeShape { .. } => String::new(),
    };
    format!("because {cause}")
}

/// A change of a tensor's shape: the tensor in words (a device input by the line that made it,
/// or a tensor made on the device), and its two shapes.
fn reshaped(c: &GraphChange) -> Option<(String, &ShapeRec, &ShapeRec)> {
    match c {
        GraphChange::InputShape { from, to, created_at, name, .. } => {
            Some((input_name(name.as_ref(), created_at), from, to))
        }
        GraphChange::NodeShape { op, from, to, location, .. } => {
            Some((format!("the tensor made by `{op}` at {location}"), from, to))
        }
        _ => None,
    }
}

/// "dimension 0", "dtype", "rank": what varies between two shapes.
fn varying_part(from: &ShapeRec, to: &ShapeRec) -> String {
    if from.dtype != to.dtype {
        return "dtype".to_string();
    }
    if from.dims.len() != to.dims.len() {
        return "rank".to_string();
    }
    let dims: Vec<String> = (0..from.dims.len())
        .filter(|&d| from.dims[d] != to.dims[d])
        .map(|d| d.to_string())
        .collect();
    match dims.len() {
        0 => "shape".to_string(),
        1 => format!("dimension {}", dims[0]),
        _ => format!("dimensions {}", dims.join(", ")),
    }
}

/// The values a recompile's first change took ("32 -> 17" as the set {32, 17}), for the
/// dimension or dtype its cause names.
fn values_of(changes: &[GraphChange]) -> Vec<String> {
    let shapes = match changes.first() {
        Some(
            GraphChange::InputShape { from, to, .. } | GraphChange::NodeShape { from, to, .. },
        ) => (from, to),
        Some(GraphChange::Attribute { from, to, .. }) => return vec![from.clone(), to.clone()],
        _ => return Vec::new(),
    };
    let (from, to) = shapes;
    if from.dtype != to.dtype {
        return vec![from.dtype.clone(), to.dtype.clone()];
    }
    if from.dims.len() != to.dims.len() {
        return vec![from.to_string(), to.to_string()];
    }
    let differing: Vec<usize> =
        (0..from.dims.len()).filter(|&d| from.dims[d] != to.dims[d]).collect();
    let pick = |s: &ShapeRec| {
        let v: Vec<String> = differing.iter().map(|&d| s.dims[d].to_string()).collect();
        if v.len() == 1 {
            v[0].clone()
        } else {
            format!("({})", v.join(", "))
        }
    };
    vec![pick(from), pick(to)]
}

/// A recompile that is warm-up rather than a problem: the site's first graph also computed
/// tensors made before the loop (initialization), or the optimizer state that its first update
/// created: which of the two, and the lines only the first graph had.
struct WarmUp {
    kind: Kind,
    lines: Vec<u32>,
}

/// Whether the first recompile at a site is warm-up: the new graph is the first one without the
/// lines that ran once, and takes the tensors they made as inputs.
/// The lines that recorded each graph's ops (its parameters and host scalars aside), computed
/// once per graph.
#[derive(Default)]
struct GraphLines(HashMap<u64, Arc<BTreeSet<u32>>>);

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
fn same_but_donation(p: &Profile, a: u64, b: u64) -> bool {
    let (Some(a), Some(b)) = (p.graphs.get(&a), p.graphs.get(&b)) else { return false };
    let (a, b) = (&a.def, &b.def);
    let inputs_alike = a.inputs.len() == b.inputs.len()
        && a.inputs
            .iter()
            .zip(&b.inputs)
            .all(|(x, y)| x.shape == y.shape && x.data == y.data && x.location == y.location);
    inputs_alike && a.outputs == b.outputs && a.node_defs == b.node_defs
}

fn warm_up(
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
    let mut new_inputs = BTreeSet::new();
    for i in b.inputs.iter().filter(|i| i.data) {
        match before.get_mut(&i.location) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                new_inputs.insert(i.location);
            }
        }
    }
    if new_inputs.is_empty() {
        return None;
    }
    // Initialization: the inputs were made at lines only the first graph ran. State: they are
    // made by lines every step runs (the update), from what only the first graph created.
    if !only_first.is_empty() {
        let kind = if new_inputs.iter().any(|l| only_first.contains(l)) {
            Kind::Warmup
        } else if new_inputs.iter().all(|l| lb.contains(l)) {
            Kind::LazyState
        } else {
            return None;
        };
        return Some(WarmUp { kind, lines: only_first });
    }
    // One line both creates the state and updates it (`opt.step()` of torch.optim, whose
    // first call makes the moments): the first graph ran the same lines, and the new graph only
    // adds device inputs, made at those lines, that it then keeps.
    let data = |d: &GraphDef| d.inputs.iter().filter(|i| i.data).count();
    if data(b) > data(a) && new_inputs.iter().all(|l| la.contains(l) && lb.contains(l)) {
        return Some(WarmUp { kind: Kind::LazyState, lines: new_inputs.into_iter().collect() });
    }
    None
}

fn lines_text(p: &Profile, lines: &[u32]) -> String {
    let mut names: Vec<String> = lines.iter().map(|&l| p.location(l)).collect();
    names.dedup();
    if names.len() > 4 {
        let more = names.len() - 3;
        names.truncate(3);
        names.push(format!("{more} more lines"));
    }
    names.join(", ")
}

fn warm_up_diagnostic(p: &Profile, r: &Recompile, w: &WarmUp) -> Diagnostic {
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

/// The recompile findings of every call site: warm-up (its first recompile, when that is what
/// it is), then a storm when compiles keep coming after warm-up, else the recompiles explained.
pub(super) fn findings(p: &Profile, t: &Thresholds, all: &[Recompile]) -> Vec<Diagnostic> {
    // Each site's syncs, and each graph's lines, gathered once: linear in the profile.
    let mut syncs_at: HashMap<u32, Vec<&crate::profile::Sync>> = HashMap::new();
    for s in &p.syncs {
        syncs_at.entry(s.location).or_default().push(s);
    }
    let mut lines = GraphLines::default();
    let mut out = Vec::new();
    // One cause is one finding: sites whose recompiles have the same causes (a batch of another
    // size makes both the value read inside the step and the step's end compile anew) are
    // reported together. Each entry: the causes, the sites, their recompiles.
    let mut by_cause: Vec<(Vec<String>, Vec<u32>, Vec<&Recompile>)> = Vec::new();
    for (location, mut rs) in by_site(all.iter()) {
        let at = syncs_at.get(&location).map_or(&[][..], |v| &v[..]);
        if let Some(w) = warm_up(p, rs[0], at, &mut lines) {
            out.push(warm_up_diagnostic(p, rs[0], &w));
            rs.remove(0);
        }
        if rs.is_empty() {
            continue;
        }
        let late = rs.iter().filter(|r| r.step > t.warmup_steps).count() as u64;
        if late >= t.storm_compiles {
            out.push(storm(p, t, location, &rs));
            continue;
        }
        let mut causes: Vec<String> =
            rs.iter().map(|r| cause_of(&unnumbered(&r.changes))).collect();
        causes.sort();
        causes.dedup();
        match by_cause.iter_mut().find(|g| g.0 == causes) {
            Some((_, sites, same)) => {
                sites.push(location);
                same.extend(rs);
            }
            None => by_cause.push((causes, vec![location], rs)),
        }
    }
    for (_, sites, mut rs) in by_cause {
        rs.sort_by_key(|r| r.sync);
        out.push(recompiles(p, &sites, &rs));
    }
    out
}

/// `changes` as two graphs share them: a graph input is numbered in each graph apart, the same
/// tensor often under two numbers, so the numbers are left out.
fn unnumbered(changes: &[GraphChange]) -> Vec<GraphChange> {
    let mut changes = changes.to_vec();
    for c in &mut changes {
        if let GraphChange::InputShape { input, .. } | GraphChange::Donation { input, .. } = c {
            *input = 0;
        }
    }
    changes
}

/// The recompiles of one or more sites, of the same causes, grouped by cause. The finding is at
/// the site whose recompiles cost most; the others are named in its message.
fn recompiles(p: &Profile, sites: &[u32], rs: &[&Recompile]) -> Diagnostic {
    let cost_at = |l: u32| saturating_sum(rs.iter().filter(|r| r.location == l).map(|r| r.cost_ns));
    let location =
        sites.iter().copied().max_by_key(|&l| (cost_at(l), std::cmp::Reverse(l))).unwrap_or(0);
    let cost_ns = saturating_sum(rs.iter().map(|r| r.cost_ns));
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
    let mut named = vec![location];
    named.extend(sites.iter().copied().filter(|&l| l != location));
    let site = named.iter().map(|&l| p.location(l)).collect::<Vec<_>>().join(" and ");
    let first = because(&rs[0].changes);
    // One recompile at each site, for the same change: said once, with its shapes.
    let one_each = rs.len() == sites.len()
        && rs.iter().all(|r| unnumbered(&r.changes) == unnumbered(&rs[0].changes));
    let message = if rs.len() == 1 {
        format!("{site} compiled another graph ({}) {first}", format_ns(cost_ns as f64))
    } else if one_each {
        format!("{site} each compiled another graph ({}) {first}", format_ns(cost_ns as f64))
    } else {
        // Grouped by cause, most frequent first, each with the values it took.
        let mut groups: Vec<(String, usize, Vec<String>)> = Vec::new();
        for r in rs {
            let cause = cause_of(&r.changes);
            let values = values_of(&r.changes);
            match groups.iter_mut().find(|g| g.0 == cause) {
                Some(g) => {
                    g.1 += 1;
                    for v in values {
                        if !g.2.contains(&v) {
                            g.2.push(v);
                        }
                    }
                }
                None => groups.push((cause, 1, values)),
            }
        }
        groups.sort_by_key(|g| std::cmp::Reverse(g.1));
        let causes: Vec<String> = groups
            .iter()
            .map(|(cause, n, values)| {
                let mut s = format!("{} {cause}", super::times(*n));
                if !values.is_empty() {
                    s += &format!(" (values seen: {})", values.join(", "));
                }
                s
            })
            .collect();
        format!(
            "{site} recompiled {} ({}): {}",
            super::times(rs.len()),
            format_ns(cost_ns as f64),
            causes.join("; ")
        )
    };
    let mut graphs: Vec<u64> = rs.iter().flat_map(|r| [r.previous, r.hash]).collect();
    graphs.dedup();
    let advice = advice_for(&changes);
    let d = Diagnostic::new(p, Kind::Recompile, location, message, advice, instances, graphs);
    Diagnostic { changes, ..d }
}

/// The one dimension in which `to` is larger than `from` (same dtype and rank otherwise).
fn grown(from: &ShapeRec, to: &ShapeRec) -> Option<usize> {
    if from.dtype != to.dtype || from.dims.len() != to.dims.len() {
        return None;
    }
    let mut differing = from.dims.iter().zip(&to.dims).enumerate().filter(|(_, (a, b))| a != b);
    match (differing.next(), differing.next()) {
        (Some((d, (a, b))), None) if b > a => Some(d),
        _ => None,
    }
}

/// What to do about a tensor that grows step by step, `subject` naming it.
fn growth_advice(subject: &str, dim: usize) -> String {
    format!(
        "dimension {dim} of {subject} grows step by step (a sequence concatenated to, a cache appended to), so every length is a new graph: preallocate it at its largest length and write into it, pad it to a fixed maximum, or use a static cache"
    )
}

fn advice_for(changes: &[GraphChange]) -> Option<String> {
    changes.iter().find_map(|c| match c {
        GraphChange::InputShape { from, to, .. } if from.dtype != to.dtype => {
            Some("keep the input's dtype the same from step to step (cast it once where it is created)".to_string())
        }
        GraphChange::InputShape { from, to, created_at, name, .. } => Some(match grown(from, to) {
            Some(dim) => growth_advice(&input_name(name.as_ref(), created_at), dim),
            // Only the batch dimension, smaller: the last batch of an epoch.
            None if grown(to, from) == Some(0) => "the batch got smaller (the ragged last batch of an epoch): drop it (`DataLoader(drop_last=True)`) or pad it to the full batch size".to_string(),
            None => "keep input shapes fixed: pad or bucket the varying dimension so a few graphs serve every size".to_string(),
        }),
        GraphChange::NodeShape { op, from, to, location, .. } => Some(match grown(from, to) {
            Some(dim) => growth_advice(&format!("the tensor made by `{op}` at {location}"), dim),
            None => format!(
                "the size of the tensor made at {location} comes from a Python number that changes; keep it fixed, or pad or bucket it so a few graphs serve every size"
            ),
        }),
        GraphChange::Donation { donated: false, created_at, name, .. } => Some(format!(
            "{} is still held when the step syncs (a reference kept across the step, such as `p.detach()` kept for an average or a log), so its buffer cannot take the new value and the step compiled again without reusing it: keep a copy (`.clone()`) instead, or let go of it before the step ends",
            input_name(name.as_ref(), created_at)
        )),
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

/// A call site that keeps compiling after warm-up: the dimension (or attribute) that varies,
/// the values seen, and the buckets that would serve them.
fn storm(p: &Profile, t: &Thresholds, location: u32, rs: &[&Recompile]) -> Diagnostic {
    let late = rs.iter().filter(|r| r.step > t.warmup_steps).count();
    // The dimensions that vary, of device inputs (by the line that made them) and of
    // tensors made on the device from a Python number, with every value they took.
    let mut varying: BTreeMap<(String, usize), BTreeSet<i64>> = BTreeMap::new();
    // Dimensions that only ever grew from one graph to the next.
    let mut shrank: BTreeSet<(String, usize)> = BTreeSet::new();
    let mut attributes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in rs.iter().flat_map(|r| r.changes.iter()) {
        if let GraphChange::Attribute { op, name, from, to, location, .. } = c {
            let values =
                attributes.entry(format!("the {name} of `{op}` at {location}")).or_default();
            values.insert(from.clone());
            values.insert(to.clone());
            continue;
        }
        let Some((subject, from, to)) = reshaped(c) else { continue };
        if from.dims.len() != to.dims.len() {
            continue;
        }
        for (d, (&x, &y)) in from.dims.iter().zip(&to.dims).enumerate() {
            if x != y {
                varying.entry((subject.clone(), d)).or_default().extend([x, y]);
            }
            if y < x {
                shrank.insert((subject.clone(), d));
            }
        }
    }
    let cost_ns = saturating_sum(rs.iter().map(|r| r.cost_ns));
    let mean = cost_ns / rs.len().max(1) as u64;
    let site = p.location(location);
    // The widest-varying dimension is the one to fix (the first made, of those that vary most).
    let worst = varying.iter().rev().max_by_key(|(_, v)| v.len());
    let worst_attribute = attributes.iter().max_by_key(|(_, v)| v.len());
    let (message, advice) = match (worst, worst_attribute) {
        (Some(((first, dim), values)), _) => {
            // Tensors whose dimension took the same values vary for one cause (a batch and its
            // labels): one finding names them all.
            let alike: Vec<&str> = varying
                .iter()
                .filter(|((_, d), v)| d == dim && *v == values)
                .map(|((s, _), _)| s.as_str())
                .collect();
            let subject = &if alike.len() > 1 { alike.join(" and of ") } else { first.clone() };
            let seen: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            let buckets: BTreeSet<i64> =
                values.iter().map(|&v| (v.max(1) as u64).next_power_of_two() as i64).collect();
            let bucket_list: Vec<String> = buckets.iter().map(|v| v.to_string()).collect();
            let saved = values.len().saturating_sub(buckets.len());
            (
                format!(
                    "{site} compiled {} more graphs, {} of them after warm-up (step {}+), {}: dimension {dim} of {subject} took {} values ({})",
                    rs.len(),
                    late,
                    t.warmup_steps.saturating_add(1),
                    format_ns(cost_ns as f64),
                    values.len(),
                    seen.join(", ")
                ),
                {
                    let bucketing = format!(
                        "pad or bucket dimension {dim} of {subject} to {{{}}}: {} graphs instead of {}, saving {saved} compiles (about {})",
                        bucket_list.join(", "),
                        buckets.len(),
                        values.len(),
                        format_ns((saved as u64 * mean) as f64)
                    );
                    if alike.iter().any(|s| shrank.contains(&(s.to_string(), *dim))) {
                        bucketing
                    } else {
                        format!("{}; or {bucketing}", growth_advice(subject, *dim))
                    }
                },
            )
        }
        (None, Some((subject, values))) => {
            (
                format!(
                    "{site} compiled {} more graphs, {} of them after warm-up (step {}+), {}: {subject} took {} values ({})",
                    rs.len(),
                    late,
                    t.warmup_steps.saturating_add(1),
                    format_ns(cost_ns as f64),
                    values.len(),
                    values.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
                format!("{subject} comes from a Python number that changes every step; keep it fixed, or compute with a tensor so the graph stays the same"),
            )
        }
        (None, None) => (
            format!(
                "{site} compiled {} more graphs, {} of them after warm-up (step {}+), {}",
                rs.len(),
                late,
                t.warmup_steps.saturating_add(1),
                format_ns(cost_ns as f64)
            ),
            "see the recompile explanations for what changes between these graphs".to_string(),
        ),
    };
    let instances = rs
        .iter()
        .map(|r| Instance {
            message: format!(
                "step {}: compiled graph {:016x} {}",
                r.step,
                r.hash,
                because(&r.changes)
            ),
            sync: Some(r.sync),
            step: Some(r.step),
            cost_ns: r.cost_ns,
        })
        .collect();
    let graphs = rs.iter().map(|r| r.hash).collect();
    let kind = Kind::RecompileStorm;
    Diagnostic::new(p, kind, location, message, Some(advice), instances, graphs)
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
        let site: Vec<&Recompile> = unexplained.iter().collect();
        let finding = recompiles(&p, &[site[0].location], &site);
        assert!(finding.message.contains("not compared"), "{}", finding.message);
    }

    #[test]
    fn a_cause_reads_the_same_whatever_number_its_input_has_in_each_graph() {
        let shape = |n: i64| ShapeRec { dtype: "f32".into(), dims: vec![n, 32] };
        let at = |input: usize| {
            vec![GraphChange::InputShape {
                input,
                from: shape(32),
                to: shape(4),
                created_at: "x.py:9 in batches".into(),
                name: None,
            }]
        };
        assert_eq!(
            cause_of(&at(1)),
            cause_of(&at(3)),
            "the words never name an input by its number"
        );
        assert!(!cause_of(&at(1)).contains("input"), "{}", cause_of(&at(1)));
        assert_eq!(unnumbered(&at(1)), unnumbered(&at(3)));
        assert_eq!(cause_of(&unnumbered(&at(1))), cause_of(&unnumbered(&at(3))));
        assert_ne!(unnumbered(&at(1)), unnumbered(&[]), "the change itself stays");
    }
}
