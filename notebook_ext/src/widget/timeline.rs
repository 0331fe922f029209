//! The timeline as inline SVG: one row per lane (steps, scopes, syncs and their phases, transfers
//! and host reads), a rectangle per span with its details in a `<title>` tooltip.

use std::fmt::Write;

use xlaprof_profiler::metrics::format_ns;
use xlaprof_profiler::timeline::{lane_name, Span, SpanKind, LANES};
use xlaprof_profiler::Profile;

use super::escape::esc;

const WIDTH: f64 = 960.0;
const LABEL_WIDTH: f64 = 80.0;
const ROW_HEIGHT: f64 = 14.0;
/// Past this many spans, only the longest are drawn (a tooltip per span gets heavy).
const MAX_SPANS: usize = 4000;

fn color(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Step => "#8250df",
        SpanKind::Scope => "#0969da",
        SpanKind::Sync => "#afb8c1",
        SpanKind::GraphBuild => "#4ac26b",
        SpanKind::Lower => "#d4a72c",
        SpanKind::Compile => "#cf222e",
        SpanKind::Execute => "#1a7f37",
        SpanKind::TransferToDevice => "#bf8700",
        SpanKind::HostRead => "#fb8f44",
        SpanKind::Device => "#2da44e",
        SpanKind::FunctionCompile => "#a40e26",
        SpanKind::CompilePhase => "#fa4549",
        SpanKind::CapturedRun => "#116329",
        SpanKind::HostFallback => "#bf3989",
        SpanKind::DataWait => "#8c959f",
        SpanKind::Collective => "#8250df",
    }
}

pub(crate) fn svg(p: &Profile, spans: &[Span]) -> String {
    let mut all = spans.to_vec();
    if all.is_empty() {
        return "<p>Nothing happened on the timeline.</p>".to_string();
    }
    let dropped = all.len().saturating_sub(MAX_SPANS);
    if dropped > 0 {
        all.sort_by_key(|s| std::cmp::Reverse(s.duration_ns()));
        all.truncate(MAX_SPANS);
    }
    let t0 = all.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let t1 = all.iter().map(|s| s.end_ns).max().unwrap_or(t0).max(t0 + 1);
    // Each lane is as tall as its deepest nesting.
    // The fixed lanes, then one per device of a partitioned program.
    let lanes = all.iter().map(|s| s.lane as usize + 1).max().unwrap_or(0).max(LANES.len());
    let mut depth = vec![0u32; lanes];
    for s in &all {
        let lane = s.lane as usize;
        depth[lane] = depth[lane].max(s.depth + 1);
    }
    let mut lane_y = vec![0f64; lanes];
    let mut y = 18.0;
    for (i, d) in depth.iter().enumerate() {
        lane_y[i] = y;
        y += (*d).max(1) as f64 * ROW_HEIGHT + 6.0;
    }
    let height = y + 4.0;
    let scale = (WIDTH - LABEL_WIDTH) / (t1 - t0) as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"xp-timeline\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"10\">"
    );
    let _ = write!(
        out,
        "<text x=\"{LABEL_WIDTH}\" y=\"11\" fill=\"#57606a\">0</text>\
         <text x=\"{WIDTH}\" y=\"11\" text-anchor=\"end\" fill=\"#57606a\">{}</text>",
        esc(&format_ns((t1 - t0) as f64))
    );
    for (i, y) in lane_y.iter().enumerate() {
        // Device lanes without spans are not labelled (devices are numbered, not all run).
        if i >= LANES.len() && depth[i] == 0 {
            continue;
        }
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{:.1}\" fill=\"#1f2328\">{}</text>",
            y + 10.0,
            esc(&lane_name(i as u32))
        );
    }
    for s in &all {
        let x = LABEL_WIDTH + (s.start_ns - t0) as f64 * scale;
        let w = (s.duration_ns() as f64 * scale).max(0.5);
        let y = lane_y[s.lane as usize] + s.depth as f64 * ROW_HEIGHT;
        let _ = write!(
            out,
            "<rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
            ROW_HEIGHT - 2.0,
            color(s.kind),
            esc(&tooltip(p, s))
        );
    }
    out.push_str("</svg>");
    if dropped > 0 {
        let _ = write!(out, "<p>{dropped} shorter spans are not drawn.</p>");
    }
    out
}

fn tooltip(p: &Profile, s: &Span) -> String {
    let mut t = format!("{}: {}", s.name, format_ns(s.duration_ns() as f64));
    if let Some(step) = s.step {
        let _ = write!(t, ", step {step}");
    }
    if let Some(l) = s.location {
        let _ = write!(t, "\nat {}", p.location(l));
    }
    if let Some(b) = s.bytes {
        let _ = write!(t, "\n{b} bytes");
    }
    t
}
