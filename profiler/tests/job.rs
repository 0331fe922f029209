//! A job's ranks read as one (`analysis::job`), from profiles written record by record as ranks
//! would write them: clocks aligned by the collectives, and the findings across ranks. The real
//! jobs (torchrun, 4 ranks on gloo) are `tests/jobs/`.

use xlaprof_profiler::job::{self, JobKind};
use xlaprof_profiler::record::{Location, Meta, Record};
use xlaprof_profiler::{analyze, Profile, Thresholds};

const MS: u64 = 1_000_000;

/// A rank's profile: `world` ranks, started at `start_unix_ms`; line 10 is the loader's loop,
/// line 20 the backward whose gradient bucket is all-reduced, line 30 the final all-reduce.
struct Rank {
    p: Profile,
    seq: u64,
}

impl Rank {
    fn new(rank: u32, world: u32, start_unix_ms: u64) -> Rank {
        let mut p = Profile::default();
        p.apply(Record::Meta(Meta { program: "train.py".into(), start_unix_ms, ..Meta::default() }));
        for (id, line) in [(0u32, 10u32), (1, 20), (2, 30)] {
            p.apply(Record::Location {
                id,
                location: Location { file: "train.py".into(), line, function: "main".into() },
            });
        }
        p.apply(Record::JobRank { rank, world });
        Rank { p, seq: 0 }
    }

    fn enter(&mut self, t: u64, location: u32) {
        self.seq += 1;
        self.p.apply(Record::CollectiveEnter {
            t,
            group: "world".into(),
            seq: self.seq,
            op: "all_reduce".into(),
            bytes: 1024,
            location,
        });
    }

    fn leave(&mut self, t: u64) {
        self.p.apply(Record::CollectiveLeave { t, group: "world".into(), seq: self.seq });
    }

    fn data_wait(&mut self, t: u64, dur: u64) {
        self.p.apply(Record::DataWait { t, location: 0, dur });
    }
}

fn findings(ranks: &[Rank]) -> job::Job {
    let analyses: Vec<_> = ranks.iter().map(|r| analyze(&r.p, &Thresholds::default())).collect();
    let runs: Vec<_> = ranks.iter().map(|r| &r.p).zip(&analyses).collect();
    job::analyze(&runs)
}

/// `world` ranks, 20 steps of 10 ms, each ending in a collective that all leave together; the
/// closure adds what one rank does differently.
fn job(world: u32, clock_skew_ms: u64, mut each: impl FnMut(u32, u64, &mut Rank) -> u64) -> Vec<Rank> {
    // Rank 1's wall clock is 4 ms ahead of the others': only the collectives place it right.
    let mut ranks: Vec<Rank> = (0..world)
        .map(|r| Rank::new(r, world, 1_000 + r as u64 * clock_skew_ms + if r == 1 { 4 } else { 0 }))
        .collect();
    let mut now = 0u64; // on rank 0's clock
    for step in 0..20u64 {
        let enters: Vec<u64> = (0..world)
            .map(|r| now + 10 * MS + each(r, step, &mut ranks[r as usize]))
            .collect();
        let leave = enters.iter().max().unwrap() + MS;
        for (r, rank) in ranks.iter_mut().enumerate() {
            let skew = r as u64 * clock_skew_ms * MS;
            rank.enter(enters[r] - skew, 1);
            rank.leave(leave - skew);
        }
        now = leave;
    }
    ranks
}

#[test]
fn a_clean_job_is_aligned_by_its_collectives_and_has_nothing_across_ranks() {
    // Each rank started 7 ms after the one before: its records' times are its own, its wall
    // clock may be off (rank 1's), and the collectives put every rank back on one clock.
    let ranks = job(4, 7, |r, step, _| (r as u64 * 37 + step * 11) % 5 * 100_000);
    let j = findings(&ranks);
    assert_eq!(j.matched, 20);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    for (r, rank) in j.ranks.iter().enumerate() {
        assert_eq!(rank.rank, r as u32);
        assert_eq!(rank.offset_ns, r as i64 * 7 * MS as i64, "rank {r}'s clock");
    }
    assert!(job::text(&j).contains("nothing to report"));
}

