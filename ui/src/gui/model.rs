//! What the desktop viewer draws on top of the model both viewers share: the flamegraph as a
//! tree and the plots' series, computed once per load (and again when a followed file grows).

use std::sync::Arc;

use xlaprof_profiler::export::flame;
use xlaprof_profiler::{Profile, Thresholds};

use crate::viewer;

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

    /// The tree of the profiler's flamegraph stacks.
    pub fn from_stacks(stacks: &[flame::Stack]) -> FlameNode {
        let mut root = FlameNode { name: "all".into(), total_us: 0, children: Vec::new() };
        for stack in stacks {
            let frames: Vec<&str> = stack.frames.iter().map(String::as_str).collect();
            root.insert(&frames, stack.us);
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

/// Everything a frame draws: the shared model (analysis, spans, timeline rows, steps, graphs),
/// reached through `Deref`, and what only this viewer shows.
pub struct Model {
    pub view: viewer::Model,
    pub flame: FlameNode,
    /// The plots' series over steps, thinned to what a plot can show (see [`thin`]).
    pub step_time_ms: Vec<[f64; 2]>,
    pub hit_rate_percent: Vec<[f64; 2]>,
    /// The first device's memory in use after each step, MB (GPUs; empty on the CPU).
    pub device_memory_mb: Vec<[f64; 2]>,
}

impl std::ops::Deref for Model {
    type Target = viewer::Model;
    fn deref(&self) -> &viewer::Model {
        &self.view
    }
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
    /// The model of rank `shown` of a job's `ranks` (one rank: of its profile alone).
    pub fn new(ranks: &[Arc<Profile>], shown: usize, thresholds: &Thresholds) -> Model {
        let view = viewer::Model::build_ranks(ranks, shown, thresholds);
        let flame = FlameNode::from_stacks(&flame::stacks(&view.profile));
        let step_time_ms = thin(
            view.analysis
                .steps
                .iter()
                .map(|s| [s.index as f64, s.duration_ns as f64 / 1e6])
                .collect(),
            2000,
        );
        // A step's syncs that needed no compile, over its syncs.
        let hit_rate_percent = thin(
            view.analysis
                .steps
                .iter()
                .filter(|s| s.syncs > 0)
                .map(|s| {
                    let served = s.syncs.saturating_sub(s.compiles) as f64;
                    [s.index as f64, served / s.syncs as f64 * 100.0]
                })
                .collect(),
            2000,
        );
        let first_device = view.profile.device_memory.first().map(|m| m.device);
        let device_memory_mb = thin(
            view.profile
                .device_memory
                .iter()
                .filter(|m| Some(m.device) == first_device)
                .map(|m| [m.step as f64, m.in_use_bytes as f64 / (1u64 << 20) as f64])
                .collect(),
            2000,
        );
        Model { view, flame, step_time_ms, hit_rate_percent, device_memory_mb }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_become_a_tree_sorted_by_time() {
        let stack = |frames: &[&str], us| flame::Stack {
            frames: frames.iter().map(|f| f.to_string()).collect(),
            us,
        };
        let stacks = vec![
            stack(&["program", "steps", "sync at a.rs:1", "compile", "graph 1"], 30),
            stack(&["program", "steps", "sync at a.rs:1", "execute", "graph 1"], 10),
            stack(&["program", "steps", "host"], 5),
        ];
        let root = FlameNode::from_stacks(&stacks);
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
}
