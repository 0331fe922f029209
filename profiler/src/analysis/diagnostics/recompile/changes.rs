//! What changed between two versions of a graph: inputs paired by identity, nodes by position,
//! each difference typed and put in the user's words.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::profile::{Graph, Profile};
use crate::record::{clip, GraphDef, InputName, InputRec, NodeRec, ShapeRec, LISTED};

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
    /// Inputs an earlier graph computed (activations a sync inside the step materialized) that
    /// changed shape with the inputs named before them: consequences, counted, with their lines.
    Computed { tensors: usize, made_at: Vec<String> },
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
    /// A value the graph took as a device input is a host scalar now (a Python number), or the
    /// reverse: `total = 0` then `total += loss`, the first step of each epoch.
    TensorOrNumber { location: String, shape: ShapeRec, now_number: bool },
    /// The inputs are the same but the step records other work: per line, how many ops more
    /// (positive) or fewer than the earlier graph (an update every k steps, a Python branch).
    /// `node`: where the two first diverge.
    Work { node: usize, lines: Vec<(String, i64)> },
    /// Fewer ops than the earlier graph, because a value read earlier in the step computed them.
    SplitBy { node: usize, read_at: String, ops: usize },
}

impl GraphChange {
    /// The node where the two graphs' ops first diverge, for a change that has one.
    pub fn diverging_node(&self) -> Option<usize> {
        match self {
            GraphChange::Structure { node, .. }
            | GraphChange::Attribute { node, .. }
            | GraphChange::Work { node, .. }
            | GraphChange::SplitBy { node, .. } => Some(*node),
            _ => None,
        }
    }

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
            GraphChange::Computed { tensors, made_at } => {
                let (inputs, follow) = if *tensors == 1 { ("input follows", "a tensor") } else { ("inputs follow", "tensors") };
                format!(
                    "{tensors} more {inputs} from this: {follow} an earlier graph computed at {}",
                    made_at.join(" and ")
                )
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
            GraphChange::TensorOrNumber { location, shape, now_number: true } => {
                format!("the value at {location} is a Python number this time, where the earlier graph took a tensor ({shape})")
            }
            GraphChange::TensorOrNumber { location, shape, now_number: false } => {
                format!("the value at {location} is a tensor ({shape}) this time, where the earlier graph took a Python number")
            }
            GraphChange::Work { lines, .. } => {
                let words: Vec<String> = lines
                    .iter()
                    .map(|(at, n)| match *n > 0 {
                        true => format!("{n} more ops at {at}"),
                        false => format!("{} fewer ops at {at}", -n),
                    })
                    .collect();
                format!("the step recorded other work: {}", words.join(", "))
            }
            GraphChange::SplitBy { read_at, ops, .. } => format!(
                "the value read at {read_at} earlier in the step had computed {ops} of its ops, so it is the rest of the step"
            ),
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
pub(super) fn same_op(x: &NodeRec, y: &NodeRec) -> bool {
    x.op == y.op && x.inputs == y.inputs && x.attrs == y.attrs
}

/// A node's operand, as [`same_but_scalar_operands`] compares them.
#[derive(PartialEq)]
pub(super) enum Operand<'a> {
    /// A node that is not a host scalar, by its position among such nodes.
    Node(usize),
    /// A host scalar (broadcast or not) of this shape, whichever node holds it.
    Scalar(&'a ShapeRec),
}

/// Whether two graphs are the same but for which ops share a host scalar operand: the engine
/// records one operand for equal scalars at a line, so values that stop (or start) being equal
/// give a graph with more (or fewer) scalar nodes and otherwise the same ops.
pub(super) fn same_but_scalar_operands(a: &GraphDef, b: &GraphDef) -> bool {
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
pub(super) fn input_name(name: Option<&InputName>, created_at: &str) -> String {
    match name {
        Some(InputName::Given(name)) => format!("`{name}`"),
        Some(InputName::Variable(v)) => format!("`{v}` made at {created_at}"),
        None => format!("the tensor made at {created_at}"),
    }
}

/// A node in words, for the place two graphs diverge: its op and what it gives (an input or a
/// host scalar as such, not as the IR's `parameter` or `scalar`).
pub(super) fn node_words(n: &NodeRec) -> String {
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
pub(super) fn paired_inputs(xs: &[&InputRec], ys: &[&InputRec]) -> Vec<usize> {
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
        // The inputs the program brought in are the cause; those an earlier graph computed from
        // them (a sync inside the step materialized them) follow, and are only counted. Where
        // every changed input looks computed, none is set apart.
        let changed: Vec<_> = pairs.iter().filter(|(_, x, y)| x.shape != y.shape).collect();
        let computed = |y: &InputRec| p.computed(y.location, &y.shape);
        let mut causes: Vec<_> = changed.iter().filter(|(_, _, y)| !computed(y)).collect();
        let follow: Vec<_> = if causes.is_empty() {
            causes = changed.iter().collect();
            Vec::new()
        } else {
            changed.iter().filter(|(_, _, y)| computed(y)).collect()
        };
        // In the program's order: the batch before its labels.
        causes.sort_by_key(|(j, _, y)| (p.locations.get(y.location as usize).map(|l| l.line), *j));
        for &&&(j, x, y) in causes.iter().take(LISTED) {
            changes.push(GraphChange::InputShape {
                input: j,
                from: x.shape.clone(),
                to: y.shape.clone(),
                created_at: p.location(y.location),
                name: y.name.clone(),
            });
        }
        if !follow.is_empty() {
            let mut made_at: Vec<String> = Vec::new();
            for (_, _, y) in &follow {
                let at = p.location(y.location);
                if !made_at.contains(&at) && made_at.len() < LISTED {
                    made_at.push(at);
                }
            }
            changes.push(GraphChange::Computed { tensors: follow.len(), made_at });
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
    // Inputs of the same shapes, other ops: what the step recorded differs, by line. (Where an
    // input changed shape, every op after it did too: the input is the cause.)
    let first_diff =
        da.node_defs.iter().zip(&db.node_defs).position(|(x, y)| !same_op(x, y)).or_else(|| {
            (da.node_defs.len() != db.node_defs.len())
                .then(|| da.node_defs.len().min(db.node_defs.len()))
        });
    // The same ops on other host scalars, equal ones shared: the scalar pattern below (the
    // positions of the nodes then differ, so neither is compared node by node).
    let sharing = first_diff.is_some() && same_but_scalar_operands(da, db);
    let reshaped_inputs = changes.iter().any(|c| matches!(c, GraphChange::InputShape { .. }));
    if !reshaped_inputs && !sharing {
        if let Some(work) = work_difference(p, da, db, first_diff.unwrap_or(0)) {
            // The inputs the work takes follow from it, and so do the outputs of much of it (an
            // update's writes); a tensor or two kept alive are said too.
            let much = matches!(&work, GraphChange::Work { lines, .. } if lines.iter().map(|l| l.1.unsigned_abs()).sum::<u64>() >= 8);
            changes.retain(|c| match c {
                GraphChange::InputCount { .. } => false,
                GraphChange::SyncedTensors { .. } => !much,
                _ => true,
            });
            changes.insert(0, work);
            return changes;
        }
    }
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
    // Outputs of other shapes, as many, follow from a shape that changed (a batch of 5 rows
    // gives results of 5 rows): not a sync of other tensors.
    let reshaped =
        changes.iter().any(|c| matches!(c, GraphChange::InputShape { .. } | GraphChange::NodeShape { .. }));
    changes.retain(|c| !matches!(c, GraphChange::SyncedTensors { from, to, .. } if from == to && reshaped));
    if changes.is_empty() {
        changes.push(GraphChange::ScalarPattern);
    }
    changes
}

/// The ops one graph records and the other does not: a device input become a host scalar (or
/// the reverse), or work added or taken away, by line (every op of one graph, shape included,
/// is one of the other's: an update every k steps, a part a read computed). None otherwise:
/// ops swapped for others or of other shapes are named node by node.
fn work_difference(p: &Profile, a: &GraphDef, b: &GraphDef, node: usize) -> Option<GraphChange> {
    let mut count: HashMap<(&str, u32, &ShapeRec), i64> = HashMap::new();
    for n in &a.node_defs {
        *count.entry((n.op.as_str(), n.location, &n.shape)).or_default() -= 1;
    }
    for n in &b.node_defs {
        *count.entry((n.op.as_str(), n.location, &n.shape)).or_default() += 1;
    }
    count.retain(|_, n| *n != 0);
    if let [(&(op_x, at_x, shape_x), &n_x), (&(op_y, at_y, shape_y), &n_y)] = count.iter().collect::<Vec<_>>()[..] {
        let ops = [op_x, op_y];
        if at_x == at_y && shape_x == shape_y && n_x == -n_y && n_x.abs() == 1
            && ops.contains(&"scalar") && ops.contains(&"parameter")
        {
            let scalar_now = if op_x == "scalar" { n_x > 0 } else { n_y > 0 };
            return Some(GraphChange::TensorOrNumber {
                location: p.location(at_x),
                shape: shape_x.clone(),
                now_number: scalar_now,
            });
        }
    }
    // Ops (inputs aside, which follow the work) only added, or only taken away.
    count.retain(|(op, _, _), _| *op != "parameter" && *op != "scalar");
    let (more, fewer) = (count.values().any(|&n| n > 0), count.values().any(|&n| n < 0));
    if count.is_empty() || more == fewer {
        return None;
    }
    // Per line; the lines that differ most first, then in the program's order.
    let mut by_line: BTreeMap<String, (i64, Option<u32>)> = BTreeMap::new();
    for (&(_, at, _), &n) in &count {
        let line = by_line.entry(p.location(at)).or_insert((0, p.locations.get(at as usize).map(|l| l.line)));
        line.0 += n;
    }
    let mut lines: Vec<(String, i64, Option<u32>)> = by_line.into_iter().map(|(at, (n, line))| (at, n, line)).collect();
    lines.sort_by_key(|(_, n, line)| (std::cmp::Reverse(n.unsigned_abs()), *line));
    let lines = lines.into_iter().take(4).map(|(at, n, _)| (at, n)).collect();
    Some(GraphChange::Work { node, lines })
}

/// The outputs of `b` that `a` does not have (joined), and those of `a` that `b` does not
/// (left), as multisets: counted, not searched, so it is linear in the outputs. Each list keeps
/// its graph's order; of equal outputs, the first ones are the ones matched.
pub(super) fn outputs_diff<'g>(
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
pub(super) fn distance(changes: &[GraphChange]) -> usize {
    // A node is one difference however many of its attributes changed: a slice's start and
    // limit both follow a dim that grows, as one attribute of another node would.
    let mut attributed = HashSet::new();
    changes
        .iter()
        .map(|c| match c {
            GraphChange::Attribute { node, .. } => {
                if attributed.insert(*node) {
                    10
                } else {
                    0
                }
            }
            GraphChange::Structure { .. } | GraphChange::InputCount { .. } => 10,
            GraphChange::Work { lines, .. } => 10 + lines.iter().map(|(_, n)| n.unsigned_abs() as usize).sum::<usize>(),
            GraphChange::TensorOrNumber { .. } => 10,
            GraphChange::NodeShape { .. } => 2,
            GraphChange::SyncedTensors { .. } => 5,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(node: usize, name: &str) -> GraphChange {
        GraphChange::Attribute {
            node,
            op: "slice".into(),
            name: name.into(),
            from: "[0, 4]".into(),
            to: "[0, 5]".into(),
            location: Default::default(),
        }
    }

    use crate::record::{Location, Record};

    fn shape(dims: &[i64]) -> ShapeRec {
        ShapeRec { dtype: "f32".into(), dims: dims.to_vec() }
    }

    fn node(op: &str, inputs: &[u32], dims: &[i64], location: u32) -> NodeRec {
        NodeRec { op: op.into(), attrs: Vec::new(), inputs: inputs.to_vec(), shape: shape(dims), location, hash: 0 }
    }

    fn input(dims: &[i64], location: u32) -> InputRec {
        InputRec { shape: shape(dims), data: true, location, donated: false, name: None }
    }

    fn graph(hash: u64, inputs: Vec<InputRec>, node_defs: Vec<NodeRec>, outputs: &[&[i64]]) -> Record {
        Record::Graph(Box::new(GraphDef {
            hash,
            nodes: node_defs.len() as u32,
            ops: Vec::new(),
            inputs,
            outputs: outputs.iter().map(|d| shape(d)).collect(),
            node_defs,
        }))
    }

    fn profile(graphs: Vec<Record>) -> Profile {
        let lines = (0..3u32).map(|id| Record::Location {
            id,
            location: Location { file: "t.py".into(), line: 10 + id, function: "train".into() },
        });
        Profile::from_records(lines.chain(graphs))
    }

    #[test]
    fn a_batch_made_on_the_device_in_another_size_is_the_cause_not_the_outputs_it_gives() {
        // `x = randn(bs, 16); (x @ x.T).relu().sum()` with x kept: bs 8, then 5.
        let step = |hash, bs| {
            let nodes = vec![
                node("rng", &[], &[bs, 16], 0),
                node("dot", &[0, 0], &[bs, bs], 1),
                node("reduce", &[1], &[], 1),
            ];
            graph(hash, Vec::new(), nodes, &[&[bs, 16], &[]])
        };
        let p = profile(vec![step(1, 8), step(2, 5)]);
        let changes = diff_graphs(&p, &p.graphs[&1], &p.graphs[&2]);
        assert!(matches!(&changes[..], [GraphChange::NodeShape { node: 0, .. }]), "{changes:?}");
    }

    #[test]
    fn a_running_total_that_starts_as_a_python_number_is_named_at_its_line() {
        // `total = 0` each epoch, then `total += loss` (line 12): a host scalar on the epoch's
        // first step, the tensor the previous step computed on the others.
        let step = |hash, first: bool| {
            let total = node(if first { "scalar" } else { "parameter" }, &[], &[], 2);
            let nodes = vec![node("parameter", &[], &[4], 0), total, node("add", &[0, 1], &[], 2)];
            let data = if first { vec![input(&[4], 0)] } else { vec![input(&[4], 0), input(&[], 2)] };
            graph(hash, data, nodes, &[&[]])
        };
        let p = profile(vec![step(1, false), step(2, true)]);
        let changes = diff_graphs(&p, &p.graphs[&1], &p.graphs[&2]);
        match &changes[..] {
            [GraphChange::TensorOrNumber { location, now_number: true, .. }] => assert_eq!(location, "t.py:12 in train"),
            _ => panic!("{changes:?}"),
        }
    }

    #[test]
    fn a_step_that_records_more_work_names_the_lines_not_the_inputs_it_adds() {
        // An average of the weights updated every other step (line 11): its ops and its input.
        let step = |hash, average: bool| {
            let mut nodes = vec![node("parameter", &[], &[4], 0), node("tanh", &[0], &[4], 0)];
            let mut inputs = vec![input(&[4], 0)];
            if average {
                nodes.push(node("parameter", &[], &[4], 1));
                nodes.push(node("multiply", &[1, 2], &[4], 1));
                nodes.push(node("add", &[3, 1], &[4], 1));
                inputs.push(input(&[4], 1));
            }
            graph(hash, inputs, nodes, &[&[4]])
        };
        let p = profile(vec![step(1, false), step(2, true)]);
        let changes = diff_graphs(&p, &p.graphs[&1], &p.graphs[&2]);
        match &changes[..] {
            [GraphChange::Work { node: 2, lines }] => assert_eq!(lines, &[("t.py:11 in train".to_string(), 2)]),
            _ => panic!("{changes:?}"),
        }
        // The same ops in another order, or the same graph, are no work difference.
        assert!(work_difference(&p, &p.graphs[&1].def, &p.graphs[&1].def, 0).is_none());
    }

    #[test]
    fn inputs_an_earlier_graph_computed_follow_the_input_the_program_brought_in() {
        // A mid-step read made one graph compute an activation at line 11 from the batch (line
        // 10); the step's end takes both as inputs. The batch is the cause.
        let mid = |hash, bs| {
            let nodes = vec![node("parameter", &[], &[bs, 4], 0), node("tanh", &[0], &[bs, 4], 1)];
            graph(hash, vec![input(&[bs, 4], 0)], nodes, &[&[bs, 4]])
        };
        let end = |hash, bs| {
            let nodes = vec![
                node("parameter", &[], &[bs, 4], 1),
                node("parameter", &[], &[bs, 4], 0),
                node("multiply", &[0, 1], &[bs, 4], 2),
            ];
            graph(hash, vec![input(&[bs, 4], 1), input(&[bs, 4], 0)], nodes, &[&[bs, 4]])
        };
        let p = profile(vec![mid(1, 8), end(2, 8), mid(3, 5), end(4, 5)]);
        let changes = diff_graphs(&p, &p.graphs[&2], &p.graphs[&4]);
        match &changes[..] {
            [GraphChange::InputShape { created_at, .. }, GraphChange::Computed { tensors: 1, made_at }] => {
                assert_eq!(created_at, "t.py:10 in train");
                assert_eq!(made_at, &["t.py:11 in train".to_string()]);
            }
            _ => panic!("{changes:?}"),
        }
    }

    #[test]
    fn a_node_whose_attributes_changed_together_is_one_difference() {
        let one = distance(&[attribute(3, "limit")]);
        assert_eq!(distance(&[attribute(3, "start"), attribute(3, "limit")]), one);
        assert_eq!(distance(&[attribute(3, "start"), attribute(4, "limit")]), 2 * one);
    }
}
