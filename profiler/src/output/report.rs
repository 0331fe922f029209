//! The metrics report in text: what a PyTorch/XLA user reads at a glance (summary, findings
//! ranked by time lost, then every metric and counter), a short form, and the diff of two runs.

use std::fmt::Write;

use crate::analysis::Analysis;
use crate::metrics::{format_bytes, format_ns, format_value, Metrics};

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.0}%", part as f64 * 100.0 / whole as f64)
    }
}

fn summary_text(a: &Analysis, out: &mut String) {
    let s = &a.summary;
    let _ = writeln!(
        out,
        "xlaprof report: {}",
        if s.program.is_empty() { "(unnamed program)" } else { &s.program }
    );
    for w in &a.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    // A torch.compile program on another backend has no syncs: the engine's lines say nothing.
    let engine = s.syncs > 0 || s.torch_compile.is_none();
    if engine {
        let _ = writeln!(
            out,
            "  {} recorded, {} steps, {} syncs, {} distinct graphs",
            format_ns(s.duration_ns as f64),
            s.steps,
            s.syncs,
            s.graphs
        );
    } else {
        let _ = writeln!(
            out,
            "  {} recorded, {} steps, {} {} captured by torch.compile (its backend ran them, not the engine)",
            format_ns(s.duration_ns as f64),
            s.steps,
            s.graphs,
            if s.graphs == 1 { "graph" } else { "graphs" }
        );
    }
    if s.steps > a.thresholds.warmup_steps {
        let _ = writeln!(
            out,
            "  step time      median {}, p90 {} (after the first {} steps)",
            format_ns(s.step_median_ns as f64),
            format_ns(s.step_p90_ns as f64),
            a.thresholds.warmup_steps
        );
    }
    if engine {
        let _ = writeln!(
            out,
            "  compiles       {} ({}), {} after warm-up; cache hits {} ({:.0}% of syncs served without compiling), persistent cache {}",
            s.compiles,
            format_ns(s.compile_ns as f64),
            s.compiles_after_warmup,
            s.cache_hits,
            s.hit_rate * 100.0,
            s.persistent_hits
        );
        let _ = writeln!(
            out,
            "  transfers      {} to device, {} to host; {} hidden syncs",
            format_bytes(s.bytes_to_device as f64),
            format_bytes(s.bytes_to_host as f64),
            s.hidden_syncs
        );
    }
    if let Some(c) = &s.torch_compile {
        let phases: Vec<String> = c
            .phases
            .iter()
            .filter(|(_, ns)| *ns > 0)
            .map(|(name, ns)| format!("{name} {}", pct(*ns, c.compile_ns)))
            .collect();
        let _ = writeln!(
            out,
            "  torch.compile  {} compiles of {} functions ({}{}), captured graphs run {} times ({}), {} graph breaks",
            c.compiles,
            c.functions,
            format_ns(c.compile_ns as f64),
            if phases.is_empty() { String::new() } else { format!(": {}", phases.join(", ")) },
            c.runs,
            format_ns(c.run_ns as f64),
            c.graph_breaks
        );
    }
    if let Some(m) = &s.device_memory {
        let bytes = |b: i64| format_bytes(b.max(0) as f64);
        let _ = writeln!(
            out,
            "  device memory  {} in use after the last step (most after a step {}{}{}); {} {} over the steady steps",
            bytes(m.last_in_use_bytes),
            bytes(m.max_in_use_bytes),
            m.peak_bytes.map(|p| format!(", allocator's peak {}", bytes(p))).unwrap_or_default(),
            m.limit_bytes.map(|l| format!(", of {}", bytes(l))).unwrap_or_default(),
            if m.steady_growth_bytes > 0 { "grew" } else { "changed" },
            format!(
                "{}{}",
                if m.steady_growth_bytes < 0 { "-" } else { "" },
                format_bytes(m.steady_growth_bytes.unsigned_abs() as f64)
            ),
        );
    }
    if engine {
        let d = s.duration_ns;
        let _ = writeln!(
            out,
            "  time           compile {}, execute {}, transfer {}, graph build {}, lowering {}, outside syncs {}",
            pct(s.compile_ns, d),
            pct(s.execute_ns, d),
            pct(s.transfer_ns, d),
            pct(s.build_ns, d),
            pct(s.lower_ns, d),
            pct(s.outside_syncs_ns, d)
        );
    }
}

