//! Where the time goes: the profiler's folded stacks (program → steps → sync site → phase →
//! graph) drawn as a flamegraph (click a frame to zoom into it), or as a sortable table.

use eframe::egui::{self, Align2, Color32, FontId, Pos2, Rect, Sense, Vec2};
use xlaprof_profiler::metrics::format_ns;

use super::model::{FlameNode, Model};
use super::Settings;

const FRAME_HEIGHT: f32 = 22.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Frame,
    Total,
    SelfTime,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FlameState {
    /// Names from the root down to the zoomed-in frame.
    pub focus: Vec<String>,
    pub sort_by: SortBy,
    pub descending: bool,
}

impl Default for FlameState {
    fn default() -> Self {
        FlameState { focus: Vec::new(), sort_by: SortBy::Total, descending: true }
    }
}

pub fn show(ui: &mut egui::Ui, model: &Model, state: &mut FlameState, settings: &mut Settings) {
    ui.horizontal(|ui| {
        ui.selectable_value(&mut settings.flame_as_table, false, "Flame view");
        ui.selectable_value(&mut settings.flame_as_table, true, "Table");
        if !state.focus.is_empty() && !settings.flame_as_table {
            ui.separator();
            if ui.button("Whole profile").clicked() {
                state.focus.clear();
            }
            ui.label(state.focus.join(" > "));
        }
    });
    if model.flame.total_us == 0 {
        ui.label("No syncs recorded yet: nothing to draw.");
        return;
    }
    if settings.flame_as_table {
        table_ui(ui, model, state);
    } else {
        flame_ui(ui, model, state);
    }
}

fn focused<'a>(root: &'a FlameNode, path: &[String]) -> &'a FlameNode {
    let mut node = root;
    for name in path {
        match node.children.iter().find(|c| &c.name == name) {
            Some(c) => node = c,
            None => break,
        }
    }
    node
}

fn frame_color(name: &str) -> Color32 {
    let warm = |r, g, b| Color32::from_rgb(r, g, b);
    if name.starts_with("compile") {
        warm(225, 95, 70)
    } else if name.starts_with("execute") {
        warm(80, 180, 190)
    } else if name.starts_with("graph ") {
        warm(150, 160, 210)
    } else if name.starts_with("sync at") {
        warm(230, 160, 80)
    } else if name.starts_with("host") {
        warm(140, 140, 140)
    } else {
        // A stable hue per name, in the warm range flamegraphs use.
        let h = name.bytes().fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
        warm(200 + (h % 50) as u8, 120 + (h / 50 % 90) as u8, 60 + (h / 4500 % 40) as u8)
    }
}

fn flame_ui(ui: &mut egui::Ui, model: &Model, state: &mut FlameState) {
    let root = focused(&model.flame, &state.focus);
    let depth = max_depth(root);
    let (rect, _) = ui.allocate_exact_size(
        Vec2::new(ui.available_width(), (depth as f32 + 1.0) * FRAME_HEIGHT),
        Sense::hover(),
    );
    let mut clicked: Option<Vec<String>> = None;
    let mut path = Vec::new();
    draw_node(
        ui,
        rect,
        root,
        0,
        rect.left(),
        rect.width(),
        model.flame.total_us.max(1),
        &mut path,
        &mut clicked,
    );
    if let Some(mut p) = clicked {
        let mut full = state.focus.clone();
        // The clicked path starts at the focused frame, which `focus` already names.
        if !p.is_empty() {
            p.remove(0);
        }
        full.extend(p);
        state.focus = full;
    }
}

