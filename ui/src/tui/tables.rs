//! The sortable, filterable tables (graphs, metrics, diagnostics): their columns, and which rows
//! show in which order for a given filter and sort.

use xlaprof_profiler::diagnostics::Diagnostic;
use xlaprof_profiler::metrics::{format_bytes, format_ns, format_value, Metric};
use xlaprof_profiler::views::{GraphRow, LineRow};

pub enum Key {
    Num(f64),
    Text(String),
}

pub struct Column<T> {
    pub title: &'static str,
    pub width: u16,
    /// Numbers are right-aligned.
    pub right: bool,
    pub text: fn(&T) -> String,
    pub key: fn(&T) -> Key,
}

const fn col<T>(
    title: &'static str,
    width: u16,
    right: bool,
    text: fn(&T) -> String,
    key: fn(&T) -> Key,
) -> Column<T> {
    Column { title, width, right, text, key }
}

/// A filter matches a row when any of its cells contains it (ignoring case); `needle` is the
/// filter already lowercased.
fn matches<T>(row: &T, columns: &[Column<T>], needle: &str) -> bool {
    needle.is_empty() || columns.iter().any(|c| (c.text)(row).to_lowercase().contains(needle))
}

/// The indices of the rows to show, filtered, then sorted by `sort` (column, descending).
pub fn visible<T>(
    rows: &[T],
    columns: &[Column<T>],
    filter: &str,
    sort: Option<(usize, bool)>,
) -> Vec<usize> {
    let needle = filter.to_lowercase();
    let shown = (0..rows.len()).filter(|&i| matches(&rows[i], columns, &needle));
    let by = sort.and_then(|(c, descending)| columns.get(c).map(|column| (column, descending)));
    let Some((column, descending)) = by else { return shown.collect() };
    // Keys of the shown rows only; the sort is stable, so ties keep the rows' order.
    let mut keyed: Vec<(usize, Key)> = shown.map(|i| (i, (column.key)(&rows[i]))).collect();
    keyed.sort_by(|(_, a), (_, b)| {
        let order = match (a, b) {
            (Key::Num(x), Key::Num(y)) => x.total_cmp(y),
            (Key::Text(x), Key::Text(y)) => x.cmp(y),
            (Key::Num(_), Key::Text(_)) => std::cmp::Ordering::Less,
            (Key::Text(_), Key::Num(_)) => std::cmp::Ordering::Greater,
        };
        if descending {
            order.reverse()
        } else {
            order
        }
    });
    keyed.into_iter().map(|(i, _)| i).collect()
}

fn ns(v: u64) -> String {
    format_ns(v as f64)
}

pub fn short_hash(h: u64) -> String {
    format!("{:08x}", h >> 32)
}

pub static GRAPH_COLUMNS: [Column<GraphRow>; 11] = [
    col("graph", 9, false, |g| short_hash(g.hash), |g| Key::Num(g.hash as f64)),
    col("site", 28, false, |g| g.site.clone(), |g| Key::Text(g.site.clone())),
    col("ver", 4, true, |g| g.version.to_string(), |g| Key::Num(g.version as f64)),
    col("nodes", 6, true, |g| g.nodes.to_string(), |g| Key::Num(g.nodes as f64)),
    col("comp", 5, true, |g| g.compiles.to_string(), |g| Key::Num(g.compiles as f64)),
    col("compile", 9, true, |g| ns(g.compile_ns), |g| Key::Num(g.compile_ns as f64)),
    col("runs", 6, true, |g| g.executions.to_string(), |g| Key::Num(g.executions as f64)),
    col("run total", 10, true, |g| ns(g.execute_ns), |g| Key::Num(g.execute_ns as f64)),
    col("run mean", 9, true, |g| ns(g.mean_execute_ns), |g| Key::Num(g.mean_execute_ns as f64)),
    col(
        "flops",
        8,
        true,
        |g| {
            g.flops
                .map(|f| format_value(xlaprof_profiler::metrics::Unit::Count, f))
                .unwrap_or_default()
        },
        |g| Key::Num(g.flops.unwrap_or(0.0)),
    ),
    col(
        "peak mem",
        10,
        true,
        |g| g.peak_memory_bytes.map(|b| format_bytes(b as f64)).unwrap_or_default(),
        |g| Key::Num(g.peak_memory_bytes.unwrap_or(0) as f64),
    ),
];

