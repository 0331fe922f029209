//! Chrome trace event JSON (opens in Perfetto and chrome://tracing): one track per lane, every
//! span a complete event with its graph hash and source line in `args`, and the engine's
//! counters as counter tracks.

use serde_json::{json, Value};

use crate::profile::Profile;
use crate::timeline::{spans, LANES};

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

pub fn trace(p: &Profile) -> Value {
    let mut events: Vec<Value> = Vec::new();
    events.push(json!({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": format!("xlaprof: {}", p.meta.program)}}));
    for (tid, lane) in LANES.iter().enumerate() {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": lane}}),
        );
        events.push(json!({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": tid, "args": {"sort_index": tid}}));
    }
    for s in spans(p) {
        let mut args = serde_json::Map::new();
        if let Some(h) = s.hash {
            args.insert("graph".into(), json!(format!("{h:016x}")));
        }
        if let Some(step) = s.step {
            args.insert("step".into(), json!(step));
        }
        if let Some(sync) = s.sync {
            args.insert("sync".into(), json!(sync));
        }
        if let Some(l) = s.location {
            args.insert("source".into(), json!(p.location(l)));
        }
        if let Some(b) = s.bytes {
            args.insert("bytes".into(), json!(b));
        }
        events.push(json!({
            "name": s.name,
            "cat": s.kind.name(),
            "ph": "X",
            "ts": us(s.start_ns),
            "dur": us(s.duration_ns()),
            "pid": 1,
            "tid": s.kind.lane(),
            "args": args,
        }));
    }
    let first = p.meta.counters;
    for (t, c) in &p.counters {
        events.push(json!({
            "name": "compiles", "ph": "C", "ts": us(*t), "pid": 1,
            "args": {"compiles": c.compiles - first.compiles, "cache hits": c.cache_hits - first.cache_hits},
        }));
        events.push(json!({
            "name": "live tensors", "ph": "C", "ts": us(*t), "pid": 1,
            "args": {"tensors": c.tensors_created.saturating_sub(c.tensors_destroyed)},
        }));
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"program": p.meta.program, "platform": p.meta.platform}})
}
