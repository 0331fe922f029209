//! Export: the command line's formats (through `xlaprof_profiler::export`) and a PNG screenshot
//! of the window as it is drawn (egui's viewport screenshot, encoded with the `png` crate).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use eframe::egui;
use xlaprof_profiler::export::{self, Format};

use super::model::Model;
use super::Notice;

/// What can be exported, with the menu label and the default file name suffix.
const FORMATS: [(Format, &str, &str); 8] = [
    (Format::Text, "Text report", ".txt"),
    (Format::Short, "Short report", ".short.txt"),
    (Format::Json, "JSON", ".json"),
    (Format::Csv, "CSV tables (folder)", "-csv"),
    (Format::Parquet, "Parquet tables (folder)", "-parquet"),
    (Format::Chrome, "Chrome / Perfetto trace", ".trace.json"),
    (Format::Folded, "Folded stacks", ".folded"),
    (Format::Flamegraph, "Flamegraph SVG", ".svg"),
];

/// A pending export: the format (`None` for the screenshot) and the path being edited.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    format: Option<Format>,
    title: &'static str,
    path: String,
}

#[derive(Default)]
pub struct ExportDialog {
    pending: Option<Pending>,
    /// Set by the screenshot callback (it runs after the frame is drawn).
    screenshot_result: Arc<Mutex<Option<Result<PathBuf, String>>>>,
}

fn default_path(profile_path: Option<&Path>, suffix: &str) -> String {
    let base = profile_path
        .map(|p| p.with_extension(""))
        .unwrap_or_else(|| PathBuf::from("xlaprof-export"));
    format!("{}{suffix}", base.display())
}

impl ExportDialog {
    pub fn menu_ui(&mut self, ui: &mut egui::Ui, profile_path: Option<&Path>) {
        for (format, title, suffix) in FORMATS {
            if ui.button(title).clicked() {
                self.pending = Some(Pending {
                    format: Some(format),
                    title,
                    path: default_path(profile_path, suffix),
                });
                ui.close();
            }
        }
        ui.separator();
        if ui.button("PNG screenshot of the window").clicked() {
            self.pending = Some(Pending {
                format: None,
                title: "PNG screenshot",
                path: default_path(profile_path, ".png"),
            });
            ui.close();
        }
    }

    pub fn window_ui(&mut self, ctx: &egui::Context, model: &Model, notice: &mut Option<Notice>) {
        let Some(pending) = &mut self.pending else { return };
        let mut open = true;
        let mut go = false;
        egui::Window::new(format!("Export: {}", pending.title))
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .show(ctx, |ui| {
                ui.label("Write to:");
                ui.add(egui::TextEdit::singleline(&mut pending.path).desired_width(420.0));
                go = ui.button("Export").clicked();
            });
        if go {
            let Some(pending) = self.pending.take() else { return };
            let path = PathBuf::from(pending.path.trim());
            match pending.format {
                Some(format) => *notice = Some(write_export(model, format, &path)),
                None => self.request_screenshot(ctx, path),
            }
        } else if !open {
            self.pending = None;
        }
    }

    pub fn request_screenshot(&mut self, ctx: &egui::Context, path: PathBuf) {
        let result = self.screenshot_result.clone();
        let repaint = ctx.clone();
        ctx.request_screenshot(move |image| {
            let written = write_png(&path, &image).map(|_| path.clone());
            if let Ok(mut slot) = result.lock() {
                *slot = Some(written);
            }
            repaint.request_repaint();
        });
    }

    /// A screenshot written since the last frame (its path), or why it failed.
    pub fn poll_screenshot(&mut self) -> Option<Result<PathBuf, String>> {
        self.screenshot_result.lock().ok()?.take()
    }
}

pub fn write_export(model: &Model, format: Format, path: &Path) -> Notice {
    match export::write(&model.profile, &model.analysis, format, path) {
        Ok(()) => Notice::Info(format!("exported to {}", path.display())),
        Err(e) => Notice::Error(format!("export failed: {e}")),
    }
}

/// Writes an RGBA image as PNG.
pub fn write_png(path: &Path, image: &egui::ColorImage) -> Result<(), String> {
    let named = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(|e| named(&e))?;
    let [width, height] = image.size;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width as u32, height as u32);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| named(&e))?;
    let bytes: Vec<u8> = image.pixels.iter().flat_map(|p| p.to_array()).collect();
    writer.write_image_data(&bytes).map_err(|e| named(&e))?;
    writer.finish().map_err(|e| named(&e))
}
