//! The timeline: one track per lane and nesting depth, zoomed with the wheel (around the pointer)
//! and panned by dragging; hover for details, click to select; above it a strip of the most
//! recent and the slowest steps to jump to.
//!
//! A frame only touches the spans in view (each row is sorted, see `TimelineRow::visible`), and
//! spans narrower than a pixel that fall on the same pixel are drawn as one rectangle, so a
//! zoomed-out profile of a million events costs about one rectangle per pixel column per row.

use eframe::egui::{self, Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, StrokeKind, Vec2};
use xlaprof_profiler::metrics::{format_bytes, format_ns};
use xlaprof_profiler::timeline::{Span, SpanKind};
use xlaprof_profiler::views::Phase;

use super::model::Model;
use super::Selection;
use crate::viewer::{lane_name, TimelineRow};

const ROW_HEIGHT: f32 = 20.0;
const GUTTER: f32 = 90.0;
const AXIS_HEIGHT: f32 = 18.0;
/// How many steps the strip shows in each group.
const STRIP_STEPS: usize = 10;

/// The visible time range, in ns; `None` until the first frame fits the whole profile.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TimelineView {
    pub range: Option<(f64, f64)>,
    /// Set by other panels: the next frame scrolls here.
    pending_focus: Option<(f64, f64)>,
}

impl TimelineView {
    /// Shows `[start_ns, end_ns]` with a margin on both sides.
    pub fn focus(&mut self, start_ns: u64, end_ns: u64) {
        let width = (end_ns.saturating_sub(start_ns)).max(1000) as f64;
        self.pending_focus = Some((start_ns as f64 - width * 0.1, end_ns as f64 + width * 0.1));
    }
}

pub fn kind_color(kind: SpanKind) -> Color32 {
    match kind {
        SpanKind::Step => Color32::from_rgb(90, 110, 140),
        SpanKind::Scope => Color32::from_rgb(120, 100, 160),
        SpanKind::Sync => Color32::from_rgb(70, 130, 180),
        SpanKind::GraphBuild => Color32::from_rgb(100, 170, 120),
        SpanKind::Lower => Color32::from_rgb(160, 170, 80),
        SpanKind::Compile => Color32::from_rgb(220, 90, 70),
        SpanKind::Execute => Color32::from_rgb(80, 190, 200),
        SpanKind::TransferToDevice => Color32::from_rgb(200, 150, 60),
        SpanKind::HostRead => Color32::from_rgb(230, 120, 180),
        SpanKind::Device => Color32::from_rgb(60, 150, 160),
        SpanKind::FunctionCompile => Color32::from_rgb(180, 60, 50),
        SpanKind::CompilePhase => Color32::from_rgb(240, 130, 100),
        SpanKind::CapturedRun => Color32::from_rgb(50, 160, 170),
        SpanKind::HostFallback => Color32::from_rgb(200, 60, 120),
        SpanKind::DataWait => Color32::from_rgb(150, 150, 150),
        SpanKind::Collective => Color32::from_rgb(150, 90, 200),
    }
}

