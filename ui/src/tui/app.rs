//! The terminal UI's state and what each key does. Drawing is elsewhere ([`super::draw`]); this
//! is plain state, so key handling is tested without a terminal.

use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind,
};
use xlaprof_profiler::Thresholds;

use super::tables::{
    visible, Column, DIAGNOSTIC_COLUMNS, GRAPH_COLUMNS, LINE_COLUMNS, METRIC_COLUMNS,
};
use crate::viewer::{Model, Source};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Graphs,
    Timeline,
    Metrics,
    Diagnostics,
    Lines,
}

impl Tab {
    pub const ALL: [Tab; 6] =
        [Tab::Overview, Tab::Graphs, Tab::Timeline, Tab::Metrics, Tab::Diagnostics, Tab::Lines];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Overview => "Overview",
            Tab::Graphs => "Graphs",
            Tab::Timeline => "Timeline",
            Tab::Metrics => "Metrics",
            Tab::Diagnostics => "Diagnostics",
            Tab::Lines => "Lines",
        }
    }

    pub(super) fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }
}

/// Selection, sort and filter of one table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableState {
    /// Position in the visible (filtered, sorted) rows.
    pub selected: usize,
    /// The column `s` sorts by (moved with ←/→).
    pub cursor: usize,
    /// (column, descending) once sorted.
    pub sort: Option<(usize, bool)>,
    pub filter: String,
}

impl TableState {
    pub fn visible<T>(&self, rows: &[T], columns: &[Column<T>]) -> Vec<usize> {
        visible(rows, columns, &self.filter, self.sort)
    }

    fn sort_key(&mut self) {
        self.sort = match self.sort {
            Some((c, descending)) if c == self.cursor => Some((c, !descending)),
            _ => Some((self.cursor, true)),
        };
    }
}

/// The table of the current view: its state, how many of its rows show, and its columns.
struct Table<'a> {
    state: &'a mut TableState,
    shown: usize,
    columns: usize,
}

impl<'a> Table<'a> {
    fn new<T>(state: &'a mut TableState, rows: &[T], columns: &[Column<T>]) -> Table<'a> {
        let shown = state.visible(rows, columns).len();
        Table { state, shown, columns: columns.len() }
    }
}

/// The window of the timeline, in ns since the profile's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start_ns: u64,
    pub len_ns: u64,
}

pub struct App {
    pub source: Source,
    pub model: Model,
    pub thresholds: Thresholds,
    pub tab: Tab,
    pub help: bool,
    pub paused: bool,
    /// Typing into the current table's filter.
    pub editing_filter: bool,
    pub overview_selected: usize,
    pub graphs: TableState,
    /// The graph drilled into (its hash), and how far its text is scrolled.
    pub graph_detail: Option<u64>,
    pub detail_scroll: u16,
    pub metrics: TableState,
    pub lines: TableState,
    pub diagnostics: TableState,
    pub diagnostic_detail: bool,
    /// `None`: the whole profile.
    pub window: Option<Window>,
    /// The step selected on the timeline (index into the model's steps).
    pub step_selected: Option<usize>,
    pub show_output: bool,
    pub quit: bool,
    /// The profile changed since the model was built.
    stale: bool,
    built_at: Instant,
    /// A model being built on another thread, so input stays responsive meanwhile.
    building: Option<Receiver<Model>>,
}

const PAGE: usize = 10;

/// How often a followed job is analysed again though its files did not grow.
const JOB_RECHECK: Duration = Duration::from_secs(1);

impl App {
    pub fn new(source: Source, thresholds: Thresholds) -> App {
        let model = Model::build_ranks(&source.ranks(), source.shown, &thresholds);
        let show_output = source.program.is_some();
        App {
            source,
            model,
            thresholds,
            tab: Tab::Overview,
            help: false,
            paused: false,
            editing_filter: false,
            overview_selected: 0,
            graphs: TableState::default(),
            graph_detail: None,
            detail_scroll: 0,
            metrics: TableState::default(),
            lines: TableState::default(),
            diagnostics: TableState::default(),
            diagnostic_detail: false,
            window: None,
            step_selected: None,
            show_output,
            quit: false,
            stale: false,
            built_at: Instant::now(),
            building: None,
        }
    }

