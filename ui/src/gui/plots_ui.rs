//! Plots over steps (step time, compiles, cache hit rate, the device's memory where the plugin
//! counts it) and the peak memory of each graph, from the profiler's step phases, graph rows and
//! memory records.

use eframe::egui;
use egui_plot::{Bar, BarChart, Legend, Line, Plot};

use super::model::Model;

pub fn show(ui: &mut egui::Ui, model: &Model) {
    if model.analysis.steps.is_empty() && model.analysis.graphs.is_empty() {
        ui.label("No steps or graphs recorded yet: nothing to plot.");
        return;
    }
    let height = ((ui.available_height() - 40.0) / 2.0).max(140.0);
    let width = ((ui.available_width() - 16.0) / 2.0).max(200.0);
    egui::Grid::new("plots").num_columns(2).spacing([12.0, 8.0]).show(ui, |ui| {
        ui.vertical(|ui| {
            ui.strong("Step time (ms)");
            let points = model.step_time_ms.clone();
            Plot::new("step-time").height(height).width(width).legend(Legend::default()).show(
                ui,
                |p| {
                    p.line(Line::new("step time", points));
                },
            );
        });
        ui.vertical(|ui| {
            ui.strong("Compiles per step");
            // Steps without compiles draw nothing, so only the others become bars.
            let bars: Vec<Bar> = model
                .analysis
                .steps
                .iter()
                .filter(|s| s.compiles > 0)
                .map(|s| Bar::new(s.index as f64, s.compiles as f64).width(0.8))
                .collect();
            Plot::new("compiles").height(height).width(width).show(ui, |p| {
                p.bar_chart(BarChart::new("compiles", bars));
            });
        });
        ui.end_row();
        ui.vertical(|ui| {
            ui.strong("Cache hit rate per step (%)");
            let points = model.hit_rate_percent.clone();
            Plot::new("hit-rate").height(height).width(width).include_y(0.0).include_y(100.0).show(
                ui,
                |p| {
                    p.line(Line::new("hit rate", points));
                },
            );
        });
        ui.vertical(|ui| {
            ui.strong("Peak memory per graph (MB)");
            let bars: Vec<Bar> = model
                .analysis
                .graphs
                .iter()
                .enumerate()
                .filter_map(|(i, g)| {
                    let bytes = g.peak_memory_bytes?;
                    Some(
                        Bar::new(i as f64 + 1.0, bytes as f64 / (1 << 20) as f64)
                            .width(0.8)
                            .name(format!("{:016x} ({} v{})", g.hash, g.site, g.version)),
                    )
                })
                .collect();
            Plot::new("memory").height(height).width(width).show(ui, |p| {
                p.bar_chart(BarChart::new("peak memory", bars));
            });
        });
        ui.end_row();
        // Where the plugin counts it (GPUs): a line that climbs over steady steps is memory the
        // program keeps taking.
        if !model.device_memory_mb.is_empty() {
            ui.vertical(|ui| {
                ui.strong("Device memory in use after each step (MB)");
                let points = model.device_memory_mb.clone();
                Plot::new("device-memory").height(height).width(width).include_y(0.0).show(
                    ui,
                    |p| {
                        p.line(Line::new("in use", points));
                    },
                );
            });
            ui.end_row();
        }
    });
}
