//! The widget's sections that are tables and lists: summary, rule checks, diagnostics, metrics,
//! graphs. Numbers come from the profiler's `Analysis` and its views; nothing is recomputed here.

use std::collections::HashMap;
use std::fmt::Write;

use xlaprof_profiler::diagnostics::RuleOutcome;
use xlaprof_profiler::metrics::{format_bytes, format_ns, format_value};
use xlaprof_profiler::{Analysis, Profile};

use super::escape::esc;
use super::section;

/// The most StableHLO text shown per graph (the rest is cut, with a note).
const HLO_SHOWN_BYTES: usize = 20_000;

fn card(out: &mut String, value: &str, label: &str, class: &str) {
    let _ = write!(
        out,
        "<div class=\"xp-card\"><b class=\"{class}\">{}</b><span>{}</span></div>",
        esc(value),
        esc(label)
    );
}

pub(crate) fn summary(out: &mut String, a: &Analysis) {
    let s = &a.summary;
    let mut body = String::from("<div class=\"xp-cards\">");
    let step = if s.step_median_ns > 0 {
        format!("{} / {}", format_ns(s.step_median_ns as f64), format_ns(s.step_p90_ns as f64))
    } else {
        "-".to_string()
    };
    card(&mut body, &format_ns(s.duration_ns as f64), "profiled", "");
    card(&mut body, &s.steps.to_string(), "steps", "");
    card(&mut body, &step, "step time (median / p90, after warm-up)", "");
    card(&mut body, &s.syncs.to_string(), "syncs", "");
    let late = if s.compiles_after_warmup > 0 { "xp-bad" } else { "" };
    card(
        &mut body,
        &format!("{} ({} after warm-up)", s.compiles, s.compiles_after_warmup),
        "compiles",
        late,
    );
    card(&mut body, &format_ns(s.compile_ns as f64), "compile time", "");
    card(
        &mut body,
        &format!("{} ({:.0}%)", s.cache_hits + s.persistent_hits, s.hit_rate * 100.0),
        "cache hits (hit rate)",
        "",
    );
    let hidden = if s.hidden_syncs > 0 { "xp-bad" } else { "" };
    card(&mut body, &s.hidden_syncs.to_string(), "hidden syncs (value reads)", hidden);
    card(&mut body, &format_ns(s.execute_ns as f64), "execute time", "");
    card(&mut body, &format_ns(s.outside_syncs_ns as f64), "outside syncs (tracing, host)", "");
    card(&mut body, &format_bytes(s.bytes_to_device as f64), "to device", "");
    card(&mut body, &format_bytes(s.bytes_to_host as f64), "to host", "");
    if let Some(c) = &s.torch_compile {
        let breaks = if c.graph_breaks > 0 { "xp-bad" } else { "" };
        card(&mut body, &c.text(), "torch.compile", breaks);
    }
    if let Some(m) = &s.device_memory {
        let growing = if m.steady_growth_bytes > 0 { "xp-bad" } else { "" };
        card(&mut body, &m.in_use_and_peak(), "device memory after the last step", growing);
    }
    body.push_str("</div>");
    section(out, "Summary", true, &body);
}

pub(crate) fn rules(out: &mut String, outcomes: &[RuleOutcome]) {
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    let mut body = String::from("<ul>");
    for o in outcomes {
        let (class, mark) = if o.passed { ("xp-good", "pass") } else { ("xp-bad", "FAIL") };
        let _ = write!(
            body,
            "<li><b class=\"{class}\">{mark}</b> <code>{}</code>: {}</li>",
            esc(&o.rule.to_string()),
            esc(&o.message)
        );
    }
    body.push_str("</ul>");
    let title = format!("Rules: {} of {} passed", outcomes.len() - failed, outcomes.len());
    section(out, &title, true, &body);
}

pub(crate) fn diagnostics(out: &mut String, a: &Analysis, source_lines: &HashMap<u32, String>) {
    let mut body = String::new();
    if a.diagnostics.is_empty() {
        body.push_str("<p class=\"xp-good\">No findings: no recompiles, no hidden syncs.</p>");
    }
    for d in &a.diagnostics {
        let _ = write!(
            body,
            "<div class=\"xp-diag\"><span class=\"xp-kind\">{}</span> {} <span class=\"xp-where\">({}, {}x)</span><br>",
            esc(d.kind.title()),
            esc(&d.message),
            esc(&d.cost_words()),
            d.count
        );
        let _ = write!(body, "<span class=\"xp-where\">at {}</span>", esc(&d.location));
        if let Some(line) = source_lines.get(&d.location_id) {
            let _ = write!(body, " <code class=\"xp-src\">{}</code>", esc(line.trim()));
        }
        for change in &d.changes {
            let _ = write!(body, "<br>&nbsp;&nbsp;• {}", esc(&change.sentence()));
        }
        if let Some(advice) = &d.advice {
            let _ = write!(body, "<br><i>advice:</i> {}", esc(advice));
        }
        if let Some(fix) = &d.fix {
            let (before, after) = fix.trimmed();
            let _ = write!(
                body,
                "<br><i>change {}:</i><pre class=\"xp-fix\">- {}\n+ {}</pre>",
                esc(&fix.at),
                esc(before),
                esc(after)
            );
        }
        body.push_str("</div>");
    }
    section(out, &format!("Diagnostics ({})", a.diagnostics.len()), true, &body);
}

