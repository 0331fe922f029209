//! Chrome trace event JSON (opens in Perfetto and chrome://tracing): one track per lane, every
//! span a complete event with its graph hash and source line in `args`, and the engine's
//! counters as counter tracks. Written event by event, without building the document in memory.

use std::io::Write;

use serde::Serialize;
use serde_json::json;

use crate::metrics::{counter, engine_counter as names};
use crate::profile::Profile;
use crate::timeline::{lane_name, spans, LANES};

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

#[derive(Serialize)]
struct Args<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    graph: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sync: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
}

#[derive(Serialize)]
struct Complete<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'static str,
    ts: f64,
    dur: f64,
    pid: u32,
    tid: u32,
    args: Args<'a>,
}

/// Writes the trace to `out`.
pub fn write(p: &Profile, out: &mut impl Write) -> serde_json::Result<()> {
    write_processes(&[(p, 0)], out)
}

/// Writes one trace of several processes' profiles (a merged multi-process job), each its own
/// Perfetto process (pid 1, 2, ...) with its own lanes, its times moved by its offset (ns).
pub fn write_processes(
    processes: &[(&Profile, u64)],
    out: &mut impl Write,
) -> serde_json::Result<()> {
    let io = serde_json::Error::io;
    out.write_all(b"{\"displayTimeUnit\":\"ms\",\"otherData\":").map_err(io)?;
    let programs: Vec<&str> = processes.iter().map(|(p, _)| p.meta.program.as_str()).collect();
    let platform = processes.first().map(|(p, _)| p.meta.platform.as_str()).unwrap_or_default();
    let program = if programs.len() == 1 { json!(programs[0]) } else { json!(programs) };
    serde_json::to_writer(&mut *out, &json!({"program": program, "platform": platform}))?;
    out.write_all(b",\"traceEvents\":[").map_err(io)?;
    let mut first = true;
    let mut event = |out: &mut dyn Write, value: &dyn erased::Event| -> serde_json::Result<()> {
        if !first {
            out.write_all(b",\n").map_err(io)?;
        }
        first = false;
        value.write_to(out)
    };
    for (index, &(p, offset)) in processes.iter().enumerate() {
        let pid = index as u32 + 1;
        let name = match processes.len() {
            1 => format!("xlaprof: {}", p.meta.program),
            _ => format!("process {index}: {} (pid {})", p.meta.program, p.meta.pid),
        };
        event(
            out,
            &json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}),
        )?;
        let spans = spans(p);
        // The fixed lanes, then a lane per device that ran a partitioned program.
        let mut lanes: Vec<u32> = (0..LANES.len() as u32).collect();
        let mut devices: Vec<u32> =
            spans.iter().map(|s| s.lane).filter(|&l| l >= LANES.len() as u32).collect();
        devices.sort_unstable();
        devices.dedup();
        lanes.extend(devices);
        for tid in lanes {
            event(
                out,
                &json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": lane_name(tid)}}),
            )?;
            event(
                out,
                &json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}),
            )?;
        }
        let locations: Vec<String> = (0..p.locations.len() as u32).map(|l| p.location(l)).collect();
        for s in spans {
            let complete = Complete {
                name: &s.name,
                cat: s.kind.name(),
                ph: "X",
                ts: us(s.start_ns.saturating_add(offset)),
                dur: us(s.duration_ns()),
                pid,
                tid: s.lane,
                args: Args {
                    graph: s.hash.map(|h| format!("{h:016x}")),
                    step: s.step,
                    sync: s.sync,
                    source: s.location.and_then(|l| locations.get(l as usize)).map(String::as_str),
                    bytes: s.bytes,
                },
            };
            event(out, &complete)?;
        }
        let first = p.start_counters();
        let since_start = |c, name| counter(c, name).saturating_sub(counter(&first, name));
        for (t, c) in &p.counters {
            let ts = us(t.saturating_add(offset));
            event(
                out,
                &json!({
                    "name": "compiles", "ph": "C", "ts": ts, "pid": pid,
                    "args": {
                        "compiles": since_start(c, names::COMPILES),
                        "cache hits": since_start(c, names::CACHE_HITS),
                    },
                }),
            )?;
            let live = counter(c, names::TENSORS_CREATED)
                .saturating_sub(counter(c, names::TENSORS_DESTROYED));
            event(
                out,
                &json!({
                    "name": "live tensors", "ph": "C", "ts": ts, "pid": pid,
                    "args": {"tensors": live},
                }),
            )?;
        }
    }
    out.write_all(b"]}\n").map_err(io)
}

/// Serializes either a typed event or a `json!` value through one `dyn` call.
mod erased {
    pub trait Event {
        fn write_to(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()>;
    }
    impl<T: serde::Serialize> Event for T {
        fn write_to(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}
