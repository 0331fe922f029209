//! Many devices, summed up once for every view: per device, how long it computed and how often
//! the others waited for it; per partitioned graph, its mesh, its shardings and the collectives
//! XLA inserted, with the bytes they move.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::median;
use crate::profile::Profile;
use crate::record::PartitionRec;
use crate::util::saturating_sum;

/// One device of the profile's partitioned executions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceRow {
    pub device: u32,
    /// Time from each launch to when this device finished, summed.
    pub busy_ns: u64,
    /// Executions in which it finished last (the straggler).
    pub last: u64,
    /// How long after the first device it finished, summed over executions.
    pub behind_ns: u64,
}

/// A partitioned graph, as the devices view lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionedGraph {
    pub hash: u64,
    pub executions: u64,
    pub plan: PartitionRec,
    /// Bytes its collectives moved to each device, over all its executions.
    pub collective_bytes: u64,
    /// Its sharding table, one line each (see [`Devices::sharding_table`]).
    pub sharding: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Devices {
    pub rows: Vec<DeviceRow>,
    pub graphs: Vec<PartitionedGraph>,
    /// Executions on several devices, and the median spread of their devices' finishing times.
    pub executions: u64,
    pub median_skew_ns: u64,
}

impl Devices {
    /// Whether anything ran on several devices.
    pub fn any(&self) -> bool {
        !self.graphs.is_empty() || self.executions > 0
    }

    /// The sharding table of partitioned graph `hash`, for the graphs views: the mesh, each split
    /// input and output (with the line that made the input), the rest as whole, XLA's memory and
    /// flops per device, and the collectives with their bytes and lines. Empty for a graph on one
    /// device.
    pub fn sharding_table(&self, hash: u64) -> &[String] {
        self.graphs.iter().find(|g| g.hash == hash).map_or(&[], |g| &g.sharding)
    }
}

pub fn devices(p: &Profile) -> Devices {
    let mut rows: BTreeMap<u32, DeviceRow> = BTreeMap::new();
    let mut skews = Vec::new();
    for e in &p.executions {
        let Some((first, last, _)) = e.device_spread() else { continue };
        let plan = p.graphs.get(&e.hash).and_then(|g| g.partition.as_ref());
        skews.push(last - first);
        for (partition, &end) in e.device_end_ns.iter().enumerate() {
            let device = plan.map_or(partition as u32, |pl| pl.device(partition));
            let row = rows.entry(device).or_insert(DeviceRow {
                device,
                busy_ns: 0,
                last: 0,
                behind_ns: 0,
            });
            row.busy_ns = row.busy_ns.saturating_add(end.saturating_sub(e.start_ns));
            row.behind_ns = row.behind_ns.saturating_add(end - first);
            if end == last && last > first {
                row.last += 1;
            }
        }
    }
    let graphs = p
        .graphs
        .values()
        .filter_map(|g| {
            let plan = g.partition.clone()?;
            let executions = u64::from(g.executions);
            let collective_bytes = plan.collective_bytes().saturating_mul(executions);
            let sharding = sharding_table(p, g.def.hash);
            Some(PartitionedGraph {
                hash: g.def.hash,
                executions,
                plan,
                collective_bytes,
                sharding,
            })
        })
        .collect();
    Devices {
        rows: rows.into_values().collect(),
        graphs,
        executions: skews.len() as u64,
        median_skew_ns: median(skews),
    }
}

/// Bytes all partitioned graphs' collectives moved to each device.
pub fn total_collective_bytes(d: &Devices) -> u64 {
    saturating_sum(d.graphs.iter().map(|g| g.collective_bytes))
}

/// The lines of [`Devices::sharding_table`], made once per analysis.
fn sharding_table(p: &Profile, hash: u64) -> Vec<String> {
    use crate::record::{clip_to, LISTED};
    let Some(g) = p.graphs.get(&hash) else { return Vec::new() };
    let Some(plan) = &g.partition else { return Vec::new() };
    let mut lines = vec![format!(
        "mesh {} on devices {:?}",
        plan.mesh_text(),
        &plan.devices[..plan.devices.len().min(LISTED)]
    )];
    // XLA's memory plan and cost analysis of a partitioned program are one partition's.
    let memory = g.memory.map(|m| crate::util::format_bytes(m.peak_memory_bytes as f64));
    let flops = g.cost.map(|c| format!("{:.3e} flops", c.flops));
    if memory.is_some() || flops.is_some() {
        let parts: Vec<String> =
            [memory.map(|m| format!("peak memory {m}")), flops].into_iter().flatten().collect();
        lines.push(format!("per device: {}", parts.join(", ")));
    }
    let mut whole = 0;
    for (i, (spec, input)) in plan.inputs.iter().zip(&g.def.inputs).enumerate() {
        match spec {
            Some(spec) if lines.len() < 2 * LISTED => lines.push(format!(
                "input {i:<3} {:<16} split {:<16} from {}",
                input.shape.to_string(),
                clip_to(spec, 66),
                p.location(input.location)
            )),
            _ => whole += 1,
        }
    }
    let split_outputs: Vec<String> = plan
        .outputs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| format!("{i} {}", clip_to(s, 66))))
        .take(LISTED)
        .collect();
    lines.push(format!(
        "{whole} inputs whole on every device; outputs split: {}",
        if split_outputs.is_empty() { "none".to_string() } else { split_outputs.join(", ") }
    ));
    if plan.collectives.is_empty() {
        lines.push("no collectives".to_string());
    }
    for c in plan.collectives.iter().take(LISTED) {
        let at = c.location.map(|l| format!(" at {}", p.location(l))).unwrap_or_default();
        lines.push(format!("{}{at}", c.text()));
    }
    lines
}
