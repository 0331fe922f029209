//! Timeline: the spans of the window, one row per lane and depth, each terminal cell showing the
//! longest span that covers it; the selected step's phases; the slowest steps to jump to.
//! Only the spans inside the window are looked at (rows are sorted by start), so a profile of a
//! million events draws as fast as a small one once zoomed in.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;
use xlaprof_profiler::metrics::format_ns;
use xlaprof_profiler::timeline::{Span as TimeSpan, SpanKind};
use xlaprof_profiler::views::Phase;

use super::{phase_color, BOLD, DIM, SELECTED};
use crate::tui::app::{App, Window};
use crate::tui::tables::short_hash;
use crate::viewer::{lane_name, TimelineRow};

const LABEL: u16 = 10;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let lanes = app.model.rows.len() as u16;
    let [tracks, details] =
        Layout::vertical([Constraint::Length(lanes + 3), Constraint::Min(3)]).areas(area);
    let w = app.current_window();
    let title = format!(
        " timeline {} – {} ({} shown) ",
        format_ns(w.start_ns as f64),
        format_ns((w.start_ns + w.len_ns) as f64),
        format_ns(w.len_ns as f64)
    );
    let block = Block::bordered().title(title);
    let inner = block.inner(tracks);
    f.render_widget(block, tracks);
    let selected_step =
        app.step_selected.and_then(|i| app.model.analysis.steps.get(i)).map(|s| s.index);
    let buf = f.buffer_mut();
    for (i, row) in app.model.rows.iter().enumerate() {
        let y = inner.y + i as u16;
        if y >= inner.bottom().saturating_sub(1) {
            break;
        }
        let label = if row.depth == 0 { lane_name(row.lane) } else { format!("  {}", row.depth) };
        buf.set_stringn(inner.x, y, &label, LABEL as usize, DIM);
        let cells =
            Rect { x: inner.x + LABEL, y, width: inner.width.saturating_sub(LABEL), height: 1 };
        paint_row(buf, cells, &app.model.analysis.spans, row, w, selected_step);
    }
    axis(buf, inner, w);
    step_details(f, app, details);
}

/// The span shown in each cell of a row: the one covering the most of it.
fn paint_row(
    buf: &mut Buffer,
    area: Rect,
    spans: &[TimeSpan],
    row: &TimelineRow,
    w: Window,
    selected_step: Option<u64>,
) {
    let width = area.width as usize;
    if width == 0 {
        return;
    }
    let end = w.start_ns + w.len_ns;
    let per_cell = w.len_ns as f64 / width as f64;
    let mut best: Vec<Option<(usize, u64)>> = vec![None; width];
    for k in row.visible(w.start_ns, end) {
        let (start, stop) = (row.starts[k], row.ends[k]);
        if start >= end || stop <= w.start_ns {
            continue;
        }
        let x0 = ((start.max(w.start_ns) - w.start_ns) as f64 / per_cell) as usize;
        let x1 =
            (((stop.min(end) - w.start_ns) as f64 / per_cell).ceil() as usize).clamp(x0 + 1, width);
        let d = stop - start;
        for cell in best.iter_mut().take(x1).skip(x0.min(width - 1)) {
            if cell.is_none_or(|(_, bd)| d > bd) {
                *cell = Some((row.spans[k] as usize, d));
            }
        }
    }
    let mut x = 0;
    while x < width {
        let Some((i, _)) = best[x] else {
            x += 1;
            continue;
        };
        let run = best[x..].iter().take_while(|c| c.map(|(j, _)| j) == Some(i)).count();
        let s = &spans[i];
        let bg = color(s);
        // Dark text on light fills, light text on dark ones: the fill sets the contrast, not the
        // terminal's theme.
        let fg = match bg {
            Color::DarkGray | Color::Blue | Color::Red | Color::Magenta => Color::White,
            _ => Color::Black,
        };
        let mut style = Style::new().bg(bg).fg(fg);
        if s.kind == SpanKind::Step && s.step == selected_step {
            style = SELECTED.add_modifier(ratatui::style::Modifier::BOLD);
        }
        let name = if s.kind == SpanKind::Sync { "sync" } else { s.name.as_str() };
        let label: String = format!("{name:<run$}").chars().take(run).collect();
        buf.set_string(area.x + x as u16, area.y, label, style);
        x += run;
    }
}

