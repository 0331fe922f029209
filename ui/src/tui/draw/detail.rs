//! Drill-down pages: one graph (its call site's recompile history, op histogram, source lines and
//! StableHLO) and one finding (message, advice, causes, every occurrence).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use xlaprof_profiler::metrics::format_ns;
use xlaprof_profiler::views::site_history;

use super::{BAD, BOLD, DIM, GOOD, WARN};
use crate::tui::app::App;
use crate::tui::tables::short_hash;

pub fn graph(f: &mut Frame, app: &App, hash: u64, area: Rect) {
    let Some(row) = app.model.graph(hash) else {
        f.render_widget(Paragraph::new("this graph is no longer in the profile (Esc: back)"), area);
        return;
    };
    let graph = app.model.profile.graphs.get(&hash);
    let history = site_history(&app.model.analysis.graphs, hash);

    let mut facts = vec![
        Line::from(vec![
            Span::styled(format!(" graph {} ", short_hash(hash)), BOLD),
            Span::styled(format!("({hash:016x})"), DIM),
            Span::raw(format!("  version {} of {} at {}", row.version, history.len(), row.site)),
        ]),
        Line::raw(format!(
            " {} nodes, {} inputs, {} outputs · compiled {}× ({}) · ran {}× (mean {})",
            row.nodes,
            row.inputs,
            row.outputs,
            row.compiles,
            format_ns(row.compile_ns as f64),
            row.executions,
            format_ns(row.mean_execute_ns as f64)
        )),
    ];
    facts.push(Line::styled(" recompile history of this call site", BOLD));
    for v in &history {
        let marker = if v.hash == hash { "▶" } else { " " };
        let why = if v.changes.is_empty() {
            "first version".to_string()
        } else {
            v.changes.iter().map(|c| c.sentence()).collect::<Vec<_>>().join("; ")
        };
        facts.push(Line::from(vec![
            Span::raw(format!(" {marker} v{} {} ", v.version, short_hash(v.hash))),
            Span::styled(why, if v.changes.is_empty() { DIM } else { WARN }),
        ]));
    }

    let mut left = vec![Line::styled("ops", BOLD)];
    if let Some(g) = graph {
        let mut ops = g.def.ops.clone();
        ops.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let max = ops.first().map(|o| o.1).unwrap_or(1).max(1);
        for (name, n) in ops {
            let bar = "■".repeat(((n as f64 / max as f64) * 10.0).ceil() as usize);
            left.push(Line::raw(format!("{n:>5} {name:<18} {bar}")));
        }
    }
    let sharding = app.model.analysis.devices.sharding_table(hash);
    if !sharding.is_empty() {
        left.push(Line::raw(""));
        left.push(Line::styled("sharding", BOLD));
        left.extend(sharding.into_iter().map(Line::raw));
    }
    left.push(Line::raw(""));
    left.push(Line::styled("source lines", BOLD));
    for (line, n) in &row.source_lines {
        left.push(Line::raw(format!("{n:>5} {line}")));
    }

    let hlo = graph.and_then(|g| g.stablehlo.as_deref()).unwrap_or("(no StableHLO recorded)");
    let hlo_lines: Vec<Line> = hlo.lines().map(Line::raw).collect();
    let total = hlo_lines.len();

    if area.width < 110 {
        // Narrow screens: one page to scroll through, the StableHLO last.
        let mut lines = facts;
        lines.push(Line::raw(""));
        lines.extend(left);
        lines.push(Line::raw(""));
        lines.push(Line::styled(format!("StableHLO ({total} lines)"), BOLD));
        lines.extend(hlo_lines);
        f.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" graph (j k scroll, Esc back) "))
                .scroll((app.detail_scroll, 0)),
            area,
        );
        return;
    }
    let facts_height = (facts.len() as u16 + 1).min(area.height / 2);
    let [top, rest] =
        Layout::vertical([Constraint::Length(facts_height), Constraint::Min(3)]).areas(area);
    f.render_widget(Paragraph::new(facts).wrap(Wrap { trim: false }), top);
    let [ops_area, hlo_area] =
        Layout::horizontal([Constraint::Percentage(38), Constraint::Percentage(62)]).areas(rest);
    f.render_widget(
        Paragraph::new(left).block(Block::bordered().title(" ops and lines ")),
        ops_area,
    );
    let scroll = app.detail_scroll.min(total.saturating_sub(1) as u16);
    f.render_widget(
        Paragraph::new(hlo_lines)
            .block(Block::bordered().title(format!(
                " StableHLO, line {}/{} (j k scroll) ",
                scroll + 1,
                total
            )))
            .scroll((scroll, 0)),
        hlo_area,
    );
}

pub fn diagnostic(f: &mut Frame, app: &App, area: Rect) {
    let Some(d) = app.selected_diagnostic() else {
        f.render_widget(Paragraph::new("no finding selected (Esc: back)"), area);
        return;
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!(" {} ", d.kind.title()), BOLD),
            Span::raw(format!("at {}", d.location)),
        ]),
        Line::from(vec![
            Span::styled(" cost ", DIM),
            Span::styled(d.cost_words(), if d.once { DIM } else { BAD }),
            Span::styled("  count ", DIM),
            Span::raw(d.count.to_string()),
        ]),
        Line::raw(""),
        Line::raw(format!(" {}", d.message)),
    ];
    if let Some(advice) = &d.advice {
        lines.push(Line::raw(""));
        lines.push(Line::from(vec![Span::styled(" advice: ", BOLD), Span::raw(advice.clone())]));
    }
    if let Some(fix) = &d.fix {
        let (before, after) = fix.trimmed();
        lines.push(Line::from(vec![
            Span::styled(" change ", BOLD),
            Span::raw(format!("{}:", fix.at)),
        ]));
        lines.push(Line::styled(format!("   - {before}"), BAD));
        lines.push(Line::styled(format!("   + {after}"), GOOD));
    }
    if !d.changes.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled(" what changed", BOLD));
        for c in &d.changes {
            lines.push(Line::styled(format!("  • {}", c.sentence()), WARN));
        }
    }
    if !d.graphs.is_empty() {
        let graphs: Vec<String> = d.graphs.iter().map(|&h| short_hash(h)).collect();
        lines.push(Line::raw(""));
        lines.push(Line::raw(format!(" graphs: {} (Enter opens the last)", graphs.join(", "))));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(format!(" occurrences ({})", d.instances.len()), BOLD));
    for i in &d.instances {
        lines.push(Line::raw(format!("  {:>9}  {}", format_ns(i.cost_ns as f64), i.message)));
    }
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" finding (j k scroll, Esc back) "))
            .scroll((app.detail_scroll, 0)),
        area,
    );
}
