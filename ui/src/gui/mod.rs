//! `xlaprof gui`: the desktop viewer (eframe/egui on OpenGL).
//!
//! Every number it shows comes from the profiler (`Analysis`, `timeline::spans`, `views::*`,
//! `diff_graphs`, the flamegraph stacks); this module only lays them out. [`GuiApp::show`] draws one
//! frame into any `egui::Ui`, so tests drive the same code with egui_kittest.

mod diagnostics_ui;
mod diagram;
mod export_ui;
mod flame_ui;
mod graphs_ui;
mod lines_ui;
pub mod model;
mod open_ui;
mod plots_ui;
mod timeline_ui;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use eframe::egui;
use serde::{Deserialize, Serialize};
use xlaprof_profiler::metrics::format_ns;
use xlaprof_profiler::Thresholds;

use diagnostics_ui::Jump;
use model::Model;

use crate::viewer::Source;

/// How the command line started the viewer.
pub struct Launch {
    pub file: Option<PathBuf>,
    pub follow: bool,
    /// Print the time from launch to the first frame, then quit (benchmarks).
    pub exit_after_first_frame: bool,
    /// Write a screenshot of the window to this PNG once it has drawn, then quit (tests, docs).
    pub screenshot: Option<PathBuf>,
}

/// Opens the window and runs until it is closed.
pub fn run(launch: Launch) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("xlaprof")
            .with_inner_size([1280.0, 800.0])
            .with_drag_and_drop(true),
        renderer: eframe::Renderer::Glow,
        ..Default::default()
    };
    eframe::run_native(
        "xlaprof",
        options,
        Box::new(move |cc| {
            let settings = cc
                .storage
                .and_then(|s| eframe::get_value::<Settings>(s, eframe::APP_KEY))
                .unwrap_or_default();
            let mut app = GuiApp::new(settings);
            if launch.exit_after_first_frame {
                app.first_frame_report = Some(started);
            }
            app.screenshot_and_quit = launch.screenshot.clone().map(|path| (path, 0));
            if let Some(file) = &launch.file {
                app.open(file.clone(), launch.follow);
            }
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| format!("cannot open the window: {e}").into())
}

/// The panels, one shown at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tab {
    Timeline,
    Flamegraph,
    Plots,
    Graphs,
    Diagnostics,
    Lines,
}

impl Tab {
    const ALL: [Tab; 6] =
        [Tab::Timeline, Tab::Flamegraph, Tab::Plots, Tab::Graphs, Tab::Diagnostics, Tab::Lines];

    fn title(self) -> &'static str {
        match self {
            Tab::Timeline => "Timeline",
            Tab::Flamegraph => "Flamegraph",
            Tab::Plots => "Plots",
            Tab::Graphs => "Graphs",
            Tab::Diagnostics => "Diagnostics",
            Tab::Lines => "Lines",
        }
    }
}

/// What persists between runs (with eframe's storage; panel sizes persist in egui's memory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub tab: Tab,
    pub dark: bool,
    /// The details side panel (selection, summary).
    pub show_details: bool,
    /// The flamegraph panel shows its table instead of the graph.
    pub flame_as_table: bool,
    /// Most recent first.
    pub recent_files: Vec<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tab: Tab::Timeline,
            dark: true,
            show_details: true,
            flame_as_table: false,
            recent_files: Vec::new(),
        }
    }
}

/// What is selected, shared by every panel: picking a diagnostic selects its graph and syncs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Selection {
    /// An index into `Model::spans`.
    pub span: Option<usize>,
    /// The graph shown in the graphs panel, and the version it is compared with.
    pub graph: Option<u64>,
    pub compare: Option<u64>,
    /// An index into `Analysis::diagnostics`.
    pub diagnostic: Option<usize>,
    /// Syncs whose spans are highlighted.
    pub syncs: Vec<u64>,
}

impl Selection {
    /// Shows graph `hash` in the graphs panel, compared with the version it replaced.
    pub fn show_graph(&mut self, model: &crate::viewer::Model, hash: u64) {
        self.graph = Some(hash);
        self.compare = model.graph(hash).and_then(|g| g.previous);
    }
}

/// A message to the user in the status area.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    Info(String),
    Error(String),
}

pub struct GuiApp {
    pub settings: Settings,
    pub model: Option<Model>,
    source: Option<Source>,
    pub notice: Option<Notice>,
    pub selection: Selection,
    pub timeline: timeline_ui::TimelineView,
    pub open_prompt: open_ui::OpenPrompt,
    pub export: export_ui::ExportDialog,
    pub flame: flame_ui::FlameState,
    pub graphs_view: graphs_ui::GraphsView,
    thresholds: Thresholds,
    last_poll: Option<Instant>,
    /// Mean CPU time of recent frames, in milliseconds (from eframe).
    frame_ms: Option<f32>,
    first_frame_report: Option<Instant>,
    /// `--screenshot`: where, and how many frames have been drawn.
    screenshot_and_quit: Option<(PathBuf, u32)>,
    applied_dark: Option<bool>,
}

