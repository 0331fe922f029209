//! The viewer driven through egui_kittest: a profile recorded by the real engine (the profiler's
//! golden file) is opened, the panels are clicked through, and what they show is read back through
//! AccessKit, the way a screen reader would.

use std::path::{Path, PathBuf};

use eframe::egui;
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use xlaprof_profiler::export::Format;
use xlaprof_profiler::timeline::SpanKind;

use super::{export_ui, GuiApp, Notice, Settings, Tab};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data/profile-v1.xlaprof")
}

/// A fresh folder for the test `test`, removed when it ends.
fn scratch(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("xlaprof-gui-tests-{test}-")).tempdir().unwrap()
}

fn harness(app: GuiApp) -> Harness<'static, GuiApp> {
    Harness::builder()
        .with_size(egui::Vec2::new(1400.0, 900.0))
        // Scrolling to the first difference animates for a few frames.
        .with_max_steps(40)
        .build_ui_state(|ui, app: &mut GuiApp| app.show(ui), app)
}

fn opened(path: &Path) -> Harness<'static, GuiApp> {
    let mut app = GuiApp::new(Settings::default());
    app.open(path.to_path_buf(), false);
    let mut h = harness(app);
    h.run();
    h
}

#[test]
fn opens_a_recorded_profile_on_the_timeline() {
    let h = opened(&golden());
    let app = h.state();
    assert!(matches!(app.notice, Some(Notice::Info(_))), "{:?}", app.notice);
    let model = app.model.as_ref().unwrap();
    assert_eq!(model.analysis.steps.len(), 5);
    // The status bar counts what the profiler read; the step strip offers every step.
    h.get_by_label_contains(&format!("{} records", model.profile.records));
    h.get_by_label("recent");
    h.get_by_label("slowest");
    h.get_by_label("Fit");
    // Lanes and the summary come from the analysis.
    h.get_by_label_contains("5 steps");
    h.get_by_label("cache hit rate");
}

#[test]
fn clicking_the_timeline_selects_the_span_under_the_pointer() {
    let mut h = opened(&golden());
    let fit = h.get_by_label("Fit").rect();
    // The first track (steps) starts below the button row and the time axis; steps cover the
    // whole recording, so a point in the middle of the track is inside one of them.
    let at = egui::pos2(fit.left() + 500.0, fit.bottom() + 8.0 + 18.0 + 10.0);
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: at,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
        h.run();
    }
    let app = h.state();
    let model = app.model.as_ref().unwrap();
    let span = app.selection.span.map(|i| &model.analysis.spans[i]).expect("a span is selected");
    assert_eq!(span.kind, SpanKind::Step);
    // The details panel shows the selected span (and so may the tooltip under the pointer).
    assert!(h.query_all_by_label(span.name.as_str()).count() >= 1);
}

#[test]
fn a_finding_shows_what_to_change_in_the_users_line() {
    let mut h = opened(&golden());
    let model = h.state_mut().model.as_mut().expect("a profile is open");
    model.view.analysis.diagnostics[0].fix = Some(xlaprof_profiler::diagnostics::CodeFix {
        at: "train.py:12".into(),
        before: "    total += loss.item()".into(),
        after: "    total += loss.detach()".into(),
    });
    h.get_by_label("Diagnostics").click();
    h.run();
    h.get_by_label("change train.py:12:");
    h.get_by_label("- total += loss.item()");
    h.get_by_label("+ total += loss.detach()");
}

