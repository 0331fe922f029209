//! What the viewer draws, computed once per load (and again when a followed file grows): the
//! profiler's analysis, spans, step phases and graph rows, plus indexes that make a frame cheap
//! (spans grouped per timeline row, sorted, with a running maximum of their ends for culling).

use std::path::{Path, PathBuf};

use xlaprof_profiler::export::flame;
use xlaprof_profiler::file::Follower;
use xlaprof_profiler::timeline::{self, Span, SpanKind, LANES};
use xlaprof_profiler::views::{self, GraphRow, StepPhases};
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

/// A node of the flamegraph (the profiler's folded stacks as a tree).
#[derive(Debug, Clone, PartialEq)]
pub struct FlameNode {
    pub name: String,
    pub total_us: u64,
    pub children: Vec<FlameNode>,
}

impl FlameNode {
    fn insert(&mut self, frames: &[&str], us: u64) {
        self.total_us += us;
        let Some((first, rest)) = frames.split_first() else { return };
        let child = match self.children.iter().position(|c| c.name == *first) {
            Some(i) => &mut self.children[i],
            None => {
                self.children.push(FlameNode {
                    name: first.to_string(),
                    total_us: 0,
                    children: Vec::new(),
                });
                self.children.last_mut().expect("just pushed")
            }
        };
        child.insert(rest, us);
    }

    /// The tree of `flame::folded` lines (`a;b;c 123`).
    pub fn from_folded(lines: &[String]) -> FlameNode {
        let mut root = FlameNode { name: "all".into(), total_us: 0, children: Vec::new() };
        for line in lines {
            let Some((stack, count)) = line.rsplit_once(' ') else { continue };
            let Ok(us) = count.parse::<u64>() else { continue };
            let frames: Vec<&str> = stack.split(';').collect();
            root.insert(&frames, us);
        }
        root.sort();
        root
    }

    fn sort(&mut self) {
        self.children.sort_by(|a, b| b.total_us.cmp(&a.total_us).then(a.name.cmp(&b.name)));
        for c in &mut self.children {
            c.sort();
        }
    }
}

/// Everything a frame draws, derived from one profile.
pub struct Model {
    pub profile: Profile,
    pub analysis: Analysis,
    pub spans: Vec<Span>,
    pub rows: Vec<TimelineRow>,
    pub steps: Vec<StepPhases>,
    pub graphs: Vec<GraphRow>,
    pub flame: FlameNode,
    /// Step indexes, slowest first.
    pub slowest_steps: Vec<u64>,
    /// The last time anything happened (ns).
    pub end_ns: u64,
    /// The plots' series over steps, thinned to what a plot can show (see [`thin`]).
    pub step_time_ms: Vec<[f64; 2]>,
    pub hit_rate_percent: Vec<[f64; 2]>,
}

/// At most about `2 * buckets` points: the lowest and highest point of each run of consecutive
/// points, in order, so spikes survive (a plot is a few thousand pixels wide at most).
pub fn thin(points: Vec<[f64; 2]>, buckets: usize) -> Vec<[f64; 2]> {
    if points.len() <= 2 * buckets {
        return points;
    }
    let per = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(2 * buckets);
    for chunk in points.chunks(per) {
        let lowest = chunk.iter().min_by(|a, b| a[1].total_cmp(&b[1])).copied();
        let highest = chunk.iter().max_by(|a, b| a[1].total_cmp(&b[1])).copied();
        if let (Some(lo), Some(hi)) = (lowest, highest) {
            if lo[0] <= hi[0] {
                out.extend([lo, hi]);
            } else {
                out.extend([hi, lo]);
            }
        }
    }
    out
}

impl Model {
    pub fn new(profile: Profile, thresholds: &Thresholds) -> Model {
        let analysis = analyze(&profile, thresholds);
        let spans = timeline::spans(&profile);
        let rows = timeline_rows(&spans);
        let steps = views::step_phases(&profile);
        let graphs = views::graph_rows(&profile);
        let flame = FlameNode::from_folded(&flame::folded(&profile));
        let mut by_time: Vec<&StepPhases> = steps.iter().collect();
        by_time.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.index.cmp(&b.index)));
        let slowest_steps = by_time.iter().map(|s| s.index).collect();
        let end_ns = profile.end_ns().max(spans.iter().map(|s| s.end_ns).max().unwrap_or(0));
        let step_time_ms = thin(
            steps.iter().map(|s| [s.index as f64, s.duration_ns as f64 / 1e6]).collect(),
            2000,
        );
        // A step's syncs that needed no compile, over its syncs.
        let hit_rate_percent = thin(
            steps
                .iter()
                .filter(|s| s.syncs > 0)
                .map(|s| {
                    let served = s.syncs.saturating_sub(s.compiles) as f64;
                    [s.index as f64, served / s.syncs as f64 * 100.0]
                })
                .collect(),
            2000,
        );
        Model {
            profile,
            analysis,
            spans,
            rows,
            steps,
            graphs,
            flame,
            slowest_steps,
            end_ns,
            step_time_ms,
            hit_rate_percent,
        }
    }

    /// The step with index `index` (steps are numbered from 1, in order, so this is a lookup).
    pub fn step(&self, index: u64) -> Option<&StepPhases> {
        let at = (index as usize).checked_sub(1).and_then(|i| self.steps.get(i));
        at.filter(|s| s.index == index).or_else(|| self.steps.iter().find(|s| s.index == index))
    }

    pub fn graph(&self, hash: u64) -> Option<&GraphRow> {
        self.graphs.iter().find(|g| g.hash == hash)
    }
}