impl GuiApp {
    pub fn new(settings: Settings) -> GuiApp {
        GuiApp {
            settings,
            model: None,
            source: None,
            notice: None,
            selection: Selection::default(),
            timeline: timeline_ui::TimelineView::default(),
            open_prompt: open_ui::OpenPrompt::default(),
            export: export_ui::ExportDialog::default(),
            flame: flame_ui::FlameState::default(),
            graphs_view: graphs_ui::GraphsView::default(),
            thresholds: Thresholds::default(),
            last_poll: None,
            frame_ms: None,
            first_frame_report: None,
            screenshot_and_quit: None,
            applied_dark: None,
        }
    }

    /// Opens a profile file (or follows it); failures become a message, never a panic.
    pub fn open(&mut self, path: PathBuf, follow: bool) {
        let source = if follow { Source::follow(&path) } else { Source::open(&path) };
        match source.error.clone() {
            None => {
                self.source = Some(source);
                self.show_profile();
                self.settings.recent_files.retain(|p| p != &path);
                self.settings.recent_files.insert(0, path.clone());
                self.settings.recent_files.truncate(8);
                let warnings = self.model.as_ref().map_or(0, |m| m.profile.warnings.len());
                self.notice = Some(if warnings > 0 {
                    Notice::Error(format!(
                        "{}: the file is damaged ({warnings} problem(s)); showing what could be read",
                        path.display()
                    ))
                } else {
                    Notice::Info(format!(
                        "opened {}{}",
                        path.display(),
                        if follow { " (following)" } else { "" }
                    ))
                });
            }
            Some(e) => self.notice = Some(Notice::Error(format!("cannot open the profile: {e}"))),
        }
    }

    /// Builds the model of the source's profile (a job's: its shown rank's, with the job's).
    fn show_profile(&mut self) {
        let Some(source) = &self.source else { return };
        let model = Model::new(&source.ranks(), source.shown, &self.thresholds);
        let keep_view = self.model.is_some() && self.source.as_ref().is_some_and(|s| s.following());
        if !keep_view {
            // The graphs panel opens on the latest recompile and the graph it replaced.
            let latest = model
                .analysis
                .graphs
                .iter()
                .rev()
                .find(|g| g.previous.is_some())
                .or(model.analysis.graphs.last());
            self.selection = Selection {
                graph: latest.map(|g| g.hash),
                compare: latest.and_then(|g| g.previous),
                ..Selection::default()
            };
            self.timeline = timeline_ui::TimelineView::default();
        }
        self.graphs_view.model_changed();
        self.model = Some(model);
    }

    /// Reads what a followed file gained, at most twice a second.
    fn poll_live(&mut self, ctx: &egui::Context) {
        let Some(source) = &mut self.source else { return };
        if !source.following() {
            return;
        }
        ctx.request_repaint_after(Duration::from_millis(500));
        if self.last_poll.is_some_and(|t| t.elapsed() < Duration::from_millis(500)) {
            return;
        }
        self.last_poll = Some(Instant::now());
        // A job is analysed again though nothing changed: ranks stuck in a collective are found
        // by how long they have waited, and a hang writes nothing.
        let job = self.model.as_ref().is_some_and(|m| m.job.is_some());
        if source.poll() || job {
            self.show_profile();
        }
    }

    fn apply_theme(&mut self, ctx: &egui::Context) {
        if self.applied_dark != Some(self.settings.dark) {
            ctx.set_theme(if self.settings.dark { egui::Theme::Dark } else { egui::Theme::Light });
            self.applied_dark = Some(self.settings.dark);
        }
    }