/// The devices of partitioned programs: each one's time and lag, each graph's mesh, shardings
/// and collectives.
fn devices_text(a: &Analysis, out: &mut String) {
    let d = &a.devices;
    if !d.any() {
        return;
    }
    let _ = writeln!(
        out,
        "\nDevices: {} partitioned executions on {} devices; the last device finishes a median {} after the first; collectives moved {} to each device",
        d.executions,
        d.rows.len(),
        format_ns(d.median_skew_ns as f64),
        format_bytes(crate::devices::total_collective_bytes(d) as f64)
    );
    if !d.rows.is_empty() {
        let _ = writeln!(out, "  device  busy          finished last  behind the first");
        for r in &d.rows {
            let _ = writeln!(
                out,
                "  {:<6}  {:<12}  {:<13}  {}",
                r.device,
                format_ns(r.busy_ns as f64),
                r.last,
                format_ns(r.behind_ns as f64)
            );
        }
    }
    for g in &d.graphs {
        let split: Vec<String> = g
            .plan
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref().map(|s| format!("input {i} {}", crate::record::clip_to(s, 66)))
            })
            .take(4)
            .collect();
        let _ = writeln!(
            out,
            "  graph {:016x} on mesh {} (devices {:?}), {} executions; split inputs: {}",
            g.hash,
            g.plan.mesh_text(),
            &g.plan.devices[..g.plan.devices.len().min(crate::record::LISTED)],
            g.executions,
            if split.is_empty() { "none".to_string() } else { split.join(", ") }
        );
        for c in g.plan.collectives.iter().take(crate::record::LISTED) {
            let _ = writeln!(out, "    {}", c.text());
        }
        if g.plan.collectives.len() > crate::record::LISTED {
            let _ = writeln!(
                out,
                "    ... and {} more collectives",
                g.plan.collectives.len() - crate::record::LISTED
            );
        }
    }
}

fn diagnostics_text(a: &Analysis, limit: usize, out: &mut String) {
    if a.diagnostics.is_empty() {
        let _ = writeln!(
            out,
            "\nNo findings: no recompiles after warm-up, no hidden syncs, no slow steps."
        );
        return;
    }
    let _ = writeln!(out, "\nFindings, by time lost");
    for (i, d) in a.diagnostics.iter().take(limit).enumerate() {
        let _ = writeln!(
            out,
            "  {}. [{}] {}, {}x: {}",
            i + 1,
            d.kind.title(),
            d.cost_words(),
            d.count,
            d.message
        );
        if let Some(advice) = &d.advice {
            let _ = writeln!(out, "     advice: {advice}");
        }
        if let Some(fix) = &d.fix {
            let (before, after) = fix.trimmed();
            let _ = writeln!(out, "     change {}:\n       - {before}\n       + {after}", fix.at);
        }
    }
    if a.diagnostics.len() > limit {
        let _ = writeln!(out, "  ... and {} more", a.diagnostics.len() - limit);
    }
}

