//! Why a call site compiled again: the structural difference between a new graph and the
//! nearest graph the same site compiled before; and storms of such recompiles after warm-up.

mod changes;
mod find;
mod warmup;

pub use changes::{diff_graphs, GraphChange};
pub use find::{find_recompiles, Recompile};

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Diagnostic, Instance, Kind, Thresholds};
use crate::profile::Profile;
use crate::record::{clip_to, ShapeRec};
use crate::util::format_ns;
use crate::util::saturating_sum;

use changes::*;
use warmup::*;

/// `because a; b; c`: the changes as a clause, cut to a paragraph's length (every instance of a
/// finding repeats it).
fn because(changes: &[GraphChange]) -> String {
    if changes.is_empty() {
        return "(not compared with the graph before it: the profile asks for more comparisons \
                than one analysis makes)"
            .to_string();
    }
    clip_to(&format!("because {}", sentences(changes)), 1024).into_owned()
}

/// The changes in words, inputs that changed alike in one sentence.
fn sentences(changes: &[GraphChange]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        let alike = |c: &GraphChange| match c {
            GraphChange::InputShape { from, to, .. } => Some(shape_difference(from, to)),
            _ => None,
        };
        let difference = alike(&changes[i]);
        let n = changes[i..]
            .iter()
            .take_while(|c| difference.is_some() && alike(c) == difference)
            .count();
        if n < 2 {
            out.push(changes[i].sentence());
            i += 1;
            continue;
        }
        // "`x` made at a.py:3 changed from f32[64,8] to f32[40,8], and `y` made at a.py:4 from
        // s64[64] to s64[40] (dimension 0 went from 64 to 40)".
        let inputs: Vec<String> = changes[i..i + n]
            .iter()
            .enumerate()
            .filter_map(|(k, c)| match c {
                GraphChange::InputShape { from, to, created_at, name, .. } => {
                    let verb = if k == 0 { "changed from" } else { "from" };
                    Some(format!("{} {verb} {from} to {to}", input_name(name.as_ref(), created_at)))
                }
                _ => None,
            })
            .collect();
        let last = inputs.len() - 1;
        out.push(format!(
            "{}, and {} ({})",
            inputs[..last].join(", "),
            inputs[last],
            difference.unwrap_or_default()
        ));
        i += n;
    }
    out.join("; ")
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
        GraphChange::TensorOrNumber { location, .. } => {
            format!("the value at {location} was a Python number on some steps and a tensor on others")
        }
        GraphChange::SplitBy { read_at, .. } => format!("the value read at {read_at} split the step"),
        GraphChange::Work { lines, .. } => match lines.first() {
            Some((at, _)) => format!("the step's work differs at {at}"),
            None => "the step's work differs".to_string(),
        },
        GraphChange::Computed { .. } => "tensors an earlier graph computed changed".to_string(),
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
    // Storms likewise: one finding at the site that cost most, the others counted in it.
    let mut storms: Vec<(Vec<String>, Vec<(u32, Vec<&Recompile>)>)> = Vec::new();
    let causes_of = |rs: &[&Recompile]| {
        let mut causes: Vec<String> = rs.iter().map(|r| cause_of(&unnumbered(&r.changes))).collect();
        causes.sort();
        causes.dedup();
        causes
    };
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
        let causes = causes_of(&rs);
        if late >= t.storm_compiles {
            // Sites that share a cause: their other causes are the step's own (its warm-up).
            match storms.iter_mut().find(|g| g.0.iter().any(|c| causes.contains(c))) {
                Some((_, sites)) => sites.push((location, rs)),
                None => storms.push((causes, vec![(location, rs)])),
            }
            continue;
        }
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
    for (_, mut sites) in storms {
        let cost = |rs: &[&Recompile]| saturating_sum(rs.iter().map(|r| r.cost_ns));
        sites.sort_by_key(|(l, rs)| (std::cmp::Reverse(cost(rs)), *l));
        let (location, rs) = &sites[0];
        let mut d = storm(p, t, *location, rs);
        for (other, rs) in &sites[1..] {
            // (A value read inside the step and the step's end, for one batch of a new size.)
            let more = storm(p, t, *other, rs);
            d.message += &format!(
                "; the same change made {} compile {} too ({}), counted here",
                p.location(*other),
                super::times(rs.len()),
                format_ns(cost(rs) as f64)
            );
            d.cost_ns = d.cost_ns.saturating_add(more.cost_ns);
            d.count += more.count;
            d.instances.extend(more.instances);
            d.graphs.extend(more.graphs);
        }
        out.push(d);
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
                sentences(&r.changes)
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
        && rs.iter().all(|r| cause_of(&unnumbered(&r.changes)) == cause_of(&unnumbered(&rs[0].changes)));
    // Grouped by cause, most frequent first (the first seen first among equals), each with the
    // values it took and its first recompile.
    let mut groups: Vec<(String, usize, Vec<String>, &Recompile)> = Vec::new();
    for &r in rs {
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
            None => groups.push((cause, 1, values, r)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    let message = if rs.len() == 1 {
        format!("{site} compiled another graph ({}) {first}", format_ns(cost_ns as f64))
    } else if one_each {
        format!("{site} each compiled another graph ({}) {first}", format_ns(cost_ns as f64))
    } else {
        let causes: Vec<String> = groups
            .iter()
            .map(|(cause, n, values, _)| {
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
    // Every graph these made ran again at a later step: a cost paid once (a kind of step that
    // recurs, an epoch's tail), not at each step.
    let once = rs.iter().all(|r| runs_after(p, r.hash, r.step));
    let message = match once {
        true => format!("{message}. Each graph then ran again at later steps: a one-time cost"),
        false => message,
    };
    let mut graphs: Vec<u64> = rs.iter().flat_map(|r| [r.previous, r.hash]).collect();
    graphs.dedup();
    // The advice of the most frequent cause (the first recompile of a loop is often another).
    let advice =
        groups.first().and_then(|g| advice_for(&g.3.changes)).or_else(|| advice_for(&changes));
    let d = Diagnostic::new(p, Kind::Recompile, location, message, advice, instances, graphs);
    Diagnostic { changes, once, ..d }
}

/// Whether graph `hash` ran at a step after `step`.
fn runs_after(p: &Profile, hash: u64, step: u64) -> bool {
    p.syncs.iter().rev().take_while(|s| s.step > step).any(|s| s.hash == Some(hash))
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
        // `x == 0` then `x > 0` read on the host: two comparisons at one line, not one that varies.
        GraphChange::Attribute { op, name, .. } if op == "compare" && name == "direction" => Some(
            "two different comparisons at one line (`x == 0`, then `x > 0`; often inside a library) each read a value on the host, each a small graph of its own: read the value once (`n = int(x)`) and compare the number".to_string(),
        ),
        GraphChange::Attribute { name, .. } => Some(format!(
            "the op's {name} is computed from a value that changes between steps (a Python number used as axes, dims or bounds); keep it fixed, or pass what varies as a tensor so the graph stays the same"
        )),
        GraphChange::Structure { .. } => Some(
            "the program records different ops on different steps (a Python/Rust branch on data, or a changing loop count); make the step's ops the same every time".to_string(),
        ),
        GraphChange::TensorOrNumber { location, .. } => Some(format!(
            "the value at {location} starts as a Python number and becomes a tensor (`total = 0`, then `total += loss`), so the steps it is a number in are a graph of their own: start it as a tensor on the device (`torch.zeros((), device=...)`)"
        )),
        GraphChange::Work { lines, .. } => Some(format!(
            "some steps record work the others do not ({}: an update every k steps, a branch in Python), and each kind of step is a graph of its own, compiled once and then reused; to have one graph, do that work every step, or end the step before it (`step()`) so it is a small graph of its own",
            lines.first().map_or("", |(at, _)| at.as_str())
        )),
        GraphChange::SplitBy { read_at, .. } => Some(format!(
            "it follows from the value read at {read_at} (its own finding): read it after the step ends and the step is one graph again"
        )),
        GraphChange::ScalarPattern => Some(
            "two Python numbers recorded at one line were equal on one step and differ on another (the graph shares equal numbers): pass them as tensors if it recurs".to_string(),
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
    use super::find::{find_recompiles_within, Budget};
    use super::*;
    use crate::record::GraphDef;
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