fn percentile(m: &Metric, p: u8) -> f64 {
    m.percentiles.iter().find(|(q, _)| *q == p).map(|(_, v)| *v).unwrap_or(0.0)
}

pub static METRIC_COLUMNS: [Column<Metric>; 9] = [
    col("metric", 22, false, |m| m.name.to_string(), |m| Key::Text(m.name.to_string())),
    col("count", 8, true, |m| m.count.to_string(), |m| Key::Num(m.count as f64)),
    col("total", 10, true, |m| format_value(m.unit, m.total), |m| Key::Num(m.total)),
    col("mean", 10, true, |m| format_value(m.unit, m.mean), |m| Key::Num(m.mean)),
    col("min", 10, true, |m| format_value(m.unit, m.min), |m| Key::Num(m.min)),
    col(
        "p50",
        10,
        true,
        |m| format_value(m.unit, percentile(m, 50)),
        |m| Key::Num(percentile(m, 50)),
    ),
    col(
        "p90",
        10,
        true,
        |m| format_value(m.unit, percentile(m, 90)),
        |m| Key::Num(percentile(m, 90)),
    ),
    col("max", 10, true, |m| format_value(m.unit, m.max), |m| Key::Num(m.max)),
    col("per s", 8, true, |m| format!("{:.1}", m.rate_per_s), |m| Key::Num(m.rate_per_s)),
];

pub static DIAGNOSTIC_COLUMNS: [Column<Diagnostic>; 5] = [
    col(
        "finding",
        18,
        false,
        |d| d.kind.title().to_string(),
        |d| Key::Text(d.kind.title().to_string()),
    ),
    col("where", 28, false, |d| d.location.clone(), |d| Key::Text(d.location.clone())),
    col("count", 6, true, |d| d.count.to_string(), |d| Key::Num(d.count as f64)),
    col("cost", 9, true, |d| ns(d.cost_ns), |d| Key::Num(d.cost_ns as f64)),
    col("what happened", 60, false, |d| d.message.clone(), |d| Key::Text(d.message.clone())),
];

fn count(v: u64) -> String {
    if v == 0 {
        String::new()
    } else {
        v.to_string()
    }
}

pub static LINE_COLUMNS: [Column<LineRow>; 10] = [
    col(
        "line",
        36,
        false,
        |l| format!("{}:{}", l.file, l.line),
        |l| Key::Text(format!("{}:{:08}", l.file, l.line)),
    ),
    col("ops", 8, true, |l| count(l.ops), |l| Key::Num(l.ops as f64)),
    col(
        "tracing",
        9,
        true,
        |l| if l.trace_ns > 0 { ns(l.trace_ns) } else { String::new() },
        |l| Key::Num(l.trace_ns as f64),
    ),
    col("inputs", 7, true, |l| count(l.inputs), |l| Key::Num(l.inputs as f64)),
    col("syncs", 6, true, |l| count(l.syncs), |l| Key::Num(l.syncs as f64)),
    col("comp", 5, true, |l| count(l.compiles), |l| Key::Num(l.compiles as f64)),
    col(
        "compile",
        9,
        true,
        |l| if l.compile_ns > 0 { ns(l.compile_ns) } else { String::new() },
        |l| Key::Num(l.compile_ns as f64),
    ),
    col("reads", 6, true, |l| count(l.reads), |l| Key::Num(l.reads as f64)),
    col(
        "bytes",
        9,
        true,
        |l| if l.bytes > 0 { format_bytes(l.bytes as f64) } else { String::new() },
        |l| Key::Num(l.bytes as f64),
    ),
    col("fallbacks", 9, true, |l| count(l.fallbacks), |l| Key::Num(l.fallbacks as f64)),
];