pub fn show(ui: &mut egui::Ui, model: &Model, view: &mut TimelineView, selection: &mut Selection) {
    let end_ns = model.end_ns.max(1) as f64;
    if let Some(focus) = view.pending_focus.take() {
        view.range = Some(focus);
    }
    let (mut from, mut to) = view.range.unwrap_or((0.0, end_ns));
    step_strip_ui(ui, model, view, selection);
    ui.horizontal(|ui| {
        if ui.button("Fit").on_hover_text("show the whole profile (or double-click)").clicked() {
            view.range = Some((0.0, end_ns));
        }
        ui.label(format!("{} in view", format_ns(to - from)));
        ui.weak("wheel: zoom · drag: pan · click: select");
    });
    if let Some(r) = view.range {
        (from, to) = r;
    }

    let rows = &model.rows;
    let height = AXIS_HEIGHT + rows.len() as f32 * ROW_HEIGHT + 4.0;
    let (rect, response) =
        ui.allocate_exact_size(Vec2::new(ui.available_width(), height), Sense::click_and_drag());
    let tracks = Rect::from_min_max(Pos2::new(rect.left() + GUTTER, rect.top()), rect.max);
    let ns_per_px = (to - from) / tracks.width().max(1.0) as f64;

    // Zoom around the pointer with the wheel (or pinch), pan by dragging or scrolling sideways.
    if response.hovered() {
        let (scroll, zoom) = ui.input(|i| (i.smooth_scroll_delta, i.zoom_delta()));
        let factor = zoom as f64 * (-(scroll.y as f64) * 0.003).exp();
        if let Some(pointer) = response.hover_pos().filter(|_| (factor - 1.0).abs() > 1e-6) {
            let at = from + (pointer.x - tracks.left()).max(0.0) as f64 * ns_per_px;
            let width = ((to - from) / factor).clamp(100.0, (end_ns * 4.0).max(1000.0));
            let left = (at - from) / (to - from);
            from = at - width * left;
            to = from + width;
        }
        if scroll.x != 0.0 {
            let shift = -(scroll.x as f64) * ns_per_px;
            from += shift;
            to += shift;
        }
    }
    if response.dragged() {
        let shift = -(response.drag_delta().x as f64) * ns_per_px;
        from += shift;
        to += shift;
    }
    if response.double_clicked() {
        (from, to) = (0.0, end_ns);
    }
    view.range = Some((from, to));
    let ns_per_px = (to - from) / tracks.width().max(1.0) as f64;
    let x_of = |ns: f64| tracks.left() + ((ns - from) / ns_per_px) as f32;

    let painter = ui.painter_at(rect);
    let visuals = ui.visuals().clone();
    painter.rect_filled(rect, 0.0, visuals.extreme_bg_color);
    axis_ui(&painter, tracks, from, to, &visuals);

    let highlighted = |s: &Span| s.sync.is_some_and(|id| selection.syncs.contains(&id));
    let pointer = response.hover_pos();
    let mut hovered: Option<usize> = None;
    let view_from = from.max(0.0) as u64;
    let view_to = to.max(0.0) as u64;
    for (r, row) in rows.iter().enumerate() {
        let top = rect.top() + AXIS_HEIGHT + r as f32 * ROW_HEIGHT;
        let row_rect =
            Rect::from_min_size(Pos2::new(rect.left(), top), Vec2::new(rect.width(), ROW_HEIGHT));
        if r % 2 == 1 {
            painter.rect_filled(row_rect, 0.0, visuals.faint_bg_color);
        }
        let label = if row.depth == 0 {
            lane_name(row.lane)
        } else {
            format!("  {} +{}", lane_name(row.lane), row.depth)
        };
        painter.text(
            Pos2::new(rect.left() + 4.0, top + ROW_HEIGHT / 2.0),
            Align2::LEFT_CENTER,
            label,
            FontId::proportional(12.0),
            visuals.text_color(),
        );
        let track_painter = painter.with_clip_rect(Rect::from_min_max(
            Pos2::new(tracks.left(), top),
            Pos2::new(tracks.right(), top + ROW_HEIGHT),
        ));
        // A run of sub-pixel spans merged into one rectangle, coloured as its widest span:
        // (x0, x1, color, widest).
        let mut run: Option<(f32, f32, Color32, f32)> = None;
        let flush = |run: &mut Option<(f32, f32, Color32, f32)>| {
            if let Some((x0, x1, color, _)) = run.take() {
                track_painter.rect_filled(
                    Rect::from_min_max(
                        Pos2::new(x0, top + 2.0),
                        Pos2::new(x1.max(x0 + 1.0), top + ROW_HEIGHT - 2.0),
                    ),
                    0.0,
                    color,
                );
            }
        };
        let any_highlight = !selection.syncs.is_empty();
        let visible = row.visible(view_from, view_to);
        let mut next_k = visible.start;
        while next_k < visible.end {
            let k = next_k;
            next_k += 1;
            let (start, end, i) = (row.starts[k], row.ends[k], row.spans[k] as usize);
            if (end as f64) < from {
                continue;
            }
            let (x0, x1) = (x_of(start as f64), x_of(end as f64));
            let mut color = kind_color(row.kinds[k]);
            if selection.span == Some(i) || (any_highlight && highlighted(&model.analysis.spans[i]))
            {
                color = Color32::from_rgb(255, 215, 0);
            }
            if x1 - x0 < 1.5 {
                match &mut run {
                    Some((_, end, c, widest)) if x0 <= *end + 1.0 => {
                        *end = end.max(x1);
                        if x1 - x0 > *widest {
                            (*c, *widest) = (color, x1 - x0);
                        }
                    }
                    _ => {
                        flush(&mut run);
                        run = Some((x0, x1, color, x1 - x0));
                    }
                }
                // Zoomed out, hundreds of spans can lie in this pixel column and change nothing
                // on screen. The running maximum of ends is sorted, so one binary search finds
                // where the spans that end inside the column stop, and we jump there.
                if !any_highlight {
                    let column_end_ns =
                        from + ((x1.floor() + 1.0 - tracks.left()) as f64) * ns_per_px;
                    let skip_to = next_k
                        + row.max_end_ns[next_k..visible.end]
                            .partition_point(|&e| (e as f64) <= column_end_ns);
                    if skip_to > next_k {
                        if let Some((_, end, _, _)) = &mut run {
                            *end = end.max(x_of(row.max_end_ns[skip_to - 1] as f64));
                        }
                        next_k = skip_to;
                    }
                }
                continue;
            }
            flush(&mut run);
            let span_rect =
                Rect::from_min_max(Pos2::new(x0, top + 2.0), Pos2::new(x1, top + ROW_HEIGHT - 2.0));
            track_painter.rect_filled(span_rect, 2.0, color);
            if selection.span == Some(i) {
                track_painter.rect_stroke(
                    span_rect,
                    2.0,
                    Stroke::new(2.0, visuals.strong_text_color()),
                    StrokeKind::Outside,
                );
            }
            if x1 - x0 > 40.0 {
                let clip = span_rect.intersect(tracks).shrink2(Vec2::new(3.0, 0.0));
                track_painter.with_clip_rect(clip).text(
                    Pos2::new(clip.left(), span_rect.center().y),
                    Align2::LEFT_CENTER,
                    &model.analysis.spans[i].name,
                    FontId::proportional(11.0),
                    Color32::BLACK,
                );
            }
        }
        flush(&mut run);
        if let Some(p) = pointer.filter(|p| row_rect.contains(*p) && p.x >= tracks.left()) {
            hovered =
                span_at(row, from + (p.x - tracks.left()) as f64 * ns_per_px, ns_per_px * 2.0);
        }
    }

    if let Some(i) = hovered {
        let span = &model.analysis.spans[i];
        response.clone().on_hover_ui_at_pointer(|ui| span_details_ui(ui, model, span));
        if response.clicked() {
            selection.span = Some(i);
            selection.syncs = span.sync.into_iter().collect();
            if let Some(hash) = span.hash {
                selection.show_graph(model, hash);
            }
        }
    } else if response.clicked() {
        selection.span = None;
    }
    ui.add_space(8.0);
    step_phases_ui(ui, model, selection);
}

