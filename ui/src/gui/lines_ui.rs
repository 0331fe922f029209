//! The line profiler: each source line with what the engine did for it (ops recorded, graph
//! inputs made, syncs forced and their compiles, values read, bytes moved, host fallbacks), from
//! the analysis; the line that records most ops has the fullest bar.

use eframe::egui::{self, RichText};
use xlaprof_profiler::metrics::{format_bytes, format_ns};

use super::model::Model;

pub fn show(ui: &mut egui::Ui, model: &Model) {
    let lines = &model.analysis.lines;
    if lines.is_empty() {
        ui.label("No source lines: the profile recorded no graph, sync or read.");
        return;
    }
    ui.label("What the engine did for each source line: ops it recorded, the host time recording them took (tracing), graph inputs it made, syncs it forced, their compiles, values read, bytes moved, ops that fell back to the CPU.");
    let most = lines.iter().map(|l| l.ops).max().unwrap_or(1).max(1);
    let blank = |v: u64| if v == 0 { String::new() } else { v.to_string() };
    egui::ScrollArea::both().auto_shrink([false, false]).show(ui, |ui| {
        egui::Grid::new("lines").striped(true).num_columns(10).show(ui, |ui| {
            for title in [
                "line",
                "ops",
                "",
                "tracing",
                "inputs",
                "syncs",
                "compiles",
                "reads",
                "bytes",
                "fallbacks",
            ] {
                ui.label(RichText::new(title).strong());
            }
            ui.end_row();
            for l in lines {
                let hot = l.syncs > 0 || l.compiles > 0 || l.fallbacks > 0;
                let at = RichText::new(format!("{}:{}", l.file, l.line)).monospace();
                ui.label(if hot { at.color(ui.visuals().warn_fg_color) } else { at });
                ui.label(blank(l.ops));
                let share = l.ops as f32 / most as f32;
                ui.add(egui::ProgressBar::new(share).desired_width(80.0));
                ui.label(if l.trace_ns > 0 { format_ns(l.trace_ns as f64) } else { String::new() });
                ui.label(blank(l.inputs));
                ui.label(blank(l.syncs));
                ui.label(if l.compiles > 0 {
                    format!("{} ({})", l.compiles, format_ns(l.compile_ns as f64))
                } else {
                    String::new()
                });
                ui.label(blank(l.reads));
                ui.label(if l.bytes > 0 { format_bytes(l.bytes as f64) } else { String::new() });
                ui.label(blank(l.fallbacks));
                ui.end_row();
            }
        });
    });
}
