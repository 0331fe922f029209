//! A job of several processes (torchrun's ranks), read from its ranks' profiles as one: their
//! clocks aligned by the collectives they took part in together, and what only the ranks side by
//! side show: the straggler the others wait for, the rank that diverged, a collective some rank
//! never joined.
//!
//! Collectives are matched across ranks by their process group and their number in it (every
//! rank of a group calls its collectives in one order). A blocking collective ends on every rank
//! at nearly one instant (when the last rank's data arrives), so the median gap between a rank's
//! leaving times and rank 0's is its clock's offset; wall clocks (a millisecond's resolution, and
//! hosts' own drift) only place the ranks before that.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::analysis::diagnostics::{diff_graphs, GraphChange};
use crate::analysis::timeline::{self, Span, SpanKind};
use crate::analysis::Analysis;
use crate::profile::{Collective, Profile};
use crate::util::format_ns;

/// How long a collective must have waited for a rank that never entered it before it is called
/// stuck (a live job's collectives in flight are not).
const STUCK_AFTER_NS: u64 = 1_000_000_000;

/// What the job's ranks show side by side.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Job {
    pub ranks: Vec<Rank>,
    /// Collectives every rank entered and left (those that align the clocks).
    pub matched: usize,
    pub findings: Vec<JobFinding>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Rank {
    pub rank: u32,
    /// The rank's time zero on the job's clock (ns after the earliest rank's).
    pub offset_ns: i64,
    /// Time inside collectives, and its share of the time from the first collective's entry to
    /// the last one's exit.
    pub collective_ns: u64,
    pub collective_share: f64,
    /// Its last collective: `all_reduce #12 of world at train.py:40`, and whether it is still in.
    pub last_collective: Option<String>,
    /// The share of its time in collectives during which its device computed (graphs the engine
    /// or a compiler ran): communication hidden behind compute. None where the rank ran no
    /// recorded compute (CPU eager's ops are not).
    pub overlap: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum JobKind {
    /// The rank the others wait for at the collectives.
    Straggler,
    /// A rank that compiled what the others did not, or called its collectives in another order.
    Divergence,
    /// A rank inside a collective that another rank never entered.
    Stuck,
}

impl JobKind {
    pub fn title(self) -> &'static str {
        match self {
            JobKind::Straggler => "straggler",
            JobKind::Divergence => "diverging rank",
            JobKind::Stuck => "stuck in a collective",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct JobFinding {
    pub kind: JobKind,
    pub rank: u32,
    pub message: String,
    pub advice: String,
    /// The time the whole job lost to it.
    pub lost_ns: u64,
}

/// The ranks' profiles with their analyses, in rank order.
pub fn analyze(ranks: &[(&Profile, &Analysis)]) -> Job {
    let ids: Vec<u32> = ranks
        .iter()
        .enumerate()
        .map(|(i, (p, _))| p.job.map(|j| j.rank).unwrap_or(i as u32))
        .collect();
    let common = matched(ranks);
    let offsets = aligned(ranks, &common);
    let mut job = Job { matched: common.len(), ..Job::default() };
    for (i, (p, _)) in ranks.iter().enumerate() {
        job.ranks.push(rank_row(ids[i], offsets[i], p));
    }
    job.findings.extend(stuck(ranks, &ids));
    job.findings.extend(out_of_order(ranks, &ids));
    job.findings.extend(diverging_compiles(ranks, &ids));
    job.findings.extend(straggler(ranks, &common, &ids, &offsets));
    job.findings.sort_by(|a, b| b.lost_ns.cmp(&a.lost_ns));
    job
}

type Key<'a> = (&'a str, u64);

fn by_key(p: &Profile) -> BTreeMap<Key<'_>, &Collective> {
    p.collectives.iter().map(|c| ((c.group.as_str(), c.seq), c)).collect()
}

/// The collectives every rank entered and left, in order, with each rank's.
fn matched<'a>(ranks: &[(&'a Profile, &Analysis)]) -> Vec<Vec<&'a Collective>> {
    let maps: Vec<_> = ranks.iter().map(|(p, _)| by_key(p)).collect();
    let Some(first) = maps.first() else { return Vec::new() };
    let mut out: Vec<Vec<&Collective>> = first
        .keys()
        .filter_map(|k| maps.iter().map(|m| m.get(k).copied()).collect::<Option<Vec<_>>>())
        .filter(|cs| cs.iter().all(|c| c.end_ns.is_some()))
        .collect();
    out.sort_by_key(|cs| cs[0].start_ns);
    out
}