#[test]
fn a_diagnostic_selects_its_syncs_and_graphs_and_shows_the_diff() {
    let mut h = opened(&golden());
    h.get_by_label("Diagnostics").click();
    h.run();
    h.get_by_label_contains("recompiled twice");
    h.get_by_label_contains("advice: it follows from the value read at profiler/examples/make_golden.rs:23 (its own finding)");
    h.get_by_label("recompile").click();
    h.run();
    {
        let sel = &h.state().selection;
        assert_eq!(sel.diagnostic, Some(0));
        assert_eq!(sel.syncs.len(), 2, "{sel:?}");
        assert!(sel.graph.is_some() && sel.compare.is_some(), "{sel:?}");
    }
    h.get_by_label("Show graphs").click();
    h.run();
    assert_eq!(h.state().settings.tab, Tab::Graphs);
    h.get_by_label("What changed");
    // The finding's latest recompile: an input changed shape, named with where it was created.
    h.get_by_label(
        "- the tensor made at profiler/examples/make_golden.rs:18 changed from f32[4,8] to f32[6,8] (dimension 0 went from 4 to 6)",
    );
    // Its first recompile, picked from the list: the first diverging node, side by side with
    // its source line.
    let first = h.state().model.as_ref().unwrap().analysis.diagnostics[0].graphs[1];
    h.get_by_label(&format!("{first:016x}")).click();
    h.run();
    h.get_by_label_contains(
        "- the value read at profiler/examples/make_golden.rs:23 earlier in the step had computed",
    );
    h.get_by_label("Scroll to the first diverging node").click();
    h.run();
    h.get_by_label_contains(
        "%30 = broadcast_in_dim(%8) : f32[4,4]    @ profiler/examples/make_golden.rs:19",
    );
    h.get_by_label("Diagram").click();
    h.run();
    h.get_by_label_contains("drag to pan");
}

#[test]
fn show_in_timeline_highlights_and_frames_the_finding() {
    let mut h = opened(&golden());
    h.get_by_label("Diagnostics").click();
    h.run();
    h.get_by_label_contains("forced a graph to run before the step ended").click();
    h.run();
    h.get_by_label("Show in timeline").click();
    h.run();
    let app = h.state();
    assert_eq!(app.settings.tab, Tab::Timeline);
    let (from, to) = app.timeline.range.unwrap();
    let model = app.model.as_ref().unwrap();
    let sync = model.profile.sync(app.selection.syncs[0]).unwrap();
    assert!(from <= sync.start_ns as f64 && to >= sync.end_ns as f64);
    assert!(to - from < model.end_ns as f64, "zoomed in on the sync");
}

#[test]
fn flamegraph_and_its_sortable_table() {
    let mut h = opened(&golden());
    h.get_by_label("Flamegraph").click();
    h.run();
    h.get_by_label("Table").click();
    h.run();
    assert!(h.state().settings.flame_as_table);
    h.get_by_label("program > steps > sync at profiler/examples/make_golden.rs:26");
    h.get_by_label("total (desc)").click();
    h.run();
    assert!(!h.state().flame.descending);
    h.get_by_label("total (asc)");
    h.get_by_label("Flame view").click();
    h.run();
    assert!(!h.state().settings.flame_as_table);
}

#[test]
fn plots_and_graph_list() {
    let mut h = opened(&golden());
    h.get_by_label("Plots").click();
    h.run();
    h.get_by_label("Step time (ms)");
    h.get_by_label("Peak memory per graph (MB)");
    h.get_by_label("Graphs").click();
    h.run();
    let first = h.state().model.as_ref().unwrap().analysis.graphs[0].hash;
    h.get_by_label(&format!("{first:016x}")).click();
    h.run();
    assert_eq!(h.state().selection.graph, Some(first));
}

#[test]
fn damaged_files_show_what_was_read_and_a_message() {
    let bytes = std::fs::read(golden()).unwrap();
    let dir = scratch("damaged");
    let truncated = dir.path().join("truncated.xlaprof");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let h = opened(&truncated);
    let app = h.state();
    assert!(
        matches!(&app.notice, Some(Notice::Error(m)) if m.contains("damaged")),
        "{:?}",
        app.notice
    );
    assert!(!app.model.as_ref().unwrap().analysis.spans.is_empty(), "what was read is shown");
    h.get_by_label_contains("warning: the file is damaged");

    let garbage = dir.path().join("garbage.xlaprof");
    std::fs::write(&garbage, b"this is not a profile at all").unwrap();
    let h = opened(&garbage);
    assert!(h.state().model.is_none());
    h.get_by_label_contains("cannot open the profile: not an xlaprof profile");

    let h = opened(&dir.path().join("missing.xlaprof"));
    h.get_by_label_contains("cannot open the profile");
    h.get_by_label_contains("drop a .xlaprof file");
}