pub(crate) fn metrics(out: &mut String, a: &Analysis) {
    let mut body = String::from(
        "<table><tr><th>metric</th><th class=\"num\">count</th><th class=\"num\">total</th>\
         <th class=\"num\">mean</th><th class=\"num\">p50</th><th class=\"num\">p90</th>\
         <th class=\"num\">max</th></tr>",
    );
    let pct = |m: &xlaprof_profiler::metrics::Metric, want: u8| {
        m.percentiles.iter().find(|(p, _)| *p == want).map(|(_, v)| *v).unwrap_or(0.0)
    };
    for m in a.metrics.metrics.iter().filter(|m| m.count > 0) {
        let f = |v: f64| esc(&format_value(m.unit, v));
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(m.name),
            m.count,
            f(m.total),
            f(m.mean),
            f(pct(m, 50)),
            f(pct(m, 90)),
            f(m.max)
        );
    }
    body.push_str("</table><table><tr><th>counter</th><th class=\"num\">value</th></tr>");
    for c in &a.metrics.counters {
        let _ = write!(body, "<tr><td>{}</td><td class=\"num\">{}</td></tr>", esc(c.name), c.value);
    }
    body.push_str("</table>");
    section(out, "Metrics", false, &body);
}

/// The devices of partitioned programs: one row per device (how long it computed, how often the
/// others waited for it), then each partitioned graph's mesh and collectives.
pub(crate) fn devices(out: &mut String, a: &Analysis) {
    let d = &a.devices;
    if !d.any() {
        return;
    }
    let mut body = format!(
        "<p>{} partitioned executions; the last device finishes a median {} after the first; \
         collectives moved {} to each device.</p>",
        d.executions,
        esc(&format_ns(d.median_skew_ns as f64)),
        esc(&xlaprof_profiler::metrics::format_bytes(
            xlaprof_profiler::devices::total_collective_bytes(d) as f64
        ))
    );
    body.push_str(
        "<table><tr><th>device</th><th class=\"num\">busy</th><th class=\"num\">finished last</th>\
         <th class=\"num\">behind the first</th></tr>",
    );
    for r in &d.rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            r.device,
            esc(&format_ns(r.busy_ns as f64)),
            r.last,
            esc(&format_ns(r.behind_ns as f64))
        );
    }
    body.push_str("</table>");
    for g in &d.graphs {
        let collectives: Vec<String> =
            g.plan.collectives.iter().take(8).map(|c| c.text()).collect();
        let _ = write!(
            body,
            "<p>graph <code>{:016x}</code> on mesh {} ({} executions): {}</p>",
            g.hash,
            esc(&g.plan.mesh_text()),
            g.executions,
            esc(&if collectives.is_empty() {
                "no collectives".to_string()
            } else {
                collectives.join("; ")
            })
        );
    }
    section(out, &format!("Devices ({})", d.rows.len()), true, &body);
}

/// The graphs as the profiler's views list them (every viewer shows the same rows): a table, then
/// each graph's details with what changed from the graph of its call site that it replaced.
pub(crate) fn graphs(out: &mut String, p: &Profile, a: &Analysis) {
    let rows = &a.graphs;
    let mut body = String::from(
        "<table><tr><th>graph</th><th>first built at</th><th class=\"num\">nodes</th>\
         <th class=\"num\">compiles</th><th class=\"num\">compile time</th>\
         <th class=\"num\">executions</th><th class=\"num\">execute time</th></tr>",
    );
    for r in rows {
        let _ = write!(
            body,
            "<tr><td><code>{:016x}</code></td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            r.hash,
            esc(&r.site),
            r.nodes,
            r.compiles,
            esc(&format_ns(r.compile_ns as f64)),
            r.executions,
            esc(&format_ns(r.execute_ns as f64))
        );
    }
    body.push_str("</table>");
    for r in rows {
        let mut detail = String::new();
        if let Some(previous) = r.previous {
            let _ =
                write!(detail, "<p>Recompiled: differs from <code>{previous:016x}</code>:</p><ul>");
            for c in &r.changes {
                let _ = write!(detail, "<li>{}</li>", esc(&c.sentence()));
            }
            detail.push_str("</ul>");
        }
        if let Some(g) = p.graphs.get(&r.hash) {
            let ops: Vec<String> =
                g.def.ops.iter().map(|(name, n)| format!("{name}×{n}")).collect();
            let _ = write!(detail, "<p>ops: {}</p>", esc(&ops.join(", ")));
            let sharding = a.devices.sharding_table(r.hash);
            if !sharding.is_empty() {
                let _ = write!(detail, "<p>sharding:</p><pre>{}</pre>", esc(&sharding.join("\n")));
            }
            if let Some(hlo) = &g.stablehlo {
                let shown = cut(hlo, HLO_SHOWN_BYTES);
                let more = if shown.len() < hlo.len() { "\n… (cut)" } else { "" };
                let _ = write!(
                    detail,
                    "<details><summary>StableHLO</summary><pre>{}{more}</pre></details>",
                    esc(shown)
                );
            }
        }
        let recompile = if r.previous.is_some() { " (a recompile)" } else { "" };
        let title = format!("graph {:016x}{recompile}", r.hash);
        let _ = write!(body, "<details><summary>{}</summary>{detail}</details>", esc(&title));
    }
    section(out, &format!("Graphs ({})", rows.len()), false, &body);
}

/// The first `max` bytes of `s`, cut at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