/// Where the time of one step went (the selected span's step, else the slowest), as one bar.
fn step_phases_ui(ui: &mut egui::Ui, model: &Model, selection: &Selection) {
    let selected = selection.span.and_then(|i| model.analysis.spans.get(i)).and_then(|s| s.step);
    let Some(step) = selected
        .and_then(|n| model.step(n))
        .or_else(|| model.slowest_steps.first().and_then(|&n| model.step(n)))
    else {
        return;
    };
    let which = if selected.is_some() { "selected" } else { "slowest" };
    ui.label(
        egui::RichText::new(format!(
            "Step {} ({which}): {}, {} sync(s), {} compile(s), {} forced by value reads",
            step.index,
            format_ns(step.duration_ns as f64),
            step.syncs,
            step.compiles,
            step.value_read_syncs
        ))
        .strong(),
    );
    let (rect, _) = ui.allocate_exact_size(Vec2::new(ui.available_width(), 26.0), Sense::hover());
    let painter = ui.painter_at(rect);
    let total = step.duration_ns.max(1) as f32;
    let mut x = rect.left();
    for (phase, ns) in step.phases() {
        let width = rect.width() * ns as f32 / total;
        if width <= 0.0 {
            continue;
        }
        let r = Rect::from_min_size(Pos2::new(x, rect.top()), Vec2::new(width, rect.height()));
        painter.rect_filled(r, 0.0, phase_color(phase));
        if width > 60.0 {
            painter.text(
                r.left_center() + Vec2::new(4.0, 0.0),
                Align2::LEFT_CENTER,
                phase.name(),
                FontId::proportional(12.0),
                Color32::BLACK,
            );
        }
        x += width;
    }
    ui.horizontal_wrapped(|ui| {
        for (phase, ns) in step.phases() {
            ui.label(egui::RichText::new("    ").background_color(phase_color(phase)));
            ui.label(format!(
                "{} {} ({:.0}%)",
                phase.name(),
                format_ns(ns as f64),
                ns as f32 / total * 100.0
            ));
        }
    });
}

fn phase_color(phase: Phase) -> Color32 {
    match phase {
        Phase::Build => kind_color(SpanKind::GraphBuild),
        Phase::Lower => kind_color(SpanKind::Lower),
        Phase::Compile => kind_color(SpanKind::Compile),
        Phase::Transfer => kind_color(SpanKind::TransferToDevice),
        Phase::Execute => kind_color(SpanKind::Execute),
        Phase::Trace => Color32::from_rgb(150, 150, 150),
    }
}

/// The span of `row` under time `at_ns` (or within `slack_ns` of it), innermost last drawn.
fn span_at(row: &TimelineRow, at_ns: f64, slack_ns: f64) -> Option<usize> {
    let at = at_ns.max(0.0) as u64;
    let slack = slack_ns as u64;
    row.visible(at.saturating_sub(slack), at + slack)
        .rev()
        .find(|&k| row.starts[k] <= at + slack && row.ends[k] + slack >= at)
        .map(|k| row.spans[k] as usize)
}

