//! Overview: is the program healthy? Summary figures, step times and compiles over the steps,
//! where the time of recent steps went, and the findings ranked by time lost.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, List, ListItem, ListState, Paragraph, Sparkline, Wrap};
use ratatui::Frame;
use xlaprof_profiler::metrics::format_ns;
use xlaprof_profiler::views::Phase;

use super::{phase_color, BAD, BOLD, DIM, GOOD, SELECTED, WARN};
use crate::tui::app::App;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    // A line more for a torch.compile program's compiles.
    let compiled = app.model.analysis.summary.torch_compile.is_some() as u16;
    let [job, summary, sparks, phases, findings] = Layout::vertical([
        Constraint::Length(job_height(app)),
        Constraint::Length(3 + compiled),
        Constraint::Length(4),
        Constraint::Length(phases_height(app, area)),
        Constraint::Min(3),
    ])
    .areas(area);
    job_findings(f, app, job);
    summary_text(f, app, summary);
    let [steps, compiles] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(sparks);
    let shown = steps.width.saturating_sub(2) as usize;
    let recent = &app.model.analysis.steps[app.model.analysis.steps.len().saturating_sub(shown)..];
    let times: Vec<u64> = recent.iter().map(|s| s.duration_ns).collect();
    let max = times.iter().copied().max().unwrap_or(0);
    f.render_widget(
        Sparkline::default()
            .block(Block::bordered().title(format!(
                " step time, last {} (max {}) ",
                recent.len(),
                format_ns(max as f64)
            )))
            .data(&times)
            .style(Style::new().fg(ratatui::style::Color::Cyan)),
        steps,
    );
    let shown = compiles.width.saturating_sub(2) as usize;
    let recent_c =
        &app.model.analysis.steps[app.model.analysis.steps.len().saturating_sub(shown)..];
    let counts: Vec<u64> = recent_c.iter().map(|s| s.compiles as u64).collect();
    // The summary's count, as the figures beside it: compiles outside any step count too, and
    // torch.compile's with the engine's.
    let summary = &app.model.analysis.summary;
    let total = summary.compiles + summary.torch_compile.as_ref().map_or(0, |c| c.compiles);
    f.render_widget(
        Sparkline::default()
            .block(Block::bordered().title(format!(" compiles per step ({total}) ")))
            .data(&counts)
            .style(Style::new().fg(ratatui::style::Color::Red)),
        compiles,
    );
    phase_bars(f, app, phases);
    top_findings(f, app, findings);
}

/// A job's: a line for each finding across ranks (or one saying there is none), in a box.
fn job_height(app: &App) -> u16 {
    match &app.model.job {
        Some(j) => 2 + j.job.findings.len().clamp(1, 4) as u16 * 2,
        None => 0,
    }
}

/// What only a job's ranks side by side show: the straggler, a diverging rank, ranks stuck in
/// a collective (`xlaprof_profiler::job`), most costly first.
fn job_findings(f: &mut Frame, app: &App, area: Rect) {
    let Some(j) = &app.model.job else { return };
    let lines: Vec<Line> = if j.job.findings.is_empty() {
        vec![Line::styled("nothing to report: no straggler, no diverging rank, no rank stuck", GOOD)]
    } else {
        j.job
            .findings
            .iter()
            .map(|x| {
                Line::from(vec![
                    Span::styled(format!("[{}] ", x.kind.title()), BAD),
                    Span::raw(crate::viewer::text::clean(&x.message)),
                ])
            })
            .collect()
    };
    let title = format!(
        " job: {} ranks, {} collectives in common ",
        j.job.ranks.len(),
        j.job.matched
    );
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(Block::bordered().title(title)),
        area,
    );
}

fn phases_height(app: &App, area: Rect) -> u16 {
    let wanted = app.model.analysis.steps.len().min(6) as u16 + 3;
    wanted.min(area.height.saturating_sub(10)).max(3)
}