/// Each rank's time zero on the job's clock (ns after the earliest): by wall clock, then
/// corrected so that the ranks leave their common collectives together.
pub fn offsets(ranks: &[(&Profile, &Analysis)]) -> Vec<i64> {
    aligned(ranks, &matched(ranks))
}

/// [`offsets`], given the collectives every rank entered and left (`common`, from [`matched`]).
fn aligned(ranks: &[(&Profile, &Analysis)], common: &[Vec<&Collective>]) -> Vec<i64> {
    let first = ranks.iter().map(|(p, _)| p.meta.start_unix_ms).min().unwrap_or(0);
    let mut offsets: Vec<i64> = ranks
        .iter()
        .map(|(p, _)| (p.meta.start_unix_ms.saturating_sub(first) as i64).saturating_mul(1_000_000))
        .collect();
    if common.is_empty() {
        return offsets;
    }
    let leave = |r: usize, cs: &[&Collective]| on_clock(offsets[r], cs[r].end_ns.unwrap_or(0));
    let corrections: Vec<i64> = (0..ranks.len())
        .map(|r| median_i64(common.iter().map(|cs| leave(r, cs).saturating_sub(leave(0, cs))).collect()))
        .collect();
    for (o, c) in offsets.iter_mut().zip(corrections) {
        *o = o.saturating_sub(c);
    }
    let least = offsets.iter().copied().min().unwrap_or(0);
    offsets.iter().map(|o| o.saturating_sub(least)).collect()
}

/// A rank's time `t` on the job's clock, its time zero at `offset`.
fn on_clock(offset: i64, t: u64) -> i64 {
    offset.saturating_add(t.min(i64::MAX as u64) as i64)
}

fn median_i64(mut v: Vec<i64>) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

fn describe(p: &Profile, c: &Collective) -> String {
    format!("{} #{} of group {} at {}", c.op, c.seq, c.group, p.location(c.location))
}

fn rank_row(rank: u32, offset_ns: i64, p: &Profile) -> Rank {
    let collective_ns: u64 = p.collectives.iter().filter_map(|c| Some(c.end_ns? - c.start_ns)).sum();
    let span = match (p.collectives.first(), p.collectives.iter().filter_map(|c| c.end_ns).max()) {
        (Some(first), Some(last)) => last.saturating_sub(first.start_ns),
        _ => 0,
    };
    let last_collective = p.collectives.last().map(|c| {
        let state = if c.end_ns.is_none() { ", still inside" } else { "" };
        format!("{}{state}", describe(p, c))
    });
    Rank {
        rank,
        offset_ns,
        collective_ns,
        collective_share: if span > 0 { collective_ns as f64 / span as f64 } else { 0.0 },
        last_collective,
        overlap: overlap(p, collective_ns),
    }
}

