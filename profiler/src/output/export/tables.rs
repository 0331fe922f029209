//! The profile as tables (polars DataFrames): spans, graphs, compiles, executions, diagnostics,
//! and the devices and collectives of partitioned runs. The CSV and Parquet exports write these;
//! the Python API hands them to polars.

use polars::prelude::*;

use crate::analysis::Analysis;
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::timeline::spans;

fn hex(h: u64) -> String {
    format!("{h:016x}")
}

fn frame(what: &'static str, columns: Vec<Column>) -> Result<DataFrame> {
    DataFrame::new_infer_height(columns).map_err(|e| Error::Export { what, reason: e.to_string() })
}

pub fn spans_table(p: &Profile) -> Result<DataFrame> {
    let s = spans(p);
    frame(
        "spans",
        vec![
            Column::new("kind".into(), s.iter().map(|x| x.kind.name()).collect::<Vec<_>>()),
            Column::new("name".into(), s.iter().map(|x| x.name.clone()).collect::<Vec<_>>()),
            Column::new("start_ns".into(), s.iter().map(|x| x.start_ns).collect::<Vec<_>>()),
            Column::new("end_ns".into(), s.iter().map(|x| x.end_ns).collect::<Vec<_>>()),
            Column::new(
                "duration_ns".into(),
                s.iter().map(|x| x.duration_ns()).collect::<Vec<_>>(),
            ),
            Column::new("step".into(), s.iter().map(|x| x.step).collect::<Vec<_>>()),
            Column::new("sync".into(), s.iter().map(|x| x.sync).collect::<Vec<_>>()),
            Column::new("graph".into(), s.iter().map(|x| x.hash.map(hex)).collect::<Vec<_>>()),
            Column::new(
                "source".into(),
                s.iter().map(|x| x.location.map(|l| p.location(l))).collect::<Vec<_>>(),
            ),
            Column::new("bytes".into(), s.iter().map(|x| x.bytes).collect::<Vec<_>>()),
        ],
    )
}

pub fn graphs_table(p: &Profile) -> Result<DataFrame> {
    let g: Vec<_> = p.graphs.values().collect();
    frame(
        "graphs",
        vec![
            Column::new("graph".into(), g.iter().map(|x| hex(x.def.hash)).collect::<Vec<_>>()),
            Column::new("nodes".into(), g.iter().map(|x| x.def.nodes).collect::<Vec<_>>()),
            Column::new(
                "inputs".into(),
                g.iter().map(|x| x.def.inputs.len() as u32).collect::<Vec<_>>(),
            ),
            Column::new(
                "outputs".into(),
                g.iter().map(|x| x.def.outputs.len() as u32).collect::<Vec<_>>(),
            ),
            Column::new("compiles".into(), g.iter().map(|x| x.compiles).collect::<Vec<_>>()),
            Column::new("compile_ns".into(), g.iter().map(|x| x.compile_ns).collect::<Vec<_>>()),
            Column::new("executions".into(), g.iter().map(|x| x.executions).collect::<Vec<_>>()),
            Column::new("execute_ns".into(), g.iter().map(|x| x.execute_ns).collect::<Vec<_>>()),
            Column::new(
                "flops".into(),
                g.iter().map(|x| x.cost.map(|c| c.flops)).collect::<Vec<_>>(),
            ),
            Column::new(
                "bytes_accessed".into(),
                g.iter().map(|x| x.cost.map(|c| c.bytes_accessed)).collect::<Vec<_>>(),
            ),
            Column::new(
                "peak_memory_bytes".into(),
                g.iter().map(|x| x.memory.map(|m| m.peak_memory_bytes)).collect::<Vec<_>>(),
            ),
            Column::new("first_sync".into(), g.iter().map(|x| x.first_sync).collect::<Vec<_>>()),
        ],
    )
}

pub fn compiles_table(p: &Profile) -> Result<DataFrame> {
    let step = |sync: u64| p.sync(sync).map(|s| s.step);
    let source = |sync: u64| p.sync(sync).map(|s| p.location(s.location));
    let c = &p.compiles;
    frame(
        "compiles",
        vec![
            Column::new("sync".into(), c.iter().map(|x| x.sync).collect::<Vec<_>>()),
            Column::new("graph".into(), c.iter().map(|x| hex(x.hash)).collect::<Vec<_>>()),
            Column::new("step".into(), c.iter().map(|x| step(x.sync)).collect::<Vec<_>>()),
            Column::new("source".into(), c.iter().map(|x| source(x.sync)).collect::<Vec<_>>()),
            Column::new("start_ns".into(), c.iter().map(|x| x.start_ns).collect::<Vec<_>>()),
            Column::new("duration_ns".into(), c.iter().map(|x| x.duration_ns).collect::<Vec<_>>()),
        ],
    )
}

