//! What the viewers draw, derived from one profile by the profiler (analysis, spans, step phases,
//! graph rows) and built once per load, or again when a followed profile grew; never while
//! drawing. Timeline rows are indexed so a frame only reads the spans it shows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use xlaprof_profiler::timeline::{Span, SpanKind};
use xlaprof_profiler::views::{GraphRow, StepPhases};
use xlaprof_profiler::job::{self, Job};
use xlaprof_profiler::{analyze, Analysis, Profile, Thresholds};

/// One row of the timeline: the spans of one lane at one nesting depth, sorted by start.
pub struct TimelineRow {
    pub lane: u32,
    pub depth: u32,
    /// Indexes into `Model::spans`, sorted by start time.
    pub spans: Vec<u32>,
    /// Start, end and kind of each of `spans`, side by side: a zoomed-out frame reads every
    /// span of a row, and these few bytes each are all it needs.
    pub starts: Vec<u64>,
    pub ends: Vec<u64>,
    pub kinds: Vec<SpanKind>,
    /// `max_end_ns[i]`: the latest end of `spans[..=i]`; non-decreasing, so the first span that
    /// can reach into a visible range is found by binary search even when spans overlap.
    pub max_end_ns: Vec<u64>,
}

impl TimelineRow {
    /// The range of `spans` that can intersect `[from_ns, to_ns]`.
    pub fn visible(&self, from_ns: u64, to_ns: u64) -> std::ops::Range<usize> {
        let first = self.max_end_ns.partition_point(|&end| end < from_ns);
        let last = first + self.starts[first..].partition_point(|&start| start <= to_ns);
        first..last
    }
}

/// Everything a frame draws, derived from one profile.
pub struct Model {
    /// The profile as it was when this model was built (a live one goes on growing).
    pub profile: Arc<Profile>,
    /// Its analysis: findings, step phases, graph rows and spans, drawn as they are.
    pub analysis: Analysis,
    /// The spans laid out in timeline rows (the one thing only the viewers need).
    pub rows: Vec<TimelineRow>,
    /// Step indexes, slowest first.
    pub slowest_steps: Vec<u64>,
    /// The last time anything happened (ns).
    pub end_ns: u64,
    /// How long building this model took (rebuilds while following are spaced by it).
    pub build_time: Duration,
    /// A job's: which rank is shown, of how many, and what the ranks side by side show.
    pub job: Option<JobView>,
}

/// A job's ranks, one of them shown.
pub struct JobView {
    pub shown: usize,
    pub job: Job,
}

impl Model {
    pub fn build(profile: Arc<Profile>, thresholds: &Thresholds) -> Model {
        let started = Instant::now();
        let analysis = analyze(&profile, thresholds);
        let rows = timeline_rows(&analysis.spans);
        let mut by_time: Vec<&StepPhases> = analysis.steps.iter().collect();
        by_time.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.index.cmp(&b.index)));
        let slowest_steps = by_time.iter().map(|s| s.index).collect();
        let end_ns =
            profile.end_ns().max(analysis.spans.iter().map(|s| s.end_ns).max().unwrap_or(0));
        Model { profile, analysis, rows, slowest_steps, end_ns, build_time: started.elapsed(), job: None }
    }

    /// The model of rank `shown` of a job's `ranks`, with the job's analysis (one rank: the
    /// model of its profile alone).
    pub fn build_ranks(ranks: &[Arc<Profile>], shown: usize, thresholds: &Thresholds) -> Model {
        let started = Instant::now();
        let mut model = Model::build(ranks.get(shown).cloned().unwrap_or_default(), thresholds);
        if ranks.len() > 1 {
            let analyses: Vec<Analysis> = ranks
                .iter()
                .enumerate()
                .map(|(i, p)| if i == shown { model.analysis.clone() } else { analyze(p, thresholds) })
                .collect();
            let runs: Vec<(&Profile, &Analysis)> =
                ranks.iter().map(|p| p.as_ref()).zip(&analyses).collect();
            let job = job::analyze(&runs);
            // The ranks side by side on the timeline, below the shown rank's own lanes.
            let lanes = job::rank_lanes(&runs, &job, shown);
            if !lanes.is_empty() {
                let spans = &mut model.analysis.spans;
                spans.extend(lanes);
                spans.sort_by(|a, b| a.start_ns.cmp(&b.start_ns).then(a.lane.cmp(&b.lane)));
                model.rows = timeline_rows(spans);
                model.end_ns = model.end_ns.max(spans.iter().map(|s| s.end_ns).max().unwrap_or(0));
            }
            model.job = Some(JobView { shown, job });
        }
        model.build_time = started.elapsed();
        model
    }

    /// The step with index `index` (steps are numbered from 1, in order, so this is a lookup).
    pub fn step(&self, index: u64) -> Option<&StepPhases> {
        let at = (index as usize).checked_sub(1).and_then(|i| self.analysis.steps.get(i));
        at.filter(|s| s.index == index)
            .or_else(|| self.analysis.steps.iter().find(|s| s.index == index))
    }

    pub fn graph(&self, hash: u64) -> Option<&GraphRow> {
        self.analysis.graphs.iter().find(|g| g.hash == hash)
    }
}

fn timeline_rows(spans: &[Span]) -> Vec<TimelineRow> {
    let mut rows: Vec<TimelineRow> = Vec::new();
    // `spans` is sorted by start, so each row's indexes come out sorted too.
    for (i, s) in spans.iter().enumerate() {
        let (lane, depth) = (s.lane, s.depth);
        let row = match rows.iter().position(|r| r.lane == lane && r.depth == depth) {
            Some(r) => r,
            None => {
                rows.push(TimelineRow {
                    lane,
                    depth,
                    spans: Vec::new(),
                    starts: Vec::new(),
                    ends: Vec::new(),
                    kinds: Vec::new(),
                    max_end_ns: Vec::new(),
                });
                rows.len() - 1
            }
        };
        let row = &mut rows[row];
        let max_end = row.max_end_ns.last().copied().unwrap_or(0).max(s.end_ns);
        row.spans.push(i as u32);
        row.starts.push(s.start_ns);
        row.ends.push(s.end_ns);
        row.kinds.push(s.kind);
        row.max_end_ns.push(max_end);
    }
    rows.sort_by_key(|r| (r.lane, r.depth));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn culling_finds_overlapping_and_later_spans() {
        // Spans: [0,100] [10,20] [30,40] [200,300]
        let row = TimelineRow {
            lane: 0,
            depth: 0,
            spans: vec![0, 1, 2, 3],
            starts: vec![0, 10, 30, 200],
            ends: vec![100, 20, 40, 300],
            kinds: vec![SpanKind::Step; 4],
            max_end_ns: vec![100, 100, 100, 300],
        };
        assert_eq!(row.visible(50, 60), 0..3);
        assert_eq!(row.visible(150, 160), 3..3);
        assert_eq!(row.visible(250, 400), 3..4);
        assert_eq!(row.visible(400, 500), 4..4);
    }
}