    /// Draws one frame.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        self.apply_theme(&ctx);
        self.poll_live(&ctx);
        self.take_dropped_files(&ctx);
        if let Some(result) = self.export.poll_screenshot() {
            self.screenshot_taken(&ctx, result);
        }

        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        if self.settings.show_details && self.model.is_some() {
            egui::Panel::right("details").default_size(320.0).show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| self.details_ui(ui));
            });
        }
        egui::CentralPanel::default().show(ui, |ui| self.central_ui(ui));

        if let Some((path, follow)) = self.open_prompt.window_ui(&ctx) {
            self.open(path, follow);
        }
        if let Some(model) = &self.model {
            self.export.window_ui(&ctx, model, &mut self.notice);
        }
    }

    fn take_dropped_files(&mut self, ctx: &egui::Context) {
        let dropped = ctx.input(|i| i.raw.dropped_files.clone());
        if let Some(path) = dropped.first().map(|f| f.path().to_path_buf()) {
            self.open(path, false);
        }
    }

    fn menu_ui(&mut self, ui: &mut egui::Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                if ui.button("Open…").clicked() {
                    self.open_prompt.start(self.source.as_ref().map(|s| s.path.clone()));
                    ui.close();
                }
                let recent = self.settings.recent_files.clone();
                if !recent.is_empty() {
                    ui.separator();
                    for path in recent {
                        if ui.button(path.display().to_string()).clicked() {
                            self.open(path, false);
                            ui.close();
                        }
                    }
                }
            });
            // Nothing to export before a profile is open.
            if self.model.is_some() {
                let path = self.source.as_ref().map(|s| s.path.clone());
                ui.menu_button("Export", |ui| self.export.menu_ui(ui, path.as_deref()));
            }
            ui.menu_button("View", |ui| {
                ui.checkbox(&mut self.settings.dark, "Dark theme");
                ui.checkbox(&mut self.settings.show_details, "Details panel");
            });
            ui.separator();
            for tab in Tab::ALL {
                ui.selectable_value(&mut self.settings.tab, tab, tab.title());
            }
            self.rank_ui(ui);
        });
    }

    /// A job's ranks: which one the views show.
    fn rank_ui(&mut self, ui: &mut egui::Ui) {
        let Some(job) = self.model.as_ref().and_then(|m| m.job.as_ref()) else { return };
        let ranks: Vec<u32> = job.job.ranks.iter().map(|r| r.rank).collect();
        let mut shown = job.shown;
        ui.separator();
        egui::ComboBox::from_label("shown")
            .selected_text(format!("rank {} of {}", ranks.get(shown).copied().unwrap_or(0), ranks.len()))
            .show_ui(ui, |ui| {
                for (i, rank) in ranks.iter().enumerate() {
                    ui.selectable_value(&mut shown, i, format!("rank {rank}"));
                }
            });
        if shown != job.shown {
            if let Some(source) = &mut self.source {
                source.show(shown);
            }
            self.show_profile();
        }
    }

    fn status_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            match (&self.model, &self.source) {
                (Some(m), source) => {
                    if let Some(s) = source {
                        ui.label(s.path.display().to_string());
                        if s.following() {
                            ui.colored_label(egui::Color32::LIGHT_GREEN, "LIVE");
                        }
                    }
                    ui.label(format!(
                        "{} records · {} spans · {} steps · {}",
                        m.profile.records,
                        m.analysis.spans.len(),
                        m.analysis.steps.len(),
                        format_ns(m.end_ns as f64)
                    ));
                }
                (None, _) => {
                    ui.label("no profile");
                }
            }
            if let Some(ms) = self.frame_ms {
                ui.label(format!("frame {ms:.1} ms"));
            }
            match &self.notice {
                Some(Notice::Info(text)) => {
                    ui.label(text.as_str());
                }
                Some(Notice::Error(text)) => {
                    ui.colored_label(ui.visuals().warn_fg_color, text.as_str());
                }
                None => {}
            }
        });
    }

    fn central_ui(&mut self, ui: &mut egui::Ui) {
        let Some(model) = &self.model else {
            self.welcome_ui(ui);
            return;
        };
        if !model.profile.warnings.is_empty() {
            warnings_ui(ui, &model.profile.warnings);
        }
        match self.settings.tab {
            Tab::Timeline => timeline_ui::show(ui, model, &mut self.timeline, &mut self.selection),
            Tab::Flamegraph => flame_ui::show(ui, model, &mut self.flame, &mut self.settings),
            Tab::Plots => plots_ui::show(ui, model),
            Tab::Lines => lines_ui::show(ui, model),
            Tab::Graphs => graphs_ui::show(ui, model, &mut self.graphs_view, &mut self.selection),
            Tab::Diagnostics => {
                match diagnostics_ui::show(ui, model, &mut self.selection) {
                    Some(Jump::Timeline(start_ns, end_ns)) => {
                        self.timeline.focus(start_ns, end_ns);
                        self.settings.tab = Tab::Timeline;
                    }
                    // The whole profile, for when the timeline is opened next.
                    Some(Jump::Graphs) => {
                        self.timeline.focus(0, model.end_ns);
                        self.settings.tab = Tab::Graphs;
                    }
                    None => {}
                }
            }
        }
    }

    fn welcome_ui(&mut self, ui: &mut egui::Ui) {
        ui.vertical_centered(|ui| {
            ui.add_space(ui.available_height() / 3.0);
            ui.heading("xlaprof");
            ui.label("Open a profile: File > Open…, or drop a .xlaprof file on this window.");
            if ui.button("Open…").clicked() {
                self.open_prompt.start(None);
            }
        });
    }

    fn details_ui(&mut self, ui: &mut egui::Ui) {
        let Some(model) = &self.model else { return };
        if let Some(job) = &model.job {
            ui.heading(format!("Job: {} ranks", job.job.ranks.len()));
            ui.label(format!("{} collectives in common (the ranks' clocks aligned by them)", job.job.matched));
            if job.job.findings.is_empty() {
                ui.label("across ranks: nothing to report (no straggler, no diverging rank, no rank stuck)");
            }
            for f in &job.job.findings {
                ui.colored_label(ui.visuals().warn_fg_color, f.kind.title());
                ui.label(&f.message);
                ui.weak(&f.advice);
            }
            ui.separator();
        }
        let s = &model.analysis.summary;
        ui.heading("Summary");
        egui::Grid::new("summary").num_columns(2).striped(true).show(ui, |ui| {
            let mut row = |k: &str, v: String| {
                ui.label(k);
                ui.label(v);
                ui.end_row();
            };
            row("program", s.program.clone());
            row("duration", format_ns(s.duration_ns as f64));
            row("steps", s.steps.to_string());
            row("syncs", s.syncs.to_string());
            row("graphs", s.graphs.to_string());
            row("compiles", format!("{} ({})", s.compiles, format_ns(s.compile_ns as f64)));
            row("cache hit rate", format!("{:.1}%", s.hit_rate * 100.0));
            row("step median", format_ns(s.step_median_ns as f64));
            row("hidden syncs", s.hidden_syncs.to_string());
            if let Some(c) = &s.torch_compile {
                row("torch.compile", c.text());
            }
            if let Some(m) = &s.device_memory {
                row("device memory", m.in_use_and_peak());
            }
            row("findings", model.analysis.diagnostics.len().to_string());
        });
        ui.separator();
        ui.heading("Selection");
        if let Some(span) = self.selection.span.and_then(|i| model.analysis.spans.get(i)) {
            timeline_ui::span_details_ui(ui, model, span);
            if let Some(hash) = span.hash {
                if ui.button("Show this graph").clicked() {
                    self.selection.show_graph(model, hash);
                    self.settings.tab = Tab::Graphs;
                }
            }
        } else {
            ui.label("Click a span in the timeline, a graph or a finding.");
        }
        if let Some(d) = self.selection.diagnostic.and_then(|i| model.analysis.diagnostics.get(i)) {
            ui.separator();
            ui.label(egui::RichText::new(d.kind.title()).strong());
            ui.label(d.message.as_str());
        }
    }
}

