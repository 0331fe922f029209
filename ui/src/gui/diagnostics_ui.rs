//! The profiler's findings, most costly first, with source lines, costs and advice. Selecting
//! one selects its syncs (highlighted in the timeline) and its graphs (the graphs panel compares
//! the last two).

use eframe::egui::{self, RichText};
use xlaprof_profiler::diagnostics::Diagnostic;
use xlaprof_profiler::metrics::format_ns;

use super::model::Model;
use super::Selection;

/// Where another panel should go.
pub enum Jump {
    /// The timeline, showing this time range (ns).
    Timeline(u64, u64),
    /// The graphs panel (the finding's graphs are selected).
    Graphs,
}

/// Selects `d` (index `i`): its syncs and its graphs.
pub fn select(model: &Model, selection: &mut Selection, i: usize, d: &Diagnostic) {
    selection.diagnostic = Some(i);
    selection.syncs = d.instances.iter().filter_map(|x| x.sync).collect();
    selection.span = None;
    if let Some(&last) = d.graphs.last() {
        selection.graph = Some(last);
        selection.compare = if d.graphs.len() >= 2 {
            d.graphs.get(d.graphs.len() - 2).copied()
        } else {
            model.graph(last).and_then(|g| g.previous)
        };
    }
}

/// The time range of a finding's first sync, or of its first step.
fn range_of(model: &Model, d: &Diagnostic) -> Option<(u64, u64)> {
    let first = d.instances.first()?;
    if let Some(sync) = first.sync.and_then(|id| model.profile.sync(id)) {
        return Some((sync.start_ns, sync.end_ns));
    }
    let step = model.step(first.step?)?;
    Some((step.start_ns, step.start_ns + step.duration_ns))
}

pub fn show(ui: &mut egui::Ui, model: &Model, selection: &mut Selection) -> Option<Jump> {
    let diagnostics = &model.analysis.diagnostics;
    if diagnostics.is_empty() {
        ui.label("No findings: no recompiles, hidden syncs, slow steps or idle device.");
        return None;
    }
    let mut jump = None;
    egui::ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
        for (i, d) in diagnostics.iter().enumerate() {
            let selected = selection.diagnostic == Some(i);
            let frame = egui::Frame::group(ui.style()).fill(if selected {
                ui.visuals().selection.bg_fill.gamma_multiply(0.35)
            } else {
                ui.visuals().faint_bg_color
            });
            let mut clicked = false;
            frame.show(ui, |ui| {
                ui.set_width(ui.available_width());
                ui.horizontal(|ui| {
                    clicked |= ui
                        .selectable_label(selected, RichText::new(d.kind.title()).strong())
                        .clicked();
                    ui.label(if d.once {
                        format!("costs {} once, expected", format_ns(d.cost_ns as f64))
                    } else {
                        format!("costs {} over {} time(s)", format_ns(d.cost_ns as f64), d.count)
                    });
                });
                clicked |= ui
                    .add(egui::Label::new(d.message.as_str()).sense(egui::Sense::click()))
                    .clicked();
                ui.label(RichText::new(format!("at {}", d.location)).monospace());
                if let Some(advice) = &d.advice {
                    ui.label(RichText::new(format!("advice: {advice}")).italics());
                }
                if let Some(fix) = &d.fix {
                    let (before, after) = fix.trimmed();
                    ui.label(format!("change {}:", fix.at));
                    ui.label(
                        RichText::new(format!("- {before}"))
                            .monospace()
                            .color(egui::Color32::from_rgb(200, 60, 60)),
                    );
                    ui.label(
                        RichText::new(format!("+ {after}"))
                            .monospace()
                            .color(egui::Color32::from_rgb(40, 150, 60)),
                    );
                }
                if selected {
                    for c in &d.changes {
                        ui.label(format!("- {}", c.sentence()));
                    }
                    for inst in d.instances.iter().take(20) {
                        ui.weak(format!("{} ({})", inst.message, format_ns(inst.cost_ns as f64)));
                    }
                    ui.horizontal(|ui| {
                        if let Some((start, end)) = range_of(model, d) {
                            if ui.button("Show in timeline").clicked() {
                                jump = Some(Jump::Timeline(start, end));
                            }
                        }
                        if !d.graphs.is_empty() && ui.button("Show graphs").clicked() {
                            jump = Some(Jump::Graphs);
                        }
                    });
                }
            });
            if clicked {
                select(model, selection, i, d);
            }
            ui.add_space(4.0);
        }
    });
    jump
}