    /// Reads new records and rebuilds the model when due; true when the screen must be redrawn.
    /// Models are built on another thread from a copy of the profile, spaced by their own cost,
    /// so a huge live profile never blocks the keys.
    pub fn tick(&mut self) -> bool {
        if self.paused {
            return false;
        }
        let mut redraw = false;
        if let Some(rx) = &self.building {
            if let Ok(model) = rx.try_recv() {
                self.model = model;
                self.building = None;
                self.built_at = Instant::now();
                redraw = true;
            }
        }
        let was_running = self.source.program.as_ref().is_some_and(|p| p.status.is_none());
        self.stale |= self.source.poll();
        let exited =
            was_running && self.source.program.as_ref().is_some_and(|p| p.status.is_some());
        if exited {
            // Whatever the program wrote last, before its exit.
            self.stale |= self.source.poll();
        }
        // A job's ranks stuck in a collective are found by how long they have waited: its model
        // is rebuilt while nothing changes (a hang writes nothing).
        if self.model.job.is_some() && self.source.following() && self.built_at.elapsed() >= JOB_RECHECK {
            self.stale = true;
        }
        let spacing = self.model.build_time.max(Duration::from_millis(20));
        if self.stale && self.building.is_none() && (exited || self.built_at.elapsed() >= spacing) {
            self.start_build();
        }
        // A running program's output pane changes without new records (when it is shown).
        let output_changes =
            self.show_output && self.source.program.as_ref().is_some_and(|p| p.status.is_none());
        redraw || exited || output_changes
    }

