//! Drawing the terminal UI: the frame (views bar, status, key hints, help, output pane) here,
//! each view in a module of its own. Only named ANSI colors and the terminal's own foreground
//! and background are used, so it reads on dark and light themes alike.

mod detail;
mod overview;
mod table;
mod timeline;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Tabs, Wrap};
use ratatui::Frame;

use xlaprof_profiler::views::Phase;

use super::app::{App, Tab};
use super::tables::{DIAGNOSTIC_COLUMNS, GRAPH_COLUMNS, LINE_COLUMNS, METRIC_COLUMNS};

pub(super) const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
pub(super) const DIM: Style = Style::new().add_modifier(Modifier::DIM);
pub(super) const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
pub(super) const WARN: Style = Style::new().fg(Color::Yellow);
pub(super) const BAD: Style = Style::new().fg(Color::Red);
pub(super) const GOOD: Style = Style::new().fg(Color::Green);

/// The color of each phase of a step.
pub(super) fn phase_color(phase: Phase) -> Color {
    match phase {
        Phase::Trace => Color::Gray,
        Phase::Build => Color::Cyan,
        Phase::Lower => Color::Blue,
        Phase::Compile => Color::Red,
        Phase::Transfer => Color::Yellow,
        Phase::Execute => Color::Green,
    }
}

pub fn frame(f: &mut Frame, app: &App) {
    let area = f.area();
    if app.source.error.is_some() && app.model.profile.records == 0 && app.source.program.is_none()
    {
        error_screen(f, app, area);
        return;
    }
    let [bar, status, body, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    views_bar(f, app, bar);
    status_line(f, app, status);
    let body = match &app.source.program {
        Some(program) if app.show_output => {
            let pane = (body.height / 3).clamp(4, 12);
            let [main, out] =
                Layout::vertical([Constraint::Min(3), Constraint::Length(pane)]).areas(body);
            output_pane(f, program, out);
            main
        }
        _ => body,
    };
    match app.tab {
        Tab::Overview => overview::draw(f, app, body),
        Tab::Graphs => match app.graph_detail {
            Some(hash) => detail::graph(f, app, hash, body),
            None => table::draw(
                f,
                body,
                "Graphs: every distinct graph (Enter: history, ops, StableHLO)",
                &app.model.analysis.graphs,
                &GRAPH_COLUMNS,
                &app.graphs,
                app.editing_filter,
            ),
        },
        Tab::Timeline => timeline::draw(f, app, body),
        Tab::Metrics => metrics(f, app, body),
        Tab::Lines => table::draw(
            f,
            body,
            "Lines: what the engine did for each source line (ops recorded, graph inputs made, syncs forced, compiles, reads, bytes, fallbacks)",
            &app.model.analysis.lines,
            &LINE_COLUMNS,
            &app.lines,
            app.editing_filter,
        ),
        Tab::Diagnostics => {
            if app.diagnostic_detail {
                detail::diagnostic(f, app, body)
            } else {
                table::draw(
                    f,
                    body,
                    "Diagnostics, most costly first (Enter: details)",
                    &app.model.analysis.diagnostics,
                    &DIAGNOSTIC_COLUMNS,
                    &app.diagnostics,
                    app.editing_filter,
                )
            }
        }
    }
    key_hints(f, app, keys);
    if app.help {
        help(f, area);
    }
}

fn views_bar(f: &mut Frame, app: &App, area: Rect) {
    let titles: Vec<Line> = Tab::ALL
        .iter()
        .enumerate()
        .map(|(i, t)| Line::from(format!("{} {}", i + 1, t.title())))
        .collect();
    let tabs = Tabs::new(titles)
        .select(app.tab.index())
        .highlight_style(SELECTED.add_modifier(Modifier::BOLD))
        .divider("│")
        .padding(" ", " ");
    let [name, tabs_area] =
        Layout::horizontal([Constraint::Length(9), Constraint::Min(10)]).areas(area);
    f.render_widget(Paragraph::new(Span::styled(" xlaprof ", BOLD)), name);
    f.render_widget(tabs, tabs_area);
}

/// What is shown and whether it still changes: file, program state, warnings.
fn status_line(f: &mut Frame, app: &App, area: Rect) {
    let s = &app.model.analysis.summary;
    let mut spans = Vec::new();
    // `Some(None)`: a program still running; `Some(Some(_))`: one that exited.
    let state = match app.source.program.as_ref().map(|p| p.status) {
        Some(Some(st)) if st.success() => Span::styled("■ exited 0", GOOD),
        Some(Some(st)) => Span::styled(format!("■ {}", exit_text(st)), BAD),
        _ if app.paused => Span::styled("❚❚ paused", WARN),
        Some(None) => Span::styled("● running", GOOD),
        None if app.source.following() => Span::styled("● following", GOOD),
        None => Span::styled("■ file", DIM),
    };
    spans.push(Span::raw(" "));
    spans.push(state);
    // Warnings before the names: a long program name or path must not push them off screen.
    let exited = app.source.program.as_ref().is_some_and(|p| p.status.is_some());
    if exited && app.model.profile.records == 0 && !app.source.path.exists() {
        spans.push(Span::styled(
            "  ⚠ the program wrote no profile: is it built on xlaprof, calling init_from_env()?",
            WARN,
        ));
    }
    let warnings = &app.model.profile.warnings;
    if let Some(first) = warnings.first() {
        spans.push(Span::styled(
            format!(
                "  ⚠ {} warning{}: {}",
                warnings.len(),
                if warnings.len() == 1 { "" } else { "s" },
                first
            ),
            WARN,
        ));
    }
    if let Some(job) = &app.model.job {
        let rank = job.job.ranks.get(job.shown).map(|r| r.rank).unwrap_or(job.shown as u32);
        spans.push(Span::styled(format!("  rank {rank} of {} (r: next)", job.job.ranks.len()), BOLD));
    }
    let program = if s.program.is_empty() { "?" } else { s.program.as_str() };
    spans.push(Span::raw(format!("  {}  ", program)));
    spans.push(Span::styled(
        crate::viewer::text::clean(&app.source.path.display().to_string()),
        DIM,
    ));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

pub(super) fn exit_text(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exited {code}"),
        None => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                if let Some(sig) = status.signal() {
                    return format!("killed by signal {sig}");
                }
            }
            "exited".to_string()
        }
    }
}

