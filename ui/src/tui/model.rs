//! What the views draw, derived from the profile by the profiler (analysis, step phases, graph
//! rows, timeline spans) and rebuilt only when the profile changed, never while drawing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use xlaprof_profiler::timeline::{spans, Span, LANES};
use xlaprof_profiler::views::{graph_rows, step_phases, GraphRow, StepPhases};
use xlaprof_profiler::{analyze, Analysis, Profile, Thresholds};

pub struct Model {
    /// The profile as it was when this model was built (a live one goes on growing).
    pub profile: Arc<Profile>,
    pub analysis: Analysis,
    pub steps: Vec<StepPhases>,
    pub graphs: Vec<GraphRow>,
    /// Timeline rows: (lane name, depth, spans sorted by start).
    pub rows: Vec<TimelineRow>,
    pub end_ns: u64,
    /// The slowest steps (indices into `steps`), slowest first.
    pub slowest_steps: Vec<usize>,
    /// How long building this model took (rebuilds while following are spaced by it).
    pub build_time: Duration,
}

pub struct TimelineRow {
    pub lane: &'static str,
    pub depth: u32,
    pub spans: Vec<Span>,
}

/// Deeper rows than this in one lane are folded into the last one.
const MAX_DEPTH: u32 = 2;

impl Model {
    pub fn build(profile: Arc<Profile>, thresholds: &Thresholds) -> Model {
        let started = Instant::now();
        let analysis = analyze(&profile, thresholds);
        let mut rows: Vec<TimelineRow> = Vec::new();
        for span in spans(&profile) {
            let lane = LANES[span.kind.lane() as usize];
            let depth = span.depth.min(MAX_DEPTH);
            match rows.iter_mut().find(|r| r.lane == lane && r.depth == depth) {
                Some(row) => row.spans.push(span),
                None => rows.push(TimelineRow { lane, depth, spans: vec![span] }),
            }
        }
        rows.sort_by_key(|r| (LANES.iter().position(|l| *l == r.lane), r.depth));
        for row in &mut rows {
            row.spans.sort_by_key(|s| s.start_ns);
        }
        let steps = step_phases(&profile);
        let mut slowest_steps: Vec<usize> = (0..steps.len()).collect();
        slowest_steps.sort_by_key(|&i| std::cmp::Reverse(steps[i].duration_ns));
        slowest_steps.truncate(8);
        Model {
            steps,
            slowest_steps,
            graphs: graph_rows(&profile),
            rows,
            end_ns: profile.end_ns(),
            profile,
            analysis,
            build_time: started.elapsed(),
        }
    }
}