#[test]
fn following_a_growing_file_shows_new_records() {
    let bytes = std::fs::read(golden()).unwrap();
    let dir = scratch("following");
    let live = dir.path().join("live.xlaprof");
    std::fs::write(&live, &bytes[..bytes.len() / 2]).unwrap();
    let mut app = GuiApp::new(Settings::default());
    app.open(live.clone(), true);
    let mut h = harness(app);
    h.run_steps(2);
    let before = h.state().model.as_ref().unwrap().profile.records;
    h.get_by_label("LIVE");
    std::fs::write(&live, &bytes).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    h.run_steps(2);
    let after = h.state().model.as_ref().unwrap().profile.records;
    assert!(after > before, "{before} -> {after}");
    assert_eq!(h.state().model.as_ref().unwrap().analysis.steps.len(), 5);
}

#[test]
fn exports_write_the_cli_formats_and_png() {
    let mut app = GuiApp::new(Settings::default());
    app.open(golden(), false);
    let model = app.model.as_ref().unwrap();
    let dir = scratch("exports");
    let json = dir.path().join("export.json");
    assert!(matches!(export_ui::write_export(model, Format::Json, &json), Notice::Info(_)));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["format"], "xlaprof-json");
    let csv = dir.path().join("export-csv");
    assert!(matches!(export_ui::write_export(model, Format::Csv, &csv), Notice::Info(_)));
    assert!(std::fs::read_dir(&csv).unwrap().count() > 0);
    let bad = dir.path().join("no-such-dir/x/y.json");
    assert!(matches!(export_ui::write_export(model, Format::Json, &bad), Notice::Error(_)));

    let image = egui::ColorImage::new([3, 2], vec![egui::Color32::from_rgb(10, 20, 30); 6]);
    let png_path = dir.path().join("shot.png");
    export_ui::write_png(&png_path, &image).unwrap();
    let decoder =
        png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png_path).unwrap()));
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (3, 2));
}

/// eframe's storage, in memory.
#[derive(Default)]
struct MemoryStorage(std::collections::HashMap<String, String>);

impl eframe::Storage for MemoryStorage {
    fn get_string(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
    fn set_string(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
    fn remove_string(&mut self, key: &str) {
        self.0.remove(key);
    }
    fn flush(&mut self) {}
}

#[test]
fn settings_persist_through_eframe_storage() {
    let mut h = opened(&golden());
    h.get_by_label("View").click();
    h.run();
    h.get_by_label("Dark theme").click();
    h.run();
    h.get_by_label("Graphs").click();
    h.run();
    let mut storage = MemoryStorage::default();
    eframe::App::save(h.state_mut(), &mut storage);
    let restored: Settings = eframe::get_value(&storage, eframe::APP_KEY).unwrap();
    assert_eq!(restored.tab, Tab::Graphs);
    assert!(!restored.dark);
    assert_eq!(restored.recent_files, vec![golden()]);
    assert_eq!(restored, h.state().settings);
}

#[test]
fn an_empty_profile_draws_every_panel_and_zooms() {
    let dir = scratch("empty");
    let empty = dir.path().join("empty.xlaprof");
    std::fs::write(&empty, xlaprof_profiler::file::header()).unwrap();
    let mut h = opened(&empty);
    let fit = h.get_by_label("Fit").rect();
    h.event(egui::Event::PointerMoved(egui::pos2(fit.left() + 300.0, fit.bottom() + 30.0)));
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, 200.0),
        modifiers: egui::Modifiers::NONE,
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Wheel,
    });
    h.run();
    for (tab, says) in [
        ("Flamegraph", "No syncs recorded yet: nothing to draw."),
        ("Plots", "No steps or graphs recorded yet: nothing to plot."),
        ("Graphs", "No graphs recorded yet."),
        ("Diagnostics", "No findings: no recompiles, hidden syncs, slow steps or idle device."),
    ] {
        h.get_by_label(tab).click();
        h.run();
        h.get_by_label(says);
    }
}