/// The share of `collective_ns` (the rank's time in collectives) during which it computed.
fn overlap(p: &Profile, collective_ns: u64) -> Option<f64> {
    let mut compute: Vec<(u64, u64)> = p
        .executions
        .iter()
        .map(|e| (e.start_ns, e.start_ns.saturating_add(e.duration_ns)))
        .chain(p.captured_runs.iter().map(|r| (r.start_ns, r.start_ns.saturating_add(r.duration_ns))))
        .collect();
    if compute.is_empty() || collective_ns == 0 {
        return None;
    }
    compute.sort_unstable();
    // Merged, so that each instant counts once.
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(compute.len());
    for (a, b) in compute {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut both = 0u64;
    for c in &p.collectives {
        let Some(end) = c.end_ns else { continue };
        let first = merged.partition_point(|&(_, b)| b <= c.start_ns);
        for &(a, b) in merged[first..].iter().take_while(|&&(a, _)| a < end) {
            both = both.saturating_add(end.min(b).saturating_sub(c.start_ns.max(a)));
        }
    }
    Some(both as f64 / collective_ns as f64)
}

/// Ranks inside a collective (for a second or more) that another rank never entered: the job
/// waits there until the collective's timeout, or forever. One finding per such collective.
fn stuck(ranks: &[(&Profile, &Analysis)], ids: &[u32]) -> Vec<JobFinding> {
    let now_ms =
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let maps: Vec<_> = ranks.iter().map(|(p, _)| by_key(p)).collect();
    // Per unfinished collective: the ranks inside it, with how long each has waited.
    let mut inside: BTreeMap<Key<'_>, Vec<(usize, u64)>> = BTreeMap::new();
    for (r, (p, _)) in ranks.iter().enumerate() {
        let Some(c) = p.collectives.iter().rev().find(|c| c.end_ns.is_none()) else { continue };
        let waited_ns = now_ms
            .saturating_sub(p.meta.start_unix_ms)
            .saturating_mul(1_000_000)
            .saturating_sub(c.start_ns);
        inside.entry((c.group.as_str(), c.seq)).or_default().push((r, waited_ns));
    }
    let mut out = Vec::new();
    for (key, waiting) in inside {
        let absent: Vec<usize> = (0..ranks.len()).filter(|&o| !maps[o].contains_key(&key)).collect();
        let waited_ns = waiting.iter().map(|&(_, w)| w).max().unwrap_or(0);
        if absent.is_empty() || waited_ns < STUCK_AFTER_NS {
            continue;
        }
        let (first, _) = waiting[0];
        let p = ranks[first].0;
        let c = maps[first][&key];
        let names: Vec<String> = waiting.iter().map(|&(r, _)| ids[r].to_string()).collect();
        let others: Vec<String> = absent
            .iter()
            .map(|&o| {
                let q = ranks[o].0;
                let last = q.collectives.iter().rev().find(|x| x.group == c.group);
                let at = match last {
                    Some(x) => format!("its last collective of the group was {}", describe(q, x)),
                    None => "it entered no collective of the group".to_string(),
                };
                let ran = match last_user_line(q) {
                    Some(line) => format!(", and its last line seen is {line}"),
                    None => String::new(),
                };
                format!("rank {} never entered it ({at}{ran})", ids[o])
            })
            .collect();
        out.push(JobFinding {
            kind: JobKind::Stuck,
            rank: ids[absent[0]],
            message: format!(
                "{} {} {} stuck in {}, entered {} ago: {}",
                if names.len() == 1 { "rank" } else { "ranks" },
                names.join(", "),
                if names.len() == 1 { "is" } else { "are" },
                describe(p, c),
                format_ns(waited_ns as f64),
                others.join("; ")
            ),
            advice: "every rank must call the same collectives in the same order: a branch on \
                     the rank, or on a value that differs by rank, around a collective skips it \
                     on some ranks (take the branch on every rank, or move the collective out of it)"
                .to_string(),
            lost_ns: waited_ns,
        });
    }
    out
}

/// The user's line of the last thing a profile recorded (a sync, a step, a collective).
fn last_user_line(p: &Profile) -> Option<String> {
    let step = p.steps.last().map(|s| (s.end_ns, s.location));
    let sync = p.syncs.last().map(|s| (s.start_ns, s.location));
    let coll = p.collectives.last().map(|c| (c.start_ns, c.location));
    [step, sync, coll].into_iter().flatten().max_by_key(|(t, _)| *t).map(|(_, l)| p.location(l))
}

/// Collectives that took the same number on two ranks but are not the same call: the ranks
/// called their collectives in another order (or one skipped one and the numbers slid), so
/// data meets data it was never meant to (or the job hangs at the next one).
fn out_of_order(ranks: &[(&Profile, &Analysis)], ids: &[u32]) -> Vec<JobFinding> {
    let maps: Vec<_> = ranks.iter().map(|(p, _)| by_key(p)).collect();
    let Some(first) = maps.first() else { return Vec::new() };
    for (k, c0) in first {
        for (r, m) in maps.iter().enumerate().skip(1) {
            let Some(c) = m.get(k) else { continue };
            let (p0, p) = (ranks[0].0, ranks[r].0);
            if c.op != c0.op || p.line(c.location) != p0.line(c0.location) {
                return vec![JobFinding {
                    kind: JobKind::Divergence,
                    rank: ids[r],
                    message: format!(
                        "the ranks' collectives went out of step at number {} of group {}: \
                         rank {} called {} at {}, rank {} called {} at {}",
                        k.1,
                        k.0,
                        ids[0],
                        c0.op,
                        p0.location(c0.location),
                        ids[r],
                        c.op,
                        p.location(c.location)
                    ),
                    advice: "every rank must call the same collectives in the same order; look \
                             for a branch on the rank, or on a value that differs by rank, before \
                             the first of these lines"
                        .to_string(),
                    lost_ns: 0,
                }];
            }
        }
    }
    Vec::new()
}

/// What differs between graph `hash` of `p` (synced by sync `sync`) and the graph `p` ran most
/// often at the same line (its steady graph there, the one every rank runs; warm-up graphs run
/// once). Within one process, so inputs pair as in its own recompiles.
fn steady_changes(p: &Profile, sync: u64, hash: u64) -> Option<Vec<GraphChange>> {
    let at = p.syncs.iter().find(|s| s.id == sync)?;
    let mut runs: BTreeMap<u64, usize> = BTreeMap::new();
    for s in p.syncs.iter().filter(|s| s.location == at.location) {
        match s.hash {
            Some(h) if h != hash => *runs.entry(h).or_default() += 1,
            _ => {}
        }
    }
    let (steady, _) = runs.into_iter().max_by_key(|&(h, n)| (n, std::cmp::Reverse(h)))?;
    Some(diff_graphs(p, p.graphs.get(&steady)?, p.graphs.get(&hash)?))
}

/// A rank that compiled graphs the other ranks did not: its inputs or its path differed.
fn diverging_compiles(ranks: &[(&Profile, &Analysis)], ids: &[u32]) -> Vec<JobFinding> {
    if ranks.len() < 2 {
        return Vec::new();
    }
    let sets: Vec<BTreeSet<u64>> =
        ranks.iter().map(|(p, _)| p.compiles.iter().map(|c| c.hash).collect()).collect();
    let recompiles: Vec<usize> = ranks.iter().map(|(p, _)| p.function_compiles.len()).collect();
    let usual_compiles = {
        let mut v = recompiles.clone();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let mut out = Vec::new();
    for (r, (p, _)) in ranks.iter().enumerate() {
        // Graphs no more than half of the others compiled.
        let own: Vec<&crate::profile::Compile> = p
            .compiles
            .iter()
            .filter(|c| {
                let shared = sets.iter().enumerate().filter(|&(o, s)| o != r && s.contains(&c.hash)).count();
                shared * 2 < ranks.len() - 1
            })
            .collect();
        let extra_function_compiles = recompiles[r].saturating_sub(usual_compiles);
        if own.is_empty() && extra_function_compiles == 0 {
            continue;
        }
        // What differs: its first graph of its own against the graph all ranks run there, change
        // by change.
        let differs = own.first().and_then(|first| {
            let changes = steady_changes(p, first.sync, first.hash)?;
            let said: Vec<String> = changes.iter().take(3).map(|c| c.sentence()).collect();
            (!said.is_empty())
                .then(|| format!("; against the graph every rank runs there: {}", said.join("; ")))
        });
        let lost: u64 = own.iter().map(|c| c.duration_ns).sum();
        let what = if !own.is_empty() {
            let first = own[0];
            let step = p.syncs.iter().find(|s| s.id == first.sync).map(|s| s.step).unwrap_or(0);
            let at = p.syncs.iter().find(|s| s.id == first.sync).map(|s| p.location(s.location));
            format!(
                "compiled {} graph{} the other ranks did not, first in step {step}{}",
                own.len(),
                if own.len() == 1 { "" } else { "s" },
                at.map(|l| format!(" (its sync at {l})")).unwrap_or_default()
            )
        } else {
            format!("compiled {extra_function_compiles} more function(s) than the other ranks (torch.compile)")
        };
        let cause = differs.unwrap_or_default();
        out.push(JobFinding {
            kind: JobKind::Divergence,
            rank: ids[r],
            message: format!("rank {} {what}{cause}", ids[r]),
            advice: "give every rank inputs of the same shapes (pad, or drop the last batch, alike \
                     on every rank), and take no branch on a value that differs by rank: the \
                     other ranks wait for this rank's compiles at their next collective"
                .to_string(),
            lost_ns: lost,
        });
    }
    out
}

/// The rank the others wait for: last to enter most collectives, with what kept it in the
/// windows before them that the others did not spend alike (its data, a compile, a host read, or
/// its own slower work). The first collective is not counted: the ranks reach it from their
/// start-up (imports, first compiles), which is no step's.
fn straggler(
    ranks: &[(&Profile, &Analysis)],
    common: &[Vec<&Collective>],
    ids: &[u32],
    offsets: &[i64],
) -> Vec<JobFinding> {
    let n = ranks.len();
    if n < 2 || common.len() < 4 {
        return Vec::new();
    }
    let mut last_count = vec![0usize; n];
    let mut lost = vec![0u64; n];
    // Per rank: the collectives it came to last, each with every rank's window before it (its
    // own clock: from leaving the previous collective to entering this one).
    let mut windows: Vec<Vec<Vec<(u64, u64)>>> = vec![Vec::new(); n];
    for pair in common.windows(2) {
        let (before, cs) = (&pair[0], &pair[1]);
        let enters: Vec<i64> = (0..n).map(|r| on_clock(offsets[r], cs[r].start_ns)).collect();
        let last = (0..n).max_by_key(|&r| enters[r]).unwrap_or(0);
        let med = median_i64(enters.clone());
        last_count[last] += 1;
        lost[last] = lost[last].saturating_add(enters[last].saturating_sub(med).max(0) as u64);
        let each: Vec<(u64, u64)> =
            (0..n).map(|r| (before[r].end_ns.unwrap_or(before[r].start_ns), cs[r].start_ns)).collect();
        windows[last].push(each);
    }
    let counted = common.len() - 1;
    let span = {
        let first = on_clock(offsets[0], common[1][0].start_ns);
        let end = on_clock(offsets[0], common[common.len() - 1][0].end_ns.unwrap_or(0));
        end.saturating_sub(first).max(1) as u64
    };
    let Some(s) = (0..n).max_by_key(|&r| lost[r]) else { return Vec::new() };
    let p = ranks[s].0;
    let cause = what_kept(ranks, s, &windows[s], lost[s]);
    // A cause of its own (its data, its compiles, its reads) names a straggler at a tenth of the
    // job's time; a rank merely slower (ranks sharing too few cores are, by turns) must stand
    // out more: a quarter of the time, last at three collectives in four.
    let (share, last_share) = if cause.is_some() { (10, (3, 5)) } else { (4, (3, 4)) };
    if last_count[s] * last_share.1 < counted * last_share.0
        || lost[s].saturating_mul(share) < span
        || lost[s] < 1_000_000
    {
        return Vec::new();
    }
    let why = match cause {
        Some((name, excess, line)) => {
            format!("{name}: {} more than the others, at {}", format_ns(excess as f64), p.location(line))
        }
        None => "its own work between collectives is slower (no wait for data, compile or host \
                 read of its own explains it)"
            .to_string(),
    };
    let coll = common.iter().find(|cs| windows[s].iter().any(|w| w[s].1 == cs[s].start_ns)).map(|cs| cs[s]);
    let at = coll.map(|c| format!("{} at {}", c.op, p.location(c.location))).unwrap_or_default();
    vec![JobFinding {
        kind: JobKind::Straggler,
        rank: ids[s],
        message: format!(
            "rank {} is the straggler: the other ranks waited for it at {} of {} collectives \
             ({at}), {} of the job's time; {why}",
            ids[s],
            last_count[s],
            counted,
            format_ns(lost[s] as f64)
        ),
        advice: match cause.map(|(name, _, _)| name) {
            Some(DATA) => "give this rank's input pipeline more workers, or balance the data \
                 between ranks (every rank waits for the slowest)"
                .to_string(),
            Some(COMPILING) => "compile the same graphs on every rank (inputs of the same shapes \
                 everywhere); a compile on one rank stalls all of them"
                .to_string(),
            Some(_) => "read values to the host after the step, on every rank alike, or not at all \
                 in the loop: every rank waits for the slowest"
                .to_string(),
            None => "balance the work between ranks: every rank waits for the slowest at each \
                  collective"
                .to_string(),
        },
        lost_ns: lost[s],
    }]
}

const DATA: &str = "waiting for data";
const COMPILING: &str = "compiling";

/// What kept rank `s` in its windows before the collectives it came to last, beyond what the
/// other ranks spent alike in theirs: the cause with the largest excess (waiting for data,
/// compiling, reading values to the host), its excess and rank `s`'s line for it, where it
/// explains half of `lost`.
fn what_kept(
    ranks: &[(&Profile, &Analysis)],
    s: usize,
    windows: &[Vec<(u64, u64)>],
    lost: u64,
) -> Option<(&'static str, u64, u32)> {
    // Per cause: the time each rank spent on it inside its own windows, and rank `s`'s line.
    type Item = (u64, u64, u32);
    let causes: [(&'static str, fn(&Profile) -> Vec<Item>); 3] = [
        (DATA, |p| p.data_waits.iter().map(|w| (w.start_ns, w.duration_ns, w.location)).collect()),
        (COMPILING, |p| {
            let sync_loc: BTreeMap<u64, u32> = p.syncs.iter().map(|s| (s.id, s.location)).collect();
            p.compiles
                .iter()
                .map(|c| (c.start_ns, c.duration_ns, sync_loc.get(&c.sync).copied().unwrap_or(0)))
                .chain(p.function_compiles.iter().map(|f| (f.start_ns, f.duration_ns, f.caller.unwrap_or(f.function))))
                .collect()
        }),
        ("reading values to the host", |p| {
            p.value_reads.iter().map(|v| (v.start_ns, v.duration_ns, v.location)).collect()
        }),
    ];
    let inside = |r: usize, start: u64, dur: u64| -> u64 {
        windows
            .iter()
            .map(|w| start.saturating_add(dur).min(w[r].1).saturating_sub(start.max(w[r].0)))
            .sum()
    };
    let mut best: Option<(u64, &'static str, u32)> = None;
    for (name, items_of) in causes {
        let mut spent = vec![0u64; ranks.len()];
        let mut by_line: BTreeMap<u32, u64> = BTreeMap::new();
        for (r, (p, _)) in ranks.iter().enumerate() {
            for (start, dur, loc) in items_of(p) {
                let t = inside(r, start, dur);
                spent[r] = spent[r].saturating_add(t);
                if r == s {
                    *by_line.entry(loc).or_default() += t;
                }
            }
        }
        let others = spent.iter().enumerate().filter(|&(r, _)| r != s).map(|(_, &t)| t).sum::<u64>()
            / (ranks.len() as u64 - 1).max(1);
        let excess = spent[s].saturating_sub(others);
        let Some((line, _)) = by_line.into_iter().max_by_key(|&(_, t)| t) else { continue };
        if best.is_none_or(|(b, _, _)| excess > b) {
            best = Some((excess, name, line));
        }
    }
    best.filter(|&(excess, _, _)| excess.saturating_mul(2) >= lost).map(|(excess, name, line)| (name, excess, line))
}

/// Every rank's collectives and waits for data, each rank on a lane of its own
/// ([`timeline::RANK_LANES`] + its rank), on the clock of rank `shown` (the one whose own spans
/// they join): the ranks side by side, aligned by their collectives.
pub fn rank_lanes(ranks: &[(&Profile, &Analysis)], job: &Job, shown: usize) -> Vec<Span> {
    let base = job.ranks.get(shown).map(|r| r.offset_ns).unwrap_or(0);
    let mut out = Vec::new();
    for (i, (p, _)) in ranks.iter().enumerate() {
        let Some(rank) = job.ranks.get(i) else { continue };
        let shift = |t: u64| on_clock(rank.offset_ns, t).saturating_sub(base).max(0) as u64;
        let lane = timeline::RANK_LANES.saturating_add(rank.rank);
        let end_of = |c: &Collective| c.end_ns.unwrap_or_else(|| p.end_ns().max(c.start_ns));
        for c in &p.collectives {
            // Another rank's location ids are its own: the line goes in the name.
            let name = format!("{} #{} at {} (rank {})", c.op, c.seq, p.location(c.location), rank.rank);
            let mut sp = timeline::span(SpanKind::Collective, name, shift(c.start_ns), shift(end_of(c)), 0);
            sp.lane = lane;
            sp.bytes = Some(c.bytes);
            out.push(sp);
        }
        for w in &p.data_waits {
            let name = format!("waiting for data at {} (rank {})", p.location(w.location), rank.rank);
            let end = w.start_ns.saturating_add(w.duration_ns);
            let mut sp = timeline::span(SpanKind::DataWait, name, shift(w.start_ns), shift(end), 0);
            sp.lane = lane;
            out.push(sp);
        }
    }
    out.sort_by_key(|s| (s.start_ns, s.lane));
    out
}

/// The job's text: its ranks, then its findings.
pub fn text(job: &Job) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Job: {} ranks, {} collectives in common (the ranks' clocks aligned by them)",
        job.ranks.len(),
        job.matched
    );
    for r in &job.ranks {
        let _ = writeln!(
            out,
            "  rank {}: starts at +{}, {} in collectives ({:.0}% of its time between them{}){}",
            r.rank,
            format_ns(r.offset_ns.max(0) as f64),
            format_ns(r.collective_ns as f64),
            r.collective_share * 100.0,
            r.overlap.map(|o| format!(", {:.0}% of it beside compute", o * 100.0)).unwrap_or_default(),
            r.last_collective.as_ref().map(|c| format!("; last: {c}")).unwrap_or_default()
        );
    }
    if job.findings.is_empty() {
        let _ = writeln!(out, "Across ranks: nothing to report (no straggler, no diverging rank, no rank stuck)");
    } else {
        let _ = writeln!(out, "Across ranks:");
        for f in &job.findings {
            let _ = writeln!(out, "  [{}] {}", f.kind.title(), f.message);
            let _ = writeln!(out, "      advice: {}", f.advice);
        }
    }
    out
}
