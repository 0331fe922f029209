//! The engine's counters as a profile keeps them: named by the engine, shared names per profile.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::record::clip_to;

/// The engine's counters at one moment (totals since the program started), by the engine's own
/// names: whatever counters the engine had when the profile was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counters {
    pub(super) names: Arc<CounterNames>,
    pub(super) values: Vec<u64>,
}

/// The counter names of a profile (from its `Meta`), shared by all its snapshots.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct CounterNames {
    names: Vec<String>,
    /// Each name's position; the first one wins if a (damaged) profile repeats a name.
    index: HashMap<String, usize>,
}

impl CounterNames {
    pub(crate) fn new(names: &[String]) -> CounterNames {
        // A counter's name is an identifier; a crafted one of any length would be repeated for
        // every sync of the JSON export.
        let names: Vec<String> = names.iter().map(|n| clip_to(n, 66).into_owned()).collect();
        let mut index = HashMap::new();
        for (i, name) in names.iter().enumerate() {
            index.entry(name.clone()).or_insert(i);
        }
        CounterNames { names, index }
    }
}

impl Counters {
    /// The counter the engine calls `name` (`Counters::named`), if the profile has it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.names.index.get(name).and_then(|&i| self.values.get(i).copied())
    }

    /// Every counter with its name, in the engine's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        let names = &self.names;
        names
            .names
            .iter()
            .zip(&self.values)
            .enumerate()
            .filter(|(i, (name, _))| names.index.get(name.as_str()) == Some(i))
            .map(|(_, (name, &value))| (name.as_str(), value))
    }
}

/// By name, as an object: `{"tensors_created": 12, ...}`.
impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}
