//! The in-memory compiled-graph cache: structural key -> executable, least recently used evicted.

use std::collections::HashMap;
use std::sync::Arc;

use super::partition::Partitioning;
use crate::events::GraphSummary;
use crate::runtime::Executable;

/// Every executable the CPU plugin compiles holds a hundred or more memory mappings of its
/// own (its code and data, per kernel), and a process may have only `vm.max_map_count` of them
/// (65530 by default on Linux). A program that compiles many distinct graphs (an L-BFGS step
/// grows its history, and with it its graph, for a hundred iterations) ran out of mappings
/// with a few hundred executables cached, far below the cache's capacity, and XLA's compiler
/// then crashed the process. So from this many entries on, insertions count the process's
/// mappings (see `CHECK_MAPS_EVERY`), and past half the limit the least recently used quarter
/// is evicted (their mappings go with the last holder of each executable).
const CHECK_MAPS_FROM: usize = 32;

/// The mappings are counted at every this many insertions, not each: the kernel writes out every
/// mapping to be counted (2 ms with two thousand, 60 ms with thirty thousand), and sixteen
/// executables add a few thousand, far inside the half of the limit kept in reserve.
const CHECK_MAPS_EVERY: u64 = 16;

/// The process's memory mappings and the system's limit on them, where the system says
/// (Linux); None elsewhere.
fn memory_maps() -> Option<(usize, usize)> {
    // The limit is the system's setting: read once.
    static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let limit = (*LIMIT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/vm/max_map_count").ok()?.trim().parse().ok()
    }))?;
    let maps = std::fs::read("/proc/self/maps").ok()?;
    Some((maps.iter().filter(|&&b| b == b'\n').count(), limit))
}

/// How many of `entries` cached graphs to keep: at most `capacity`, and three quarters of them
/// when the process's memory mappings (`maps`: in use, limit) are past half the limit.
fn entries_to_keep(entries: usize, capacity: usize, maps: Option<(usize, usize)>) -> usize {
    let near_limit = maps.is_some_and(|(in_use, limit)| in_use > limit / 2);
    if near_limit {
        capacity.min(entries - entries / 4)
    } else {
        capacity
    }
}

#[derive(Clone)]
pub(crate) struct CachedGraph {
    pub executable: Arc<Executable>,
    pub summary: Arc<GraphSummary>,
    pub stablehlo: Arc<str>,
    /// The mesh and output shardings of a partitioned graph.
    pub partitioning: Option<Arc<Partitioning>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: usize,
    pub capacity: usize,
    pub evictions: u64,
}

pub(crate) struct GraphCache {
    entries: HashMap<u64, (CachedGraph, u64)>,
    /// The graphs compiled with inputs donated, by the key they have with none donated: each
    /// one's key and its donations `(parameter, output)`. See [`GraphCache::get_same_graph`].
    donating: HashMap<u64, Vec<(u64, Vec<(usize, usize)>)>>,
    capacity: usize,
    clock: u64,
    insertions: u64,
    evictions: u64,
}

impl GraphCache {
    pub fn new(capacity: usize) -> GraphCache {
        GraphCache {
            entries: HashMap::new(),
            donating: HashMap::new(),
            capacity: capacity.max(1),
            clock: 0,
            insertions: 0,
            evictions: 0,
        }
    }

    pub fn get(&mut self, key: u64) -> Option<CachedGraph> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(&key).map(|(graph, used)| {
            *used = clock;
            graph.clone()
        })
    }

    /// Caches `graph` under `key`; `undonated_key` and `donated` say what it donates (see
    /// [`GraphCache::get_same_graph`]).
    pub fn insert(
        &mut self,
        key: u64,
        graph: CachedGraph,
        undonated_key: u64,
        donated: &[(usize, usize)],
    ) {
        self.clock += 1;
        self.insertions += 1;
        self.entries.insert(key, (graph, self.clock));
        if !donated.is_empty() {
            let same = self.donating.entry(undonated_key).or_default();
            same.retain(|(k, _)| *k != key);
            same.push((key, donated.to_vec()));
        }
        self.evict();
    }

    /// The same graph compiled with other donations than `donatable` allows, to run instead of
    /// compiling for the donations alone: best one whose every donated input is donatable now
    /// (the one donating most), else the one that donates fewest inputs held elsewhere now,
    /// which are then launched as not donatable (`kept`: XLA copies them). Not donating an input
    /// is always correct; it only keeps that buffer until the tensor goes. A graph whose inputs
    /// become donatable later (Hugging Face's Trainer drops a reference after a few steps), or
    /// stop being donatable for a step (a value the collector has not freed yet), runs the
    /// executable it has. Returns its key, the donations that take place, the kept inputs.
    pub fn get_same_graph(
        &mut self,
        undonated_key: u64,
        donatable: &[(usize, usize)],
    ) -> Option<(u64, Vec<(usize, usize)>, Vec<usize>, CachedGraph)> {
        let held = |d: &[(usize, usize)]| -> Vec<usize> {
            d.iter().map(|&(p, _)| p).filter(|p| !donatable.iter().any(|(q, _)| q == p)).collect()
        };
        // (held now, donations kept): fewest held first, then most donations.
        let mut best: Option<(u64, Vec<(usize, usize)>, Vec<usize>)> = None;
        if self.entries.contains_key(&undonated_key) {
            best = Some((undonated_key, Vec::new(), Vec::new()));
        }
        let entries = &self.entries;
        if let Some(same) = self.donating.get_mut(&undonated_key) {
            same.retain(|(k, _)| entries.contains_key(k)); // evicted since
            for (k, d) in same.iter() {
                let kept = held(d);
                let better = best.as_ref().is_none_or(|(_, bd, bk)| {
                    (kept.len(), std::cmp::Reverse(d.len()))
                        < (bk.len(), std::cmp::Reverse(bd.len()))
                });
                if better {
                    let donated = d.iter().copied().filter(|(p, _)| !kept.contains(p)).collect();
                    best = Some((*k, donated, kept));
                }
            }
        }
        let (key, donated, kept) = best?;
        self.get(key).map(|graph| (key, donated, kept, graph))
    }

    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        self.evict();
    }

    fn evict(&mut self) {
        let entries = self.entries.len();
        let due = entries >= CHECK_MAPS_FROM && self.insertions % CHECK_MAPS_EVERY == 0;
        let maps = if due { memory_maps() } else { None };
        let keep = entries_to_keep(entries, self.capacity, maps);
        while self.entries.len() > keep {
            // A linear scan: eviction is rare and the cache holds at most a few thousand graphs.
            let Some((&oldest, _)) = self.entries.iter().min_by_key(|(_, (_, used))| *used) else {
                return;
            };
            self.entries.remove(&oldest);
            self.evictions += 1;
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.entries.len(),
            capacity: self.capacity,
            evictions: self.evictions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_sheds_a_quarter_when_the_process_nears_its_limit_of_memory_maps() {
        assert_eq!(entries_to_keep(100, 1024, Some((30_000, 65_530))), 1024);
        assert_eq!(entries_to_keep(100, 1024, Some((33_000, 65_530))), 75);
        assert_eq!(entries_to_keep(100, 50, Some((33_000, 65_530))), 50);
        assert_eq!(entries_to_keep(2000, 1024, None), 1024, "no mapping count: the capacity alone");
    }

    #[test]
    fn this_system_reports_its_memory_maps() {
        if cfg!(target_os = "linux") {
            let (in_use, limit) = memory_maps().expect("Linux has /proc/self/maps");
            assert!(in_use > 10 && in_use < limit, "{in_use} of {limit}");
        }
    }
}
