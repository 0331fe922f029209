//! The distinct graphs: a list with their costs; two versions side by side with what changed
//! (the profiler's `diff_graphs`): changed inputs and the first diverging node highlighted, each
//! node with the source line it was recorded at; and the graph drawn as a node-link diagram.

use eframe::egui::{self, Color32, RichText};
use xlaprof_profiler::diagnostics::{diff_graphs, GraphChange};
use xlaprof_profiler::metrics::{format_bytes, format_ns};
use xlaprof_profiler::profile::Graph;
use xlaprof_profiler::record::InputName;
use xlaprof_profiler::views::GraphRow;

use super::diagram;
use super::model::Model;
use super::Selection;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct GraphsView {
    pub diagram: bool,
    /// Scroll the node lists to the first difference on the next frame.
    scroll_to_difference: bool,
    /// What changed between the last two graphs compared (older, newer) that are not a graph
    /// and the version it replaced (whose changes its row holds): diffing every frame is costly.
    diff: Option<((u64, u64), Vec<GraphChange>)>,
}

impl GraphsView {
    /// Forgets what was computed from the previous model (a location's text may have arrived).
    pub fn model_changed(&mut self) {
        self.diff = None;
    }
}

/// What changed from `a` to `b` (the graph of row `row`), diffed once per pair.
fn changes<'a>(
    model: &Model,
    cache: &'a mut Option<((u64, u64), Vec<GraphChange>)>,
    a: &Graph,
    b: &Graph,
    row: &'a GraphRow,
) -> &'a [GraphChange] {
    if a.def.hash == b.def.hash {
        return &[];
    }
    if row.previous == Some(a.def.hash) {
        return &row.changes;
    }
    let key = (a.def.hash, b.def.hash);
    if cache.as_ref().is_none_or(|(k, _)| *k != key) {
        *cache = Some((key, diff_graphs(&model.profile, a, b)));
    }
    cache.as_ref().map_or(&[], |(_, c)| c)
}

fn version_label(g: &GraphRow) -> String {
    format!("{:016x} · v{} at {}", g.hash, g.version, g.site)
}

pub fn show(ui: &mut egui::Ui, model: &Model, view: &mut GraphsView, selection: &mut Selection) {
    if model.analysis.graphs.is_empty() {
        ui.label("No graphs recorded yet.");
        return;
    }
    list_ui(ui, model, selection);
    ui.separator();
    let Some(b) = selection.graph.and_then(|h| model.graph(h)) else {
        ui.label(
            "Select a graph above (or a recompile in Diagnostics) to see it and what changed.",
        );
        return;
    };
    ui.horizontal_wrapped(|ui| {
        ui.selectable_value(&mut view.diagram, false, "Side by side");
        ui.selectable_value(&mut view.diagram, true, "Diagram");
        ui.separator();
        pick_ui(ui, "older", model, &mut selection.compare, true);
        let mut graph = selection.graph;
        pick_ui(ui, "newer", model, &mut graph, false);
        selection.graph = graph;
    });
    let graph_b = model.profile.graphs.get(&b.hash);
    let a = selection.compare.and_then(|h| model.graph(h));
    let graph_a = a.and_then(|a| model.profile.graphs.get(&a.hash));
    if view.diagram {
        if let Some(g) = graph_b {
            diagram::show(ui, g);
        }
        return;
    }
    let sharding = model.analysis.devices.sharding_table(b.hash);
    if !sharding.is_empty() {
        egui::CollapsingHeader::new(RichText::new("Sharding").strong()).default_open(true).show(
            ui,
            |ui| {
                for line in sharding {
                    ui.monospace(line);
                }
            },
        );
        ui.separator();
    }
    let changes = match (graph_a, graph_b) {
        (Some(ga), Some(gb)) => changes(model, &mut view.diff, ga, gb, b),
        _ => &[],
    };
    if graph_a.is_some() {
        ui.label(RichText::new("What changed").strong());
        if changes.is_empty() {
            ui.label("nothing: the same graph");
        }
        for c in changes {
            ui.label(format!("- {}", c.sentence()));
        }
        if changes
            .iter()
            .any(|c| c.diverging_node().is_some())
            && ui.button("Scroll to the first diverging node").clicked()
        {
            view.scroll_to_difference = true;
        }
        ui.separator();
    }
    side_by_side_ui(ui, model, graph_a, graph_b, changes, &mut view.scroll_to_difference);
}

fn list_ui(ui: &mut egui::Ui, model: &Model, selection: &mut Selection) {
    egui::ScrollArea::vertical().id_salt("graph-list").max_height(180.0).show(ui, |ui| {
        egui::Grid::new("graphs").striped(true).num_columns(8).show(ui, |ui| {
            for h in [
                "graph",
                "version and call site",
                "nodes",
                "compiles",
                "compile time",
                "runs",
                "mean run",
                "peak memory",
            ] {
                ui.strong(h);
            }
            ui.end_row();
            for g in &model.analysis.graphs {
                let selected = selection.graph == Some(g.hash);
                if ui.selectable_label(selected, format!("{:016x}", g.hash)).clicked() {
                    selection.show_graph(model, g.hash);
                }
                ui.label(format!("v{} at {}", g.version, g.site));
                ui.label(g.nodes.to_string());
                ui.label(g.compiles.to_string());
                ui.label(format_ns(g.compile_ns as f64));
                ui.label(g.executions.to_string());
                ui.label(format_ns(g.mean_execute_ns as f64));
                ui.label(
                    g.peak_memory_bytes
                        .map(|b| format_bytes(b as f64))
                        .unwrap_or_else(|| "—".into()),
                );
                ui.end_row();
            }
        });
    });
}