/// A data-parallel run recorded by the real engine on 4 devices (`mlp_train 3 --data-parallel 4`).
fn partitioned() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data/profile-spmd.xlaprof")
}

#[test]
fn a_partitioned_run_has_a_lane_per_device_and_a_sharding_table() {
    let mut h = opened(&partitioned());
    let model = h.state().model.as_ref().unwrap();
    let lanes: Vec<u32> = model.rows.iter().map(|r| r.lane).collect();
    let first_device = xlaprof_profiler::timeline::LANES.len() as u32;
    for device in 0..4 {
        assert!(lanes.contains(&(first_device + device)), "a lane for device {device}: {lanes:?}");
    }
    let partitioned = model.analysis.devices.graphs[0].hash;
    h.get_by_label("Graphs").click();
    h.run();
    h.get_by_label(&format!("{partitioned:016x}")).click();
    h.run();
    h.get_by_label("Sharding");
    h.get_by_label("mesh data=4 on devices [0, 1, 2, 3]");
    assert!(
        h.query_by_label_contains("all-reduce f32[784,512] + 6 more").is_some(),
        "the all-reduce of the gradients is listed"
    );
}

/// The golden torch.compile profile: its summary row, and its compiles (with their phases) and
/// graph runs on the timeline.
#[test]
fn a_torch_compile_profile_shows_its_compiles_and_runs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler/tests/data/profile-torch-compile.xlaprof");
    let h = opened(&path);
    h.get_by_label("torch.compile");
    h.get_by_label_contains("6 compiles of 2 functions");
    let model = h.state().model.as_ref().unwrap();
    let count = |kind: SpanKind| model.analysis.spans.iter().filter(|s| s.kind == kind).count();
    assert_eq!(count(SpanKind::FunctionCompile), 6);
    assert!(count(SpanKind::CompilePhase) >= 6);
    assert_eq!(count(SpanKind::CapturedRun), 8);
}

#[test]
fn the_lines_panel_shows_each_line_with_what_the_engine_did() {
    let mut h = opened(&golden());
    h.get_by_label("Lines").click();
    h.run();
    assert_eq!(h.state().settings.tab, Tab::Lines);
    // The golden run's training loop: its step line forced a sync each step, its ops were
    // recorded at the lines of the layer and the optimizer.
    let model = h.state().model.as_ref().unwrap();
    let busiest = model.analysis.lines.iter().max_by_key(|l| l.syncs).expect("lines");
    let label = format!("{}:{}", busiest.file, busiest.line);
    assert!(busiest.syncs >= 5, "{busiest:?}");
    h.get_by_label(&label);
    h.get_by_label_contains("What the engine did for each source line");
}

#[test]
fn a_jobs_ranks_open_as_one_with_a_rank_to_choose() {
    let dir = scratch("job");
    for rank in 0..3 {
        let bytes = crate::tui::tests::rank_file(rank, 3, 2);
        std::fs::write(dir.path().join(format!("job.rank{rank}.xlaprof")), bytes).unwrap();
    }
    let mut h = opened(&dir.path().join("job.xlaprof"));
    h.get_by_label("Job: 3 ranks");
    h.get_by_label_contains("rank 1 is the straggler");
    h.get_by_label_contains("ranks 0, 1 are stuck in all_reduce #6");
    h.get_by_label("shown").click();
    h.run();
    h.get_by_label("rank 2").click();
    h.run();
    let app = h.state();
    assert_eq!(app.model.as_ref().unwrap().profile.job.map(|j| j.rank), Some(2));
    assert_eq!(app.source.as_ref().unwrap().shown, 2);
}