pub fn executions_table(p: &Profile) -> Result<DataFrame> {
    let step = |sync: u64| p.sync(sync).map(|s| s.step);
    let e = &p.executions;
    frame(
        "executions",
        vec![
            Column::new("sync".into(), e.iter().map(|x| x.sync).collect::<Vec<_>>()),
            Column::new("graph".into(), e.iter().map(|x| hex(x.hash)).collect::<Vec<_>>()),
            Column::new("step".into(), e.iter().map(|x| step(x.sync)).collect::<Vec<_>>()),
            Column::new("start_ns".into(), e.iter().map(|x| x.start_ns).collect::<Vec<_>>()),
            Column::new("duration_ns".into(), e.iter().map(|x| x.duration_ns).collect::<Vec<_>>()),
        ],
    )
}

pub fn diagnostics_table(a: &Analysis) -> Result<DataFrame> {
    let d = &a.diagnostics;
    frame(
        "diagnostics",
        vec![
            Column::new("rank".into(), (1..=d.len() as u32).collect::<Vec<_>>()),
            Column::new("kind".into(), d.iter().map(|x| x.kind.title()).collect::<Vec<_>>()),
            Column::new("message".into(), d.iter().map(|x| x.message.clone()).collect::<Vec<_>>()),
            Column::new("source".into(), d.iter().map(|x| x.location.clone()).collect::<Vec<_>>()),
            Column::new("cost_ns".into(), d.iter().map(|x| x.cost_ns).collect::<Vec<_>>()),
            Column::new("count".into(), d.iter().map(|x| x.count).collect::<Vec<_>>()),
            Column::new("advice".into(), d.iter().map(|x| x.advice.clone()).collect::<Vec<_>>()),
            Column::new(
                "fix_at".into(),
                d.iter().map(|x| x.fix.as_ref().map(|f| f.at.clone())).collect::<Vec<_>>(),
            ),
            Column::new(
                "fix_before".into(),
                d.iter().map(|x| x.fix.as_ref().map(|f| f.before.clone())).collect::<Vec<_>>(),
            ),
            Column::new(
                "fix_after".into(),
                d.iter().map(|x| x.fix.as_ref().map(|f| f.after.clone())).collect::<Vec<_>>(),
            ),
        ],
    )
}

/// The devices of partitioned executions: each one's busy time, how often it finished last, and
/// its summed lag behind the first.
pub fn devices_table(a: &Analysis) -> Result<DataFrame> {
    let r = &a.devices.rows;
    frame(
        "devices",
        vec![
            Column::new("device".into(), r.iter().map(|x| x.device).collect::<Vec<_>>()),
            Column::new("busy_ns".into(), r.iter().map(|x| x.busy_ns).collect::<Vec<_>>()),
            Column::new("finished_last".into(), r.iter().map(|x| x.last).collect::<Vec<_>>()),
            Column::new("behind_ns".into(), r.iter().map(|x| x.behind_ns).collect::<Vec<_>>()),
        ],
    )
}

/// Every collective of every partitioned graph: its kind, result, bytes per device, groups,
/// how many times it ran and the user's line.
pub fn collectives_table(p: &Profile, a: &Analysis) -> Result<DataFrame> {
    let rows: Vec<(u64, u64, &crate::record::CollectiveRec)> = a
        .devices
        .graphs
        .iter()
        .flat_map(|g| g.plan.collectives.iter().map(move |c| (g.hash, g.executions, c)))
        .collect();
    frame(
        "collectives",
        vec![
            Column::new("graph".into(), rows.iter().map(|r| hex(r.0)).collect::<Vec<_>>()),
            Column::new("kind".into(), rows.iter().map(|r| r.2.kind.clone()).collect::<Vec<_>>()),
            Column::new(
                "shapes".into(),
                rows.iter()
                    .map(|r| r.2.shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>(),
            ),
            Column::new("bytes".into(), rows.iter().map(|r| r.2.bytes).collect::<Vec<_>>()),
            Column::new(
                "groups".into(),
                rows.iter().map(|r| r.2.groups.clone()).collect::<Vec<_>>(),
            ),
            Column::new("executions".into(), rows.iter().map(|r| r.1).collect::<Vec<_>>()),
            Column::new(
                "source".into(),
                rows.iter().map(|r| r.2.location.map(|l| p.location(l))).collect::<Vec<_>>(),
            ),
        ],
    )
}

/// Every table, by name.
pub fn tables(p: &Profile, a: &Analysis) -> Result<Vec<(&'static str, DataFrame)>> {
    Ok(vec![
        ("spans", spans_table(p)?),
        ("graphs", graphs_table(p)?),
        ("compiles", compiles_table(p)?),
        ("executions", executions_table(p)?),
        ("diagnostics", diagnostics_table(a)?),
        ("devices", devices_table(a)?),
        ("collectives", collectives_table(p, a)?),
    ])
}