impl GuiApp {
    /// `--screenshot`: asks for a screenshot once a few frames have settled the layout (the
    /// window closes when it is written, see [`GuiApp::screenshot_taken`]).
    fn screenshot_then_quit(&mut self, ctx: &egui::Context) {
        let Some((path, frames)) = &mut self.screenshot_and_quit else { return };
        *frames += 1;
        ctx.request_repaint();
        if *frames == 5 {
            self.export.request_screenshot(ctx, path.clone());
        }
    }

    /// Says where a screenshot was written, or why not; under `--screenshot` the window then
    /// closes (a failure said on stderr too).
    fn screenshot_taken(&mut self, ctx: &egui::Context, result: Result<PathBuf, String>) {
        let quit = self.screenshot_and_quit.is_some();
        self.notice = Some(match result {
            Ok(path) => Notice::Info(format!("screenshot written to {}", path.display())),
            Err(e) => {
                let message = format!("screenshot failed: {e}");
                if quit {
                    eprintln!("error: {message}");
                }
                Notice::Error(message)
            }
        });
        if quit {
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }
}

fn warnings_ui(ui: &mut egui::Ui, warnings: &[String]) {
    let color = ui.visuals().warn_fg_color;
    egui::CollapsingHeader::new(
        egui::RichText::new(format!(
            "warning: the file is damaged: {} problem(s); showing what could be read",
            warnings.len()
        ))
        .color(color),
    )
    .id_salt("warnings")
    .show(ui, |ui| {
        for w in warnings {
            ui.label(w.as_str());
        }
    });
}

impl eframe::App for GuiApp {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        if let Some(ms) = frame.info().cpu_usage {
            let ms = ms * 1000.0;
            self.frame_ms = Some(self.frame_ms.map_or(ms, |m| m * 0.9 + ms * 0.1));
        }
        self.show(ui);
        self.screenshot_then_quit(ui.ctx());
        if let Some(started) = self.first_frame_report.take() {
            println!("first frame after {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if self.screenshot_and_quit.is_some() {
            // A scripted screenshot leaves the user's settings alone.
            return;
        }
        eframe::set_value(storage, eframe::APP_KEY, &self.settings);
    }
}
