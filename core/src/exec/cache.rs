//! The in-memory compiled-graph cache: structural key -> executable, least recently used evicted.

use std::collections::HashMap;
use std::sync::Arc;

use super::partition::Partitioning;
use crate::events::GraphSummary;
use crate::runtime::Executable;

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
    capacity: usize,
    clock: u64,
    evictions: u64,
}

impl GraphCache {
    pub fn new(capacity: usize) -> GraphCache {
        GraphCache { entries: HashMap::new(), capacity: capacity.max(1), clock: 0, evictions: 0 }
    }

    pub fn get(&mut self, key: u64) -> Option<CachedGraph> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(&key).map(|(graph, used)| {
            *used = clock;
            graph.clone()
        })
    }

    pub fn insert(&mut self, key: u64, graph: CachedGraph) {
        self.clock += 1;
        self.entries.insert(key, (graph, self.clock));
        self.evict();
    }

    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        self.evict();
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
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
