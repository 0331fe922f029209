//! File > Open: a path prompt (no system dialog, so no GTK or portal dependency); dropping a file
//! on the window opens it too.

use std::path::PathBuf;

use eframe::egui;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct OpenPrompt {
    /// The path being typed; `None` while the prompt is closed.
    pub path: Option<String>,
    pub follow: bool,
}

impl OpenPrompt {
    pub fn start(&mut self, current: Option<PathBuf>) {
        self.path = Some(current.map(|p| p.display().to_string()).unwrap_or_default());
    }

    /// The prompt window; returns the path to open when the user confirms.
    pub fn window_ui(&mut self, ctx: &egui::Context) -> Option<(PathBuf, bool)> {
        let path = self.path.as_mut()?;
        let mut open = true;
        let mut chosen = None;
        let mut cancel = false;
        egui::Window::new("Open a profile")
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .show(ctx, |ui| {
                ui.label("Path of a .xlaprof file:");
                let edit = ui.add(
                    egui::TextEdit::singleline(path).desired_width(420.0).hint_text("run.xlaprof"),
                );
                ui.checkbox(&mut self.follow, "Follow (the program is still writing it)");
                ui.horizontal(|ui| {
                    let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    if (ui.button("Open").clicked() || enter) && !path.trim().is_empty() {
                        chosen = Some((PathBuf::from(path.trim()), self.follow));
                    }
                    if ui.button("Cancel").clicked() {
                        cancel = true;
                    }
                });
            });
        if chosen.is_some() || cancel || !open {
            self.path = None;
        }
        chosen
    }
}