/// A graph picker, labelled `label` (the older version may be none).
fn pick_ui(
    ui: &mut egui::Ui,
    label: &str,
    model: &Model,
    value: &mut Option<u64>,
    allow_none: bool,
) {
    let text =
        value.and_then(|h| model.graph(h)).map(version_label).unwrap_or_else(|| "(none)".into());
    egui::ComboBox::from_label(label).selected_text(text).width(300.0).show_ui(ui, |ui| {
        if allow_none {
            ui.selectable_value(value, None, "(none)");
        }
        for g in &model.analysis.graphs {
            ui.selectable_value(value, Some(g.hash), version_label(g));
        }
    });
}

fn side_by_side_ui(
    ui: &mut egui::Ui,
    model: &Model,
    a: Option<&Graph>,
    b: Option<&Graph>,
    changes: &[GraphChange],
    scroll_to_difference: &mut bool,
) {
    let changed_inputs: Vec<usize> = changes
        .iter()
        .filter_map(|c| match c {
            GraphChange::InputShape { input, .. } | GraphChange::Donation { input, .. } => {
                Some(*input)
            }
            _ => None,
        })
        .collect();
    let diverging = changes.iter().find_map(GraphChange::diverging_node);
    let highlight = Color32::from_rgba_unmultiplied(230, 180, 40, 90);
    let column_width = ((ui.available_width() - 16.0) / 2.0).max(200.0);
    let title = |g: Option<&Graph>| {
        g.map(|g| {
            format!(
                "graph {:016x}: {} nodes, {} inputs",
                g.def.hash,
                g.def.nodes,
                g.def.inputs.len()
            )
        })
        .unwrap_or_else(|| "(nothing to compare with)".into())
    };

    // Inputs, row by row.
    let inputs = a.map_or(0, |g| g.def.inputs.len()).max(b.map_or(0, |g| g.def.inputs.len()));
    ui.horizontal(|ui| {
        for g in [a, b] {
            ui.allocate_ui_with_layout(
                egui::vec2(column_width, 18.0),
                egui::Layout::left_to_right(egui::Align::Center),
                |ui| {
                    ui.set_min_width(column_width);
                    ui.label(RichText::new(title(g)).strong());
                },
            );
        }
    });
    egui::ScrollArea::vertical().id_salt("inputs").max_height(140.0).show(ui, |ui| {
        for i in 0..inputs {
            ui.horizontal(|ui| {
                for g in [a, b] {
                    let text = g
                        .and_then(|g| g.def.inputs.get(i))
                        .map(|inp| {
                            let name = match &inp.name {
                                Some(InputName::Given(n) | InputName::Variable(n)) => {
                                    format!(" `{n}`")
                                }
                                None => String::new(),
                            };
                            format!(
                                "input {i}{name}: {}{}{} · {}",
                                inp.shape,
                                if inp.data { "" } else { " (host scalar)" },
                                if inp.donated { " donated" } else { "" },
                                model.profile.location(inp.location)
                            )
                        })
                        .unwrap_or_default();
                    cell_ui(
                        ui,
                        column_width,
                        &text,
                        changed_inputs.contains(&i).then_some(highlight),
                    );
                }
            });
        }
    });
    ui.separator();

    // Nodes, in post-order, with the source line of each.
    let rows = a.map_or(0, |g| g.def.node_defs.len()).max(b.map_or(0, |g| g.def.node_defs.len()));
    let row_height = 18.0;
    let mut area = egui::ScrollArea::vertical().id_salt("nodes").auto_shrink([false, false]);
    if *scroll_to_difference {
        *scroll_to_difference = false;
        if let Some(node) = diverging {
            area = area.vertical_scroll_offset(
                (node as f32 - 3.0).max(0.0) * (row_height + ui.spacing().item_spacing.y),
            );
        }
    }
    area.show_rows(ui, row_height, rows, |ui, range| {
        for i in range {
            ui.horizontal(|ui| {
                for g in [a, b] {
                    let text = g
                        .and_then(|g| {
                            let node = g.def.node_defs.get(i)?;
                            let at = model.profile.location(node.location);
                            Some(format!("{}    @ {at}", node.text(i)))
                        })
                        .unwrap_or_default();
                    cell_ui(ui, column_width, &text, (diverging == Some(i)).then_some(highlight));
                }
            });
        }
    });
}

fn cell_ui(ui: &mut egui::Ui, width: f32, text: &str, fill: Option<Color32>) {
    let size = egui::vec2(width, 18.0);
    let layout = egui::Layout::left_to_right(egui::Align::Center);
    let response = ui
        .allocate_ui_with_layout(size, layout, |ui| {
            ui.set_min_size(size);
            ui.set_max_width(width);
            if let Some(fill) = fill {
                ui.painter().rect_filled(
                    egui::Rect::from_min_size(ui.cursor().min, size),
                    2.0,
                    fill,
                );
            }
            ui.add(egui::Label::new(RichText::new(text).monospace()).truncate())
        })
        .inner;
    response.on_hover_text(text);
}