fn metrics_text(m: &Metrics, out: &mut String) {
    for metric in m.metrics.iter().filter(|m| m.count > 0) {
        let _ = writeln!(out, "Metric: {}", metric.name);
        let _ = writeln!(out, "  TotalSamples: {}", metric.count);
        let _ = writeln!(out, "  Accumulator: {}", format_value(metric.unit, metric.total));
        let _ = writeln!(out, "  Rate: {:.3} / second", metric.rate_per_s);
        let ps: Vec<String> = metric
            .percentiles
            .iter()
            .map(|(p, v)| format!("{p}%={}", format_value(metric.unit, *v)))
            .collect();
        let _ = writeln!(out, "  Percentiles: {}", ps.join("; "));
    }
    for c in &m.counters {
        let _ = writeln!(out, "Counter: {}", c.name);
        let _ = writeln!(out, "  Value: {}", c.value);
    }
}

/// The metrics and counters alone, in PyTorch/XLA's `metrics_report()` layout.
pub fn metrics(m: &Metrics) -> String {
    let mut out = String::new();
    metrics_text(m, &mut out);
    out
}

/// The full report: summary, every finding, every metric and counter.
pub fn text(a: &Analysis) -> String {
    let mut out = String::new();
    summary_text(a, &mut out);
    devices_text(a, &mut out);
    diagnostics_text(a, usize::MAX, &mut out);
    let _ = writeln!(out);
    metrics_text(&a.metrics, &mut out);
    out
}

/// The short report: summary, the top findings, one line per metric.
pub fn short(a: &Analysis) -> String {
    let mut out = String::new();
    summary_text(a, &mut out);
    diagnostics_text(a, 3, &mut out);
    let _ = writeln!(out);
    for m in a.metrics.metrics.iter().filter(|m| m.count > 0) {
        let p50 = m.percentiles.iter().find(|p| p.0 == 50).map(|p| p.1).unwrap_or(0.0);
        let p99 = m.percentiles.iter().find(|p| p.0 == 99).map(|p| p.1).unwrap_or(0.0);
        let _ = writeln!(
            out,
            "{:<24} {:>6} x  total {:>12}  p50 {:>12}  p99 {:>12}",
            m.name,
            m.count,
            format_value(m.unit, m.total),
            format_value(m.unit, p50),
            format_value(m.unit, p99)
        );
    }
    out
}

/// One line of the diff: a name, the values of runs A and B, and the change.
fn diff_row(out: &mut String, name: &str, a: &str, b: &str, change: &str) {
    let _ = writeln!(out, "{name:<26} {a:>14} {b:>14} {change:>9}");
}

/// Per metric and counter, run A against run B, with the change in percent.
pub fn diff(a: &Analysis, b: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}\nB: {}\n", a.summary.program, b.summary.program);
    let change = |x: f64, y: f64| {
        if x == 0.0 && y == 0.0 {
            "".to_string()
        } else if x == 0.0 {
            "new".to_string()
        } else {
            format!("{:+.1}%", (y - x) * 100.0 / x)
        }
    };
    diff_row(&mut out, "metric (total)", "A", "B", "change");
    let rows = [
        ("step time (median)", a.summary.step_median_ns as f64, b.summary.step_median_ns as f64),
        ("step time (p90)", a.summary.step_p90_ns as f64, b.summary.step_p90_ns as f64),
    ];
    for (name, x, y) in rows {
        diff_row(&mut out, name, &format_ns(x), &format_ns(y), &change(x, y));
    }
    for m in &a.metrics.metrics {
        let y = b.metrics.metric(m.name).map(|o| o.total).unwrap_or(0.0);
        if m.total == 0.0 && y == 0.0 {
            continue;
        }
        let (ta, tb) = (format_value(m.unit, m.total), format_value(m.unit, y));
        diff_row(&mut out, m.name, &ta, &tb, &change(m.total, y));
    }
    let _ = writeln!(out);
    diff_row(&mut out, "counter", "A", "B", "change");
    for c in &a.metrics.counters {
        let y = b.metrics.counter(c.name);
        if c.value == 0 && y == 0 {
            continue;
        }
        let (va, vb) = (c.value.to_string(), y.to_string());
        diff_row(&mut out, c.name, &va, &vb, &change(c.value as f64, y as f64));
    }
    out
}