fn summary_text(f: &mut Frame, app: &App, area: Rect) {
    let s = &app.model.analysis.summary;
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let hit = Span::styled(pct(s.hit_rate), if s.hit_rate >= 0.9 { GOOD } else { WARN });
    let after = Span::styled(
        format!("{} after warm-up", s.compiles_after_warmup),
        if s.compiles_after_warmup == 0 { GOOD } else { BAD },
    );
    let hidden = Span::styled(
        format!("{} hidden", s.hidden_syncs),
        if s.hidden_syncs == 0 { GOOD } else { BAD },
    );
    let mut lines = vec![
        Line::from(vec![
            Span::styled(" steps ", DIM),
            Span::styled(s.steps.to_string(), BOLD),
            Span::styled("  median ", DIM),
            Span::styled(format_ns(s.step_median_ns as f64), BOLD),
            Span::styled("  p90 ", DIM),
            Span::raw(format_ns(s.step_p90_ns as f64)),
            Span::styled("  profile ", DIM),
            Span::raw(format_ns(s.duration_ns as f64)),
        ]),
        Line::from(vec![
            Span::styled(" compiles ", DIM),
            Span::styled(s.compiles.to_string(), BOLD),
            Span::raw(format!(" ({}, ", format_ns(s.compile_ns as f64))),
            after,
            Span::raw(")"),
            Span::styled("  graphs ", DIM),
            Span::raw(s.graphs.to_string()),
            Span::styled("  cache hits ", DIM),
            hit,
            Span::styled("  syncs ", DIM),
            Span::raw(format!("{} (", s.syncs)),
            hidden,
            Span::raw(")"),
        ]),
    ];
    if let Some(c) = &s.torch_compile {
        let style = if c.graph_breaks == 0 { GOOD } else { WARN };
        lines.push(Line::from(vec![
            Span::styled(" torch.compile ", DIM),
            Span::styled(c.text(), style),
        ]));
    }
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

/// One stacked bar per recent step, all on one scale, with a legend.
fn phase_bars(f: &mut Frame, app: &App, area: Rect) {
    let block = Block::bordered().title(" where the time of recent steps went ");
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 || inner.width < 20 {
        return;
    }
    let mut legend = vec![];
    for phase in Phase::ALL {
        legend.push(Span::styled("█", Style::new().fg(phase_color(phase))));
        legend.push(Span::raw(format!("{} ", phase.name())));
    }
    let rows = inner.height as usize - 1;
    let recent = &app.model.analysis.steps[app.model.analysis.steps.len().saturating_sub(rows)..];
    let scale = recent.iter().map(|s| s.duration_ns).max().unwrap_or(1).max(1);
    let label_width = 20usize;
    let bar_width = (inner.width as usize).saturating_sub(label_width);
    let mut lines = vec![Line::from(legend)];
    for s in recent {
        let mut spans = vec![Span::raw(format!(
            "{:>5} {:>9} {:>3}c ",
            format!("#{}", s.index),
            format_ns(s.duration_ns as f64),
            s.compiles
        ))];
        let mut drawn = 0usize;
        let mut acc = 0u64;
        for (phase, ns) in s.phases() {
            acc += ns;
            // Cells up to the cumulative end, so rounding never adds up past the bar.
            let end = (acc as f64 / scale as f64 * bar_width as f64).round() as usize;
            if end > drawn {
                spans.push(Span::styled(
                    "█".repeat(end - drawn),
                    Style::new().fg(phase_color(phase)),
                ));
                drawn = end;
            }
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn top_findings(f: &mut Frame, app: &App, area: Rect) {
    let diags = &app.model.analysis.diagnostics;
    let title = if diags.is_empty() {
        " findings: none ".to_string()
    } else {
        format!(" findings, by time lost ({}; Enter opens) ", diags.len())
    };
    let items: Vec<ListItem> = diags
        .iter()
        .map(|d| {
            ListItem::new(Line::from(vec![
                Span::styled(format!("{:>9} ", format_ns(d.cost_ns as f64)), if d.once { DIM } else { BAD }),
                Span::styled(format!("{:<16} ", d.kind.title()), BOLD),
                Span::raw(d.message.clone()),
            ]))
        })
        .collect();
    let mut state = ListState::default();
    if !diags.is_empty() {
        state.select(Some(app.overview_selected.min(diags.len() - 1)));
    }
    f.render_stateful_widget(
        List::new(items).block(Block::bordered().title(title)).highlight_style(SELECTED),
        area,
        &mut state,
    );
}