fn key_hints(f: &mut Frame, app: &App, area: Rect) {
    // Help and quit in every view; not while typing, where they are part of the filter.
    let always: &[(&str, &str)] =
        if app.editing_filter { &[] } else { &[("?", "help"), ("q", "quit")] };
    let hints: &[(&str, &str)] = if app.editing_filter {
        &[("type", "filter"), ("Enter", "keep"), ("Esc", "clear")]
    } else {
        match app.tab {
            Tab::Timeline => &[
                ("←→", "pan"),
                ("+-", "zoom"),
                ("jk", "step"),
                ("m", "slowest"),
                ("Enter", "zoom to step"),
                ("0", "all"),
            ],
            Tab::Graphs if app.graph_detail.is_some() => &[("jk", "scroll"), ("Esc", "back")],
            Tab::Diagnostics if app.diagnostic_detail => {
                &[("jk", "scroll"), ("Enter", "its graph"), ("Esc", "back")]
            }
            Tab::Overview => {
                &[("Tab", "views"), ("jk", "move"), ("Enter", "open"), ("space", "pause")]
            }
            _ => &[
                ("jk", "move"),
                ("Enter", "open"),
                ("/", "filter"),
                ("←→ s", "sort"),
                ("space", "pause"),
            ],
        }
    };
    let mut spans = Vec::new();
    for (key, what) in always.iter().chain(hints) {
        spans.push(Span::styled(format!(" {key}"), BOLD));
        spans.push(Span::raw(format!(" {what} ")));
    }
    if app.source.program.is_some() {
        spans.push(Span::styled(" o", BOLD));
        spans.push(Span::raw(" output "));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn output_pane(f: &mut Frame, program: &crate::viewer::Program, area: Rect) {
    let state = match program.status {
        None => "running".to_string(),
        Some(st) => exit_text(st),
    };
    let block = Block::bordered().title(format!(" output of `{}` ({state}) ", program.command));
    let inner = block.inner(area);
    let text: Vec<Line> =
        program.last_lines(inner.height as usize).into_iter().map(Line::raw).collect();
    f.render_widget(Paragraph::new(text).block(block), area);
}

fn metrics(f: &mut Frame, app: &App, area: Rect) {
    let counters = &app.model.analysis.metrics.counters;
    let rows = (counters.len() as u16).div_ceil(3) + 2;
    let [top, bottom] =
        Layout::vertical([Constraint::Min(4), Constraint::Length(rows.min(area.height / 2))])
            .areas(area);
    table::draw(
        f,
        top,
        "Metrics (the metrics report; / filter, ←→ s sort)",
        &app.model.analysis.metrics.metrics,
        &METRIC_COLUMNS,
        &app.metrics,
        app.editing_filter,
    );
    let cells: Vec<String> =
        counters.iter().map(|c| format!("{:<24}{:>10}", c.name, c.value)).collect();
    let lines: Vec<Line> = cells.chunks(3).map(|c| Line::raw(c.join("   "))).collect();
    f.render_widget(Paragraph::new(lines).block(Block::bordered().title(" Counters ")), bottom);
}

fn error_screen(f: &mut Frame, app: &App, area: Rect) {
    let error = app.source.error.as_deref().unwrap_or("");
    let text = vec![
        Line::styled("xlaprof cannot show this profile", BOLD),
        Line::raw(""),
        Line::styled(error.to_string(), BAD),
        Line::raw(""),
        Line::raw(
            "Record one with XLAPROF_PROFILE=FILE, or run a program under `xlaprof run -- CMD`.",
        ),
        Line::raw("Press q to quit."),
    ];
    let block = Block::bordered().title(" error ");
    f.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }).block(block), area);
}

const HELP: &[(&str, &str)] = &[
    ("?", "this help (any key closes it)"),
    ("q, Ctrl-C", "quit (stops a program started by `run`)"),
    ("Tab, Shift-Tab", "next, previous view"),
    ("1-6", "Overview, Graphs, Timeline, Metrics, Diagnostics, Lines"),
    ("↑↓, j k", "move; scroll details"),
    ("PgUp PgDn, g G", "page; first, last"),
    ("Enter", "drill in (a graph, a finding, a step)"),
    ("Esc", "back; clear the filter"),
    ("/", "filter the table (Enter keeps, Esc clears)"),
    ("←→, s", "choose the sort column; sort (again: reverse)"),
    ("space", "pause live updates"),
    ("o", "show or hide the program's output (run)"),
    ("r, R", "a job's next, previous rank"),
    ("timeline", "←→ h l pan, + - zoom, 0 all, m slowest step"),
    ("mouse", "scroll moves"),
];

fn help(f: &mut Frame, area: Rect) {
    let width = 64.min(area.width);
    let height = (HELP.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![Span::styled(format!(" {k:<15}"), BOLD), Span::raw(*what)])
        })
        .collect();
    f.render_widget(Clear, popup);
    f.render_widget(Paragraph::new(lines).block(Block::bordered().title(" keys ")), popup);
}