fn axis_ui(painter: &egui::Painter, tracks: Rect, from: f64, to: f64, visuals: &egui::Visuals) {
    let width_ns = (to - from).max(1.0);
    // A tick every 1, 2 or 5 × 10^k ns, about every 120 px.
    let target = width_ns * 120.0 / tracks.width().max(1.0) as f64;
    let magnitude = 10f64.powf(target.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= target)
        .unwrap_or(target);
    let mut t = (from / step).ceil() * step;
    while t <= to {
        let x = tracks.left() + ((t - from) / width_ns * tracks.width() as f64) as f32;
        painter.line_segment(
            [Pos2::new(x, tracks.top()), Pos2::new(x, tracks.bottom())],
            Stroke::new(1.0, visuals.widgets.noninteractive.bg_stroke.color.gamma_multiply(0.5)),
        );
        painter.text(
            Pos2::new(x + 2.0, tracks.top() + 2.0),
            Align2::LEFT_TOP,
            format_ns(t),
            FontId::monospace(10.0),
            visuals.weak_text_color(),
        );
        t += step;
    }
}

/// The recent and the slowest steps, as buttons that zoom the timeline onto them.
fn step_strip_ui(
    ui: &mut egui::Ui,
    model: &Model,
    view: &mut TimelineView,
    selection: &mut Selection,
) {
    if model.analysis.steps.is_empty() {
        return;
    }
    // The slowest step comes first.
    let slowest = model.slowest_steps.first().and_then(|&n| model.step(n));
    let max_ns = slowest.map_or(1, |s| s.duration_ns).max(1);
    let mut step_button = |ui: &mut egui::Ui, index: u64| {
        let Some(step) = model.step(index) else { return };
        let fraction = step.duration_ns as f32 / max_ns as f32;
        let (rect, response) = ui.allocate_exact_size(Vec2::new(34.0, 34.0), Sense::click());
        let painter = ui.painter_at(rect);
        painter.rect_filled(rect, 2.0, ui.visuals().faint_bg_color);
        let bar_height = (rect.height() - 12.0) * fraction.max(0.05);
        let color = if step.compiles > 0 {
            kind_color(SpanKind::Compile)
        } else {
            kind_color(SpanKind::Execute)
        };
        painter.rect_filled(
            Rect::from_min_max(
                Pos2::new(rect.left() + 4.0, rect.bottom() - 12.0 - bar_height),
                Pos2::new(rect.right() - 4.0, rect.bottom() - 12.0),
            ),
            1.0,
            color,
        );
        painter.text(
            Pos2::new(rect.center().x, rect.bottom() - 1.0),
            Align2::CENTER_BOTTOM,
            format!("{index}"),
            FontId::monospace(10.0),
            ui.visuals().text_color(),
        );
        let response = response.on_hover_text(format!(
            "step {index}: {}, {} sync(s), {} compile(s)",
            format_ns(step.duration_ns as f64),
            step.syncs,
            step.compiles
        ));
        if response.clicked() {
            view.focus(step.start_ns, step.start_ns + step.duration_ns);
            selection.span = model
                .analysis
                .spans
                .iter()
                .position(|s| s.kind == SpanKind::Step && s.step == Some(index));
        }
    };
    egui::ScrollArea::horizontal().id_salt("step-strip").show(ui, |ui| {
        ui.horizontal(|ui| {
            ui.label("recent");
            let recent: Vec<u64> = model
                .analysis
                .steps
                .iter()
                .rev()
                .take(STRIP_STEPS)
                .map(|s| s.index)
                .rev()
                .collect();
            for index in recent {
                step_button(ui, index);
            }
            ui.separator();
            ui.label("slowest");
            for &index in model.slowest_steps.iter().take(STRIP_STEPS) {
                step_button(ui, index);
            }
        })
    });
}

/// What a span is, as a small table (tooltips and the details panel).
pub fn span_details_ui(ui: &mut egui::Ui, model: &Model, span: &Span) {
    ui.label(egui::RichText::new(span.name.as_str()).strong());
    egui::Grid::new(("span", span.start_ns, span.kind)).num_columns(2).show(ui, |ui| {
        let mut row = |k: &str, v: String| {
            ui.label(k);
            ui.label(v);
            ui.end_row();
        };
        row("kind", span.kind.name().to_string());
        row("start", format_ns(span.start_ns as f64));
        row("duration", format_ns(span.duration_ns() as f64));
        if let Some(step) = span.step {
            row("step", step.to_string());
        }
        if let Some(sync) = span.sync {
            row("sync", sync.to_string());
        }
        if let Some(hash) = span.hash {
            row("graph", format!("{hash:016x}"));
        }
        if let Some(bytes) = span.bytes {
            row("bytes", format_bytes(bytes as f64));
        }
        if let Some(location) = span.location {
            row("source", model.profile.location(location));
        }
    });
}
