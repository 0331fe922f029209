//! What the viewer draws, computed once per load (and again when a followed file grows): the
//! profiler's analysis, spans, step phases and graph rows, plus indexes that make a frame cheap
//! (spans grouped per timeline row, sorted, with a running maximum of their ends for culling).

use std::path::{Path, PathBuf};

use xlaprof_profiler::export::flame;
use xlaprof_profiler::file::Follower;
use xlaprof_profiler::timeline::{self, Span, LANES};
use xlaprof_profiler::views::{self, GraphRow, StepPhases};
use xlaprof_profiler::{analyze, Analysis, Profile, Thresholds};

/// One row of the timeline: the spans of one lane at one nesting depth, sorted by start.
pub struct TimelineRow {
    pub lane: u32,
    pub depth: u32,
    /// Indexes into `Model::spans`, sorted by start time.
    pub spans: Vec<u32>,
    /// `max_end_ns[i]`: the latest end of `spans[..=i]`; non-decreasing, so the first span that
    /// can reach into a visible range is found by binary search even when spans overlap.
    pub max_end_ns: Vec<u64>,
}

impl TimelineRow {
    /// The range of `spans` that can intersect `[from_ns, to_ns]`.
    pub fn visible(&self, starts: &[u64], from_ns: u64, to_ns: u64) -> std::ops::Range<usize> {
        let first = self.max_end_ns.partition_point(|&end| end < from_ns);
        let last = first + self.spans[first..].partition_point(|&i| starts[i as usize] <= to_ns);
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
    /// `spans[i].start_ns`, contiguous, for the culling binary searches.
    pub span_starts: Vec<u64>,
    pub rows: Vec<TimelineRow>,
    pub steps: Vec<StepPhases>,
    pub graphs: Vec<GraphRow>,
    pub flame: FlameNode,
    /// Step indexes, slowest first.
    pub slowest_steps: Vec<u64>,
}

impl Model {
    pub fn new(profile: Profile, thresholds: &Thresholds) -> Model {
        let analysis = analyze(&profile, thresholds);
        let spans = timeline::spans(&profile);
        let span_starts: Vec<u64> = spans.iter().map(|s| s.start_ns).collect();
        let rows = timeline_rows(&spans);
        let steps = views::step_phases(&profile);
        let graphs = views::graph_rows(&profile);
        let flame = FlameNode::from_folded(&flame::folded(&profile));
        let mut by_time: Vec<&StepPhases> = steps.iter().collect();
        by_time.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.index.cmp(&b.index)));
        let slowest_steps = by_time.iter().map(|s| s.index).collect();
        Model { profile, analysis, spans, span_starts, rows, steps, graphs, flame, slowest_steps }
    }

    pub fn end_ns(&self) -> u64 {
        self.profile.end_ns().max(self.spans.iter().map(|s| s.end_ns).max().unwrap_or(0))
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
                rows.push(TimelineRow { lane, depth, spans: Vec::new(), max_end_ns: Vec::new() });
                rows.len() - 1
            }
        };
        let row = &mut rows[row];
        let max_end = row.max_end_ns.last().copied().unwrap_or(0).max(s.end_ns);
        row.spans.push(i as u32);
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
    fn culling_finds_overlapping_and_later_spans() {
        // Spans: [0,100] [10,20] [30,40] [200,300]
        let starts = [0u64, 10, 30, 200];
        let row = TimelineRow {
            lane: 0,
            depth: 0,
            spans: vec![0, 1, 2, 3],
            max_end_ns: vec![100, 100, 100, 300],
        };
        assert_eq!(row.visible(&starts, 50, 60), 0..3);
        assert_eq!(row.visible(&starts, 150, 160), 3..3);
        assert_eq!(row.visible(&starts, 250, 400), 3..4);
        assert_eq!(row.visible(&starts, 400, 500), 4..4);
    }
}