    fn start_build(&mut self) {
        let (ranks, shown) = (self.source.ranks(), self.source.shown);
        let thresholds = self.thresholds.clone();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _ = tx.send(Model::build_ranks(&ranks, shown, &thresholds));
        });
        self.building = Some(rx);
        self.stale = false;
    }

    pub fn on_event(&mut self, event: Event) {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.on_key(key),
            Event::Mouse(mouse) => self.on_mouse(mouse),
            _ => {}
        }
    }

    fn on_mouse(&mut self, mouse: MouseEvent) {
        match mouse.kind {
            MouseEventKind::ScrollDown => self.on_key(KeyEvent::from(KeyCode::Down)),
            MouseEventKind::ScrollUp => self.on_key(KeyEvent::from(KeyCode::Up)),
            _ => {}
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.help {
            // Any key closes the help; q still quits.
            self.help = false;
            if key.code == KeyCode::Char('q') {
                self.quit = true;
            }
            return;
        }
        if self.editing_filter {
            self.edit_filter(key.code);
            return;
        }
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Tab => self.switch(Tab::ALL[(self.tab.index() + 1) % Tab::ALL.len()]),
            KeyCode::BackTab => {
                self.switch(Tab::ALL[(self.tab.index() + Tab::ALL.len() - 1) % Tab::ALL.len()])
            }
            KeyCode::Char(c @ '1'..='6') => self.switch(Tab::ALL[c as usize - '1' as usize]),
            KeyCode::Char(' ') => {
                self.paused = !self.paused;
            }
            // A job's ranks: the next one, the one before.
            KeyCode::Char('r') if self.source.ranks().len() > 1 => self.show_rank(1),
            KeyCode::Char('R') if self.source.ranks().len() > 1 => {
                self.show_rank(self.source.ranks().len() - 1)
            }
            KeyCode::Char('o') if self.source.program.is_some() => {
                self.show_output = !self.show_output
            }
            KeyCode::Esc => self.back(),
            KeyCode::Enter => self.enter(),
            KeyCode::Char('/') if self.table().is_some() => {
                self.editing_filter = true;
            }
            KeyCode::Char('s') => {
                if let Some(t) = self.table() {
                    t.state.sort_key();
                    t.state.selected = 0;
                }
            }
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(PAGE as isize),
            KeyCode::PageUp => self.move_by(-(PAGE as isize)),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2),
            KeyCode::Left | KeyCode::Char('h') => self.sideways(-1),
            KeyCode::Right | KeyCode::Char('l') => self.sideways(1),
            KeyCode::Char('+') | KeyCode::Char('=') if self.tab == Tab::Timeline => self.zoom(0.5),
            KeyCode::Char('-') if self.tab == Tab::Timeline => self.zoom(2.0),
            KeyCode::Char('0') if self.tab == Tab::Timeline => self.window = None,
            KeyCode::Char('m') if self.tab == Tab::Timeline => self.select_slowest_step(),
            _ => {}
        }
    }

    /// Shows the rank `by` after the one shown (wrapping around), rebuilt at once.
    fn show_rank(&mut self, by: usize) {
        self.source.show(self.source.shown + by);
        self.model = Model::build_ranks(&self.source.ranks(), self.source.shown, &self.thresholds);
        self.graph_detail = None;
        self.diagnostic_detail = false;
        self.step_selected = None;
        self.window = None;
    }

    fn switch(&mut self, tab: Tab) {
        self.tab = tab;
        self.editing_filter = false;
    }

    fn edit_filter(&mut self, code: KeyCode) {
        let Some(Table { state: t, .. }) = self.table() else {
            self.editing_filter = false;
            return;
        };
        match code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                t.filter.clear();
                t.selected = 0;
                self.editing_filter = false;
            }
            KeyCode::Backspace => {
                t.filter.pop();
                t.selected = 0;
            }
            KeyCode::Char(c) if !c.is_control() => {
                t.filter.push(c);
                t.selected = 0;
            }
            _ => {}
        }
    }

    /// The table of the current view, when it has one.
    fn table(&mut self) -> Option<Table<'_>> {
        let model = &self.model;
        match self.tab {
            Tab::Graphs if self.graph_detail.is_none() => {
                Some(Table::new(&mut self.graphs, &model.analysis.graphs, &GRAPH_COLUMNS))
            }
            Tab::Metrics => Some(Table::new(
                &mut self.metrics,
                &model.analysis.metrics.metrics,
                &METRIC_COLUMNS,
            )),
            Tab::Diagnostics if !self.diagnostic_detail => Some(Table::new(
                &mut self.diagnostics,
                &model.analysis.diagnostics,
                &DIAGNOSTIC_COLUMNS,
            )),
            Tab::Lines => Some(Table::new(&mut self.lines, &model.analysis.lines, &LINE_COLUMNS)),
            _ => None,
        }
    }

    pub fn visible_graphs(&self) -> Vec<usize> {
        self.graphs.visible(&self.model.analysis.graphs, &GRAPH_COLUMNS)
    }

    pub fn visible_metrics(&self) -> Vec<usize> {
        self.metrics.visible(&self.model.analysis.metrics.metrics, &METRIC_COLUMNS)
    }

    pub fn visible_lines(&self) -> Vec<usize> {
        self.lines.visible(&self.model.analysis.lines, &LINE_COLUMNS)
    }

    pub fn visible_diagnostics(&self) -> Vec<usize> {
        self.diagnostics.visible(&self.model.analysis.diagnostics, &DIAGNOSTIC_COLUMNS)
    }

    fn move_by(&mut self, delta: isize) {
        let step = |selected: usize, len: usize| -> usize {
            if len == 0 {
                return 0;
            }
            (selected as isize).saturating_add(delta).clamp(0, len as isize - 1) as usize
        };
        match self.tab {
            Tab::Overview => {
                let n = self.model.analysis.diagnostics.len();
                self.overview_selected = step(self.overview_selected, n);
            }
            Tab::Graphs if self.graph_detail.is_some() => self.scroll(delta),
            Tab::Diagnostics if self.diagnostic_detail => self.scroll(delta),
            Tab::Graphs | Tab::Metrics | Tab::Diagnostics | Tab::Lines => {
                if let Some(t) = self.table() {
                    t.state.selected = step(t.state.selected, t.shown);
                }
            }
            Tab::Timeline => {
                let n = self.model.analysis.steps.len();
                if n > 0 {
                    // The first move picks the first step going down, the last going up.
                    let next = match self.step_selected {
                        None if delta > 0 => 0,
                        None => n - 1,
                        Some(current) => step(current, n),
                    };
                    self.select_step(next, false);
                }
            }
        }
    }

    fn scroll(&mut self, delta: isize) {
        self.detail_scroll =
            (self.detail_scroll as isize).saturating_add(delta).clamp(0, u16::MAX as isize) as u16;
    }

    /// ←/→: the sort column in tables, panning on the timeline.
    fn sideways(&mut self, dir: isize) {
        if self.tab == Tab::Timeline {
            let w = self.current_window();
            let shift = (w.len_ns / 4).max(1) as i128 * dir as i128;
            let start = (w.start_ns as i128 + shift)
                .clamp(0, self.model.end_ns.saturating_sub(w.len_ns) as i128);
            self.window = Some(Window { start_ns: start as u64, len_ns: w.len_ns });
            return;
        }
        if let Some(t) = self.table() {
            t.state.cursor =
                (t.state.cursor as isize + dir).clamp(0, t.columns as isize - 1) as usize;
        }
    }

    pub fn current_window(&self) -> Window {
        self.window.unwrap_or(Window { start_ns: 0, len_ns: self.model.end_ns.max(1) })
    }

    fn zoom(&mut self, factor: f64) {
        let w = self.current_window();
        let end = self.model.end_ns.max(1);
        // Not `clamp`: a profile shorter than 1 µs has `end` below the minimum.
        let len = ((w.len_ns as f64 * factor) as u64).max(1_000).min(end);
        let center = w.start_ns + w.len_ns / 2;
        let start = center.saturating_sub(len / 2).min(end - len);
        self.window = if len >= end { None } else { Some(Window { start_ns: start, len_ns: len }) };
    }

    /// Selects step `i`; `zoom` fits the window to it, else the window only moves to show it.
    fn select_step(&mut self, i: usize, zoom: bool) {
        let Some(s) = self.model.analysis.steps.get(i) else { return };
        self.step_selected = Some(i);
        let margin = s.duration_ns / 10;
        if zoom {
            self.window = Some(Window {
                start_ns: s.start_ns.saturating_sub(margin),
                len_ns: (s.duration_ns + 2 * margin).max(1_000),
            });
            return;
        }
        let w = self.current_window();
        let end = s.start_ns + s.duration_ns;
        if s.start_ns < w.start_ns || end > w.start_ns + w.len_ns {
            let len = w.len_ns.max(s.duration_ns + 2 * margin);
            let start = (s.start_ns + s.duration_ns / 2).saturating_sub(len / 2);
            self.window = Some(Window { start_ns: start, len_ns: len });
        }
    }

    /// The slowest step, selected and zoomed into.
    pub fn select_slowest_step(&mut self) {
        let slowest = self.model.slowest_steps.first();
        if let Some(i) =
            slowest.and_then(|&n| self.model.analysis.steps.iter().position(|s| s.index == n))
        {
            self.select_step(i, true);
        }
    }

    fn enter(&mut self) {
        match self.tab {
            Tab::Overview if self.overview_selected < self.model.analysis.diagnostics.len() => {
                // The ranked list on the overview is the diagnostics table unsorted.
                self.diagnostics =
                    TableState { selected: self.overview_selected, ..TableState::default() };
                self.diagnostic_detail = true;
                self.detail_scroll = 0;
                self.tab = Tab::Diagnostics;
            }
            Tab::Graphs if self.graph_detail.is_none() => {
                let shown = self.visible_graphs();
                if let Some(&i) = shown.get(self.graphs.selected) {
                    self.graph_detail = Some(self.model.analysis.graphs[i].hash);
                    self.detail_scroll = 0;
                }
            }
            Tab::Diagnostics if !self.diagnostic_detail => {
                self.diagnostic_detail = !self.visible_diagnostics().is_empty();
                self.detail_scroll = 0;
            }
            // From a finding to the newest graph it involves.
            Tab::Diagnostics => {
                if let Some(hash) =
                    self.selected_diagnostic().and_then(|d| d.graphs.last().copied())
                {
                    self.open_graph(hash);
                }
            }
            Tab::Timeline => {
                if let Some(i) = self.step_selected {
                    self.select_step(i, true);
                }
            }
            _ => {}
        }
    }

    fn open_graph(&mut self, hash: u64) {
        self.graphs = TableState::default();
        if let Some(pos) =
            self.visible_graphs().iter().position(|&i| self.model.analysis.graphs[i].hash == hash)
        {
            self.graphs.selected = pos;
        }
        self.graph_detail = Some(hash);
        self.detail_scroll = 0;
        self.tab = Tab::Graphs;
    }

    pub fn selected_diagnostic(&self) -> Option<&xlaprof_profiler::diagnostics::Diagnostic> {
        let shown = self.visible_diagnostics();
        shown.get(self.diagnostics.selected).map(|&i| &self.model.analysis.diagnostics[i])
    }

    fn back(&mut self) {
        match self.tab {
            Tab::Graphs if self.graph_detail.is_some() => self.graph_detail = None,
            Tab::Diagnostics if self.diagnostic_detail => self.diagnostic_detail = false,
            Tab::Timeline if self.window.is_some() => self.window = None,
            _ => {
                if let Some(t) = self.table() {
                    t.state.filter.clear();
                }
            }
        }
    }
}
