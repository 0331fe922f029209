//! One drawer for every sortable, filterable table: the columns that fit the width, the sort
//! column marked, the selected row kept in view.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table, TableState as RatatuiTableState};
use ratatui::Frame;

use super::{BOLD, SELECTED, WARN};
use crate::tui::app::TableState;
use crate::tui::tables::Column;

pub fn draw<T>(
    f: &mut Frame,
    area: Rect,
    title: &str,
    rows: &[T],
    columns: &[Column<T>],
    state: &TableState,
    editing_filter: bool,
) {
    let shown = state.visible(rows, columns);
    let mut title_spans = vec![Span::styled(format!(" {title} "), BOLD)];
    if editing_filter || !state.filter.is_empty() {
        let cursor = if editing_filter { "▏" } else { "" };
        title_spans.push(Span::styled(format!("/{}{cursor} ", state.filter), WARN));
    }
    title_spans.push(Span::raw(format!("{} of {} ", shown.len(), rows.len())));
    let block = Block::bordered().title(Line::from(title_spans));
    let inner_width = area.width.saturating_sub(2);

    // The columns that fit, in order; the last one takes what is left.
    let mut fit = Vec::new();
    let mut used = 0u16;
    for (i, c) in columns.iter().enumerate() {
        if used + c.width > inner_width && !fit.is_empty() {
            break;
        }
        used += c.width + 1;
        fit.push(i);
    }
    let widths: Vec<Constraint> = fit
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            if n + 1 == fit.len() {
                Constraint::Min(columns[i].width)
            } else {
                Constraint::Length(columns[i].width)
            }
        })
        .collect();
    let header = Row::new(fit.iter().map(|&i| {
        let c = &columns[i];
        let mark = match state.sort {
            Some((s, true)) if s == i => "▼",
            Some((s, false)) if s == i => "▲",
            _ => "",
        };
        let mut style = BOLD;
        if i == state.cursor {
            style = style.add_modifier(Modifier::UNDERLINED);
        }
        let text = format!("{}{mark}", c.title);
        Cell::from(Line::styled(aligned(&text, c.width, c.right), style))
    }));
    let body: Vec<Row> = shown
        .iter()
        .map(|&r| {
            Row::new(fit.iter().map(|&i| {
                let c = &columns[i];
                Cell::from(aligned(&(c.text)(&rows[r]), c.width, c.right))
            }))
        })
        .collect();
    let table = Table::new(body, widths).header(header).block(block).row_highlight_style(SELECTED);
    let mut ts = RatatuiTableState::default();
    if !shown.is_empty() {
        ts.select(Some(state.selected.min(shown.len() - 1)));
    }
    f.render_stateful_widget(table, area, &mut ts);
}

/// Right-aligns numbers within their column (text stays left-aligned and is cut by the table).
fn aligned(text: &str, width: u16, right: bool) -> String {
    if right {
        format!("{text:>w$}", w = width as usize)
    } else {
        text.to_string()
    }
}