fn max_depth(n: &FlameNode) -> usize {
    1 + n.children.iter().map(max_depth).max().unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
fn draw_node(
    ui: &mut egui::Ui,
    area: Rect,
    node: &FlameNode,
    depth: usize,
    x: f32,
    width: f32,
    all_us: u64,
    path: &mut Vec<String>,
    clicked: &mut Option<Vec<String>>,
) {
    if width < 0.5 {
        return;
    }
    path.push(node.name.clone());
    let rect = Rect::from_min_size(
        Pos2::new(x, area.top() + depth as f32 * FRAME_HEIGHT),
        Vec2::new(width, FRAME_HEIGHT - 1.0),
    );
    let id = ui.scope_id().with(("flame", path.as_slice()));
    let response = ui.interact(rect, id, Sense::click());
    let painter = ui.painter_at(rect);
    let mut color = frame_color(&node.name);
    if response.hovered() {
        color = color.gamma_multiply(1.25);
    }
    painter.rect_filled(rect, 1.0, color);
    if width > 30.0 {
        painter.text(
            Pos2::new(rect.left() + 4.0, rect.center().y),
            Align2::LEFT_CENTER,
            &node.name,
            FontId::proportional(12.0),
            Color32::BLACK,
        );
    }
    let response = response.on_hover_text(format!(
        "{}\n{} ({:.1}% of all)",
        node.name,
        format_ns(node.total_us as f64 * 1e3),
        node.total_us as f64 / all_us as f64 * 100.0
    ));
    if response.clicked() {
        *clicked = Some(path.clone());
    }
    let mut child_x = x;
    for child in &node.children {
        let child_width = width * child.total_us as f32 / node.total_us.max(1) as f32;
        draw_node(ui, area, child, depth + 1, child_x, child_width, all_us, path, clicked);
        child_x += child_width;
    }
    path.pop();
}

/// One line of the table: a frame and where it sits.
struct TableRow {
    stack: String,
    name: String,
    total_us: u64,
    self_us: u64,
}

fn flatten(node: &FlameNode, prefix: &str, out: &mut Vec<TableRow>) {
    let stack =
        if prefix.is_empty() { node.name.clone() } else { format!("{prefix} > {}", node.name) };
    let children_us: u64 = node.children.iter().map(|c| c.total_us).sum();
    out.push(TableRow {
        stack: stack.clone(),
        name: node.name.clone(),
        total_us: node.total_us,
        self_us: node.total_us.saturating_sub(children_us),
    });
    for c in &node.children {
        flatten(c, &stack, out);
    }
}

fn table_ui(ui: &mut egui::Ui, model: &Model, state: &mut FlameState) {
    let mut rows = Vec::new();
    for c in &model.flame.children {
        flatten(c, "", &mut rows);
    }
    rows.sort_by(|a, b| {
        let order = match state.sort_by {
            SortBy::Frame => a.stack.cmp(&b.stack),
            SortBy::Total => a.total_us.cmp(&b.total_us),
            SortBy::SelfTime => a.self_us.cmp(&b.self_us),
        };
        if state.descending {
            order.reverse()
        } else {
            order
        }
    });
    let all = model.flame.total_us.max(1) as f64;
    egui::ScrollArea::both().show(ui, |ui| {
        egui::Grid::new("flame-table").striped(true).num_columns(4).show(ui, |ui| {
            for (title, key) in
                [("frame", SortBy::Frame), ("total", SortBy::Total), ("self", SortBy::SelfTime)]
            {
                let arrow = if state.sort_by == key {
                    if state.descending {
                        " (desc)"
                    } else {
                        " (asc)"
                    }
                } else {
                    ""
                };
                if ui.button(format!("{title}{arrow}")).clicked() {
                    if state.sort_by == key {
                        state.descending = !state.descending;
                    } else {
                        state.sort_by = key;
                        state.descending = key != SortBy::Frame;
                    }
                }
            }
            ui.label("% of all");
            ui.end_row();
            for r in &rows {
                ui.label(r.stack.as_str()).on_hover_text(r.name.as_str());
                ui.label(format_ns(r.total_us as f64 * 1e3));
                ui.label(format_ns(r.self_us as f64 * 1e3));
                ui.label(format!("{:.1}%", r.total_us as f64 / all * 100.0));
                ui.end_row();
            }
        });
    });
}