fn timeline_rows(spans: &[Span]) -> Vec<TimelineRow> {
    let mut rows: Vec<TimelineRow> = Vec::new();
    // `spans` is sorted by start, so each row's indexes come out sorted too.
    for (i, s) in spans.iter().enumerate() {
        let (lane, depth) = (s.kind.lane(), s.depth);
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

pub fn lane_name(lane: u32) -> &'static str {
    LANES.get(lane as usize).copied().unwrap_or("other")
}

/// Where the profile comes from: a file read once, or a file still being written.
pub struct Source {
    pub path: PathBuf,
    follower: Option<Follower>,
    profile: Profile,
}

impl Source {
    /// Reads a whole file. Damage becomes warnings in the profile; only a file that cannot be
    /// opened or is no profile at all is an error.
    pub fn open(path: &Path) -> Result<(Source, Profile), String> {
        let profile = xlaprof_profiler::load(path).map_err(|e| e.to_string())?;
        Ok((
            Source { path: path.to_path_buf(), follower: None, profile: Profile::default() },
            profile,
        ))
    }

    /// Follows a file a program is writing: what is there now, then more at each `poll`.
    pub fn follow(path: &Path) -> Result<(Source, Profile), String> {
        let mut follower = Follower::open(path).map_err(|e| e.to_string())?;
        let mut profile = Profile::default();
        let decoded = follower.poll().map_err(|e| format!("{}: {e}", path.display()))?;
        profile.warnings.extend(decoded.warnings);
        for r in decoded.records {
            profile.apply(r);
        }
        let snapshot = profile.clone();
        Ok((Source { path: path.to_path_buf(), follower: Some(follower), profile }, snapshot))
    }

    pub fn is_live(&self) -> bool {
        self.follower.is_some()
    }

    /// New records of a followed file: the grown profile when anything arrived.
    pub fn poll(&mut self) -> Result<Option<Profile>, String> {
        let Some(follower) = &mut self.follower else { return Ok(None) };
        let decoded = follower.poll().map_err(|e| format!("{}: {e}", self.path.display()))?;
        if decoded.records.is_empty() && decoded.warnings.is_empty() {
            return Ok(None);
        }
        self.profile.warnings.extend(decoded.warnings);
        for r in decoded.records {
            self.profile.apply(r);
        }
        Ok(Some(self.profile.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_stacks_become_a_tree_sorted_by_time() {
        let lines = vec![
            "program;steps;sync at a.rs:1;compile;graph 1 30".to_string(),
            "program;steps;sync at a.rs:1;execute;graph 1 10".to_string(),
            "program;steps;host 5".to_string(),
            "broken line without count".to_string(),
        ];
        let root = FlameNode::from_folded(&lines);
        assert_eq!(root.total_us, 45);
        let steps = &root.children[0].children[0];
        assert_eq!(steps.name, "steps");
        assert_eq!(steps.children[0].name, "sync at a.rs:1");
        assert_eq!(steps.children[0].total_us, 40);
        assert_eq!(steps.children[0].children[0].name, "compile");
        assert_eq!(steps.children[1].name, "host");
    }

    #[test]
    fn thinning_keeps_the_extremes_in_order() {
        let points: Vec<[f64; 2]> =
            (0..1000).map(|i| [i as f64, if i == 537 { 99.0 } else { 1.0 }]).collect();
        let thinned = thin(points.clone(), 10);
        assert!(thinned.len() <= 20);
        assert!(thinned.contains(&[537.0, 99.0]));
        assert!(thinned.windows(2).all(|w| w[0][0] <= w[1][0]));
        assert_eq!(thin(points[..15].to_vec(), 10).len(), 15);
    }

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