#[test]
fn the_rank_the_others_wait_for_is_the_straggler_with_what_kept_it() {
    let ranks = job(4, 3, |r, _, rank| {
        if r == 2 {
            // Its loader takes 6 ms more: the wait ends just before it enters.
            let t = rank.p.end_ns() + 15 * MS;
            rank.data_wait(t, 6 * MS);
            6 * MS
        } else {
            0
        }
    });
    let j = findings(&ranks);
    let s: Vec<_> = j.findings.iter().filter(|f| f.kind == JobKind::Straggler).collect();
    assert_eq!(s.len(), 1, "{:?}", j.findings);
    assert_eq!(s[0].rank, 2);
    // The first collective is reached from start-up, not counted.
    assert!(s[0].message.contains("at 19 of 19 collectives"), "{}", s[0].message);
    assert!(s[0].message.contains("waiting for data"), "{}", s[0].message);
    assert!(s[0].message.contains("train.py:10"), "{}", s[0].message);
    assert!((105 * MS..=125 * MS).contains(&s[0].lost_ns), "{}", s[0].lost_ns);
    assert_eq!(j.findings.len(), 1);
}

#[test]
fn a_collective_one_rank_never_entered_shows_the_others_stuck_with_both_lines() {
    let mut ranks = job(3, 0, |_, _, _| 0);
    // The last collective: ranks 0 and 1 enter it at line 30; rank 2 never does.
    for r in &mut ranks[..2] {
        let t = r.p.end_ns() + MS;
        r.enter(t, 2);
    }
    let j = findings(&ranks);
    let stuck: Vec<_> = j.findings.iter().filter(|f| f.kind == JobKind::Stuck).collect();
    assert_eq!(stuck.len(), 1, "{:?}", j.findings);
    let m = &stuck[0].message;
    assert!(m.starts_with("ranks 0, 1 are stuck in all_reduce #21 of group world at train.py:30"), "{m}");
    assert!(m.contains("rank 2 never entered it"), "{m}");
    assert!(m.contains("its last collective of the group was all_reduce #20 of group world at train.py:20"), "{m}");
    assert_eq!(stuck[0].rank, 2);
    assert!(j.ranks[0].last_collective.as_deref().unwrap().ends_with("still inside"));
}

#[test]
fn collectives_called_in_another_order_are_a_divergence_with_both_lines() {
    let mut ranks = job(2, 0, |_, _, _| 0);
    let t = ranks[0].p.end_ns() + MS;
    ranks[0].enter(t, 2);
    ranks[0].leave(t + MS);
    ranks[1].enter(t, 0);
    ranks[1].leave(t + MS);
    let j = findings(&ranks);
    let d: Vec<_> = j.findings.iter().filter(|f| f.kind == JobKind::Divergence).collect();
    assert_eq!(d.len(), 1, "{:?}", j.findings);
    assert!(d[0].message.contains("out of step at number 21"), "{}", d[0].message);
    assert!(d[0].message.contains("train.py:30") && d[0].message.contains("train.py:10"), "{}", d[0].message);
}

#[test]
fn a_ranks_share_of_collectives_beside_compute_is_measured_where_it_computes() {
    // Rank 0 runs a compiled graph over the second half of each collective; rank 1 computes
    // nothing the profile sees (CPU eager).
    let mut ranks = job(2, 0, |_, _, _| 0);
    let collectives: Vec<(u64, u64)> =
        ranks[0].p.collectives.iter().map(|c| (c.start_ns, c.end_ns.unwrap())).collect();
    for (start, end) in collectives {
        let dur = (end - start) / 2;
        ranks[0].p.apply(Record::CapturedRun { t: end, hash: 1, dur });
    }
    let j = findings(&ranks);
    let share = j.ranks[0].overlap.expect("rank 0 computed");
    assert!((share - 0.5).abs() < 0.01, "{share}");
    assert_eq!(j.ranks[1].overlap, None);
    assert!(job::text(&j).contains("50% of it beside compute"), "{}", job::text(&j));
}

#[test]
fn a_rank_merely_slower_by_turns_is_no_straggler_and_one_always_slower_is() {
    // Rank 1 comes 1.5 ms late to 2 collectives in 3, with nothing of its own to explain it (4
    // ranks sharing 2 cores): no finding.
    let by_turns = job(4, 0, |r, step, _| if r == 1 && step % 3 != 0 { 1_500_000 } else { 0 });
    assert!(findings(&by_turns).findings.is_empty(), "{:?}", findings(&by_turns).findings);
    // Rank 1 comes 6 ms late to every one (its own slower work): the straggler, said so.
    let always = job(4, 0, |r, _, _| if r == 1 { 6 * MS } else { 0 });
    let j = findings(&always);
    assert_eq!(j.findings.len(), 1, "{:?}", j.findings);
    assert_eq!((j.findings[0].kind, j.findings[0].rank), (JobKind::Straggler, 1));
    assert!(j.findings[0].message.contains("its own work between collectives is slower"), "{}", j.findings[0].message);
    assert!(j.findings[0].advice.starts_with("balance the work"), "{}", j.findings[0].advice);
}