fn color(s: &TimeSpan) -> Color {
    match s.kind {
        SpanKind::Step => Color::Gray,
        SpanKind::Scope => Color::Magenta,
        SpanKind::Sync => Color::DarkGray,
        SpanKind::GraphBuild => phase_color(Phase::Build),
        SpanKind::Lower => phase_color(Phase::Lower),
        SpanKind::Compile | SpanKind::FunctionCompile | SpanKind::CompilePhase => {
            phase_color(Phase::Compile)
        }
        SpanKind::Execute | SpanKind::Device | SpanKind::CapturedRun => phase_color(Phase::Execute),
        SpanKind::TransferToDevice | SpanKind::HostRead => phase_color(Phase::Transfer),
        SpanKind::HostFallback => Color::LightRed,
        SpanKind::DataWait => Color::Gray,
        SpanKind::Collective => Color::LightMagenta,
    }
}

/// Tick marks on the last line of the tracks.
fn axis(buf: &mut Buffer, inner: Rect, w: Window) {
    if inner.height == 0 || inner.width <= LABEL + 10 {
        return;
    }
    let y = inner.bottom() - 1;
    let width = inner.width - LABEL;
    let ticks = (width / 20).max(1);
    for t in 0..ticks {
        let x = t * width / ticks;
        let at = w.start_ns + (w.len_ns as f64 * x as f64 / width as f64) as u64;
        buf.set_stringn(inner.x + LABEL + x, y, format!("|{}", format_ns(at as f64)), 19, DIM);
    }
}

fn step_details(f: &mut Frame, app: &App, area: Rect) {
    let mut lines = Vec::new();
    match app.step_selected.and_then(|i| app.model.analysis.steps.get(i)) {
        Some(s) => {
            let mut spans = vec![
                Span::styled(format!(" step {} ", s.index), BOLD),
                Span::raw(format!(
                    "{} · {} syncs ({} forced by a value read) · {} compiles  ",
                    format_ns(s.duration_ns as f64),
                    s.syncs,
                    s.value_read_syncs,
                    s.compiles
                )),
            ];
            for (phase, ns) in s.phases() {
                spans.push(Span::styled("█", Style::new().fg(phase_color(phase))));
                spans.push(Span::raw(format!("{} {}  ", phase.name(), format_ns(ns as f64))));
            }
            lines.push(Line::from(spans));
            let p = &app.model.profile;
            for sync in p.syncs.iter().filter(|x| x.step == s.index) {
                let graph = sync.hash.map(short_hash).unwrap_or_else(|| "-".into());
                let how = if sync.compiled() { "compiled" } else { "cached" };
                lines.push(Line::raw(format!(
                    "   sync ({}) graph {graph} {how}, {} at {}",
                    sync.cause.describe(),
                    format_ns(sync.duration_ns() as f64),
                    p.location(sync.location)
                )));
            }
        }
        None => lines.push(Line::styled(" j k select a step; m the slowest", DIM)),
    }
    let mut strips = Vec::new();
    let list: Vec<String> = app
        .model
        .slowest_steps
        .iter()
        .take(8)
        .filter_map(|&n| app.model.step(n))
        .map(|s| format!("#{} {}", s.index, format_ns(s.duration_ns as f64)))
        .collect();
    strips
        .push(Line::from(vec![Span::styled(" slowest steps: ", BOLD), Span::raw(list.join("  "))]));
    let recent: Vec<String> = app
        .model
        .analysis
        .steps
        .iter()
        .rev()
        .take(8)
        .map(|s| format!("#{} {}", s.index, format_ns(s.duration_ns as f64)))
        .collect();
    strips.push(Line::from(vec![
        Span::styled(" recent steps:  ", BOLD),
        Span::raw(recent.join("  ")),
    ]));
    strips.extend(lines);
    f.render_widget(Paragraph::new(strips).block(Block::bordered().title(" steps ")), area);
}
