//! The terminal UI on profiles recorded from the real engine: each view drawn at 80x24 and at a
//! larger size (snapshots, with times, hashes and paths redacted), and what the keys do.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use xlaprof_core::nn::{Adam, Module, Optimizer};
use xlaprof_profiler::{Recording, Thresholds};
use xlaprof_samples::{Mlp, Prototypes};

use super::app::{App, Tab};
use super::draw::frame;
use crate::viewer::Source;

fn dir() -> tempfile::TempDir {
    // A fixed-width name: the snapshots show paths cut at the screen's edge. Tests running side
    // by side never share a folder.
    let named = tempfile::Builder::new().prefix("xlaprof-tui-tests-").rand_bytes(14).tempdir();
    named.unwrap()
}

/// A short training run with the two mistakes the views must show: a ragged last batch (a
/// second graph) and a loss read inside the step (a hidden sync), inside a named scope.
fn recorded() -> &'static [u8] {
    static FILE: OnceLock<Vec<u8>> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = dir();
        let mut data = Prototypes::new(4, 16, 3);
        let model = Mlp::new(&[16, 32, 4], 5).unwrap();
        let mut opt = Adam::new(model.parameters(), 1e-2).unwrap();
        let recording = Recording::to_file(&dir.path().join("train.xlaprof")).unwrap();
        for batch in [8usize, 8, 8, 5, 8, 8] {
            let _scope = xlaprof_core::events::scope("train step");
            let (x, y) = data.batch(batch, 1.0).unwrap();
            opt.zero_grad();
            let loss = model.forward(&x).unwrap().cross_entropy(&y).unwrap();
            loss.backward().unwrap();
            opt.step().unwrap();
            assert!(loss.item().unwrap().is_finite());
            xlaprof_core::step().unwrap();
        }
        recording.stop();
        // Kept as bytes, not as a file: many tests share it, and none knows when the last is
        // done with it.
        std::fs::read(dir.path().join("train.xlaprof")).unwrap()
    })
}

/// The same profile on a made-up clock (a record every millisecond, every duration half of
/// one) and under a fixed program name, so snapshots are the same from run to run while
/// everything else is as recorded.
fn on_fixed_clock() -> &'static [u8] {
    use xlaprof_profiler::file::{decode, frame as encode, header};
    use xlaprof_profiler::record::Record;
    static FILE: OnceLock<Vec<u8>> = OnceLock::new();
    FILE.get_or_init(|| {
        let mut bytes = header();
        for (i, mut r) in decode(recorded()).unwrap().records.into_iter().enumerate() {
            let at = (i as u64 + 1) * 1_000_000;
            match &mut r {
                // The test binary's name and arguments change from run to run too.
                Record::Meta(meta) => meta.program = "train (tui tests)".into(),
                Record::SyncBegin { t, .. }
                | Record::CacheLookup { t, .. }
                | Record::Step { t, .. }
                | Record::ScopeBegin { t, .. }
                | Record::ScopeEnd { t, .. } => *t = at,
                Record::GraphBuilt { t, dur, .. }
                | Record::Lowered { t, dur, .. }
                | Record::Compiled { t, dur, .. }
                | Record::Transfer { t, dur, .. }
                | Record::Executed { t, dur, .. }
                | Record::SyncEnd { t, dur, .. }
                | Record::ValueRead { t, dur, .. }
                | Record::HostFallback { t, dur, .. }
                | Record::DataWait { t, dur, .. } => {
                    *t = at;
                    *dur = 500_000;
                }
                _ => {}
            }
            bytes.extend(encode(&r));
        }
        bytes
    })
}

/// Opens `bytes` as the profile file `name`. `Source::open` reads a file whole and never again,
/// so its folder is removed when this returns.
fn open(bytes: &[u8], name: &str) -> App {
    let dir = dir();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    App::new(Source::open(&path), Thresholds::default())
}

fn app() -> App {
    open(recorded(), "train.xlaprof")
}

fn app_on_fixed_clock() -> App {
    let mut app = open(on_fixed_clock(), "fixed-clock.xlaprof");
    // Shown in the status line: the same name wherever the temporary folder is.
    app.source.path = PathBuf::from("fixed-clock.xlaprof");
    app
}

fn render(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| frame(f, app)).unwrap();
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        let line: String = (0..width).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

/// Graph hashes change whenever the engine does: they are replaced by marks of the same width, so
/// the layout shows as it is.
macro_rules! snapshot {
    ($name:expr, $text:expr) => {
        insta::with_settings!({filters => vec![
            (r"\b[0-9a-f]{16}\b", "[graph hash....]"),
            (r"\b[0-9a-f]{8}\b", "[graph.]"),
        ]}, {
            insta::assert_snapshot!($name, $text);
        });
    };
}

#[test]
fn every_view_at_80x24_and_at_140x40() {
    let mut app = app_on_fixed_clock();
    for (tab, name) in [
        (Tab::Overview, "overview"),
        (Tab::Graphs, "graphs"),
        (Tab::Timeline, "timeline"),
        (Tab::Metrics, "metrics"),
        (Tab::Diagnostics, "diagnostics"),
        (Tab::Lines, "lines"),
    ] {
        app.tab = tab;
        snapshot!(format!("{name}_80x24"), render(&app, 80, 24));
        if tab != Tab::Metrics {
            snapshot!(format!("{name}_140x40"), render(&app, 140, 40));
        }
    }
}

#[test]
fn the_overview_shows_the_findings_of_the_real_run() {
    let app = app();
    let screen = render(&app, 120, 40);
    assert!(screen.contains("steps 6"), "{screen}");
    assert!(screen.contains("recompile"), "{screen}");
    assert!(screen.contains("hidden sync"), "{screen}");
    assert!(screen.contains("src/tui/tests.rs:"), "findings point at this file: {screen}");
}

#[test]
fn drilling_into_a_graph_shows_its_history_ops_and_stablehlo() {
    let mut app = app_on_fixed_clock();
    key(&mut app, KeyCode::Char('2'));
    assert_eq!(app.tab, Tab::Graphs);
    // The second version of the training step's graph (the ragged batch) explains itself.
    keys(&mut app, "/");
    for c in "tests.rs".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    assert!(!app.editing_filter);
    let shown = app.visible_graphs();
    let v2 = shown
        .iter()
        .position(|&i| app.model.analysis.graphs[i].version == 2)
        .expect("a second version");
    for _ in 0..v2 {
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Enter);
    let hash = app.graph_detail.expect("drilled into a graph");
    assert_eq!(app.model.graph(hash).unwrap().version, 2);
    let screen = render(&app, 140, 40);
    assert!(screen.contains("recompile history"), "{screen}");
    assert!(screen.contains("changed from f32[8,16] to f32[5,16]"), "{screen}");
    assert!(screen.contains("stablehlo.") || screen.contains("func.func"), "{screen}");
    snapshot!("graph_detail_140x40", screen);
    snapshot!("graph_detail_80x24", render(&app, 80, 24));
    // j scrolls the StableHLO; Esc goes back to the list, still filtered.
    keys(&mut app, "jjj");
    assert_eq!(app.detail_scroll, 3);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.graph_detail, None);
    assert_eq!(app.graphs.filter, "tests.rs");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.graphs.filter, "");
}

#[test]
fn sort_orders_by_the_chosen_column_and_again_reverses() {
    let mut app = app();
    key(&mut app, KeyCode::Char('4'));
    // Column 1 is the count.
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Char('s'));
    let counts = |app: &App| -> Vec<u64> {
        app.visible_metrics().iter().map(|&i| app.model.analysis.metrics.metrics[i].count).collect()
    };
    let down = counts(&app);
    assert!(down.windows(2).all(|w| w[0] >= w[1]), "{down:?}");
    assert!(down.first() > down.last(), "the counts differ: {down:?}");
    key(&mut app, KeyCode::Char('s'));
    let up = counts(&app);
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "{up:?}");
    assert!(render(&app, 100, 30).contains("count▲"));
}

#[test]
fn filter_keeps_matching_rows_and_esc_clears_it() {
    let mut app = app();
    key(&mut app, KeyCode::Char('4'));
    let all = app.visible_metrics().len();
    key(&mut app, KeyCode::Char('/'));
    keys(&mut app, "compile");
    assert!(app.editing_filter);
    let names: Vec<&str> =
        app.visible_metrics().iter().map(|&i| app.model.analysis.metrics.metrics[i].name).collect();
    assert!(!names.is_empty() && names.len() < all, "{names:?}");
    assert!(names.iter().all(|n| n.to_lowercase().contains("compile")), "{names:?}");
    // While typing, q is part of the filter, not quit.
    key(&mut app, KeyCode::Char('q'));
    assert!(!app.quit);
    key(&mut app, KeyCode::Backspace);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.visible_metrics().len(), all);
}

#[test]
fn navigation_tabs_help_pause_and_quit() {
    let mut app = app_on_fixed_clock();
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, Tab::Graphs);
    app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT));
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.tab, Tab::Lines, "back from the first view is the last");
    key(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    let screen = render(&app, 80, 24);
    assert!(screen.contains("pause live updates"), "{screen}");
    snapshot!("help_80x24", screen);
    key(&mut app, KeyCode::Char('x'));
    assert!(!app.help, "any key closes the help");
    key(&mut app, KeyCode::Char(' '));
    assert!(app.paused);
    assert!(!app.tick(), "a paused UI does not redraw for new data");
    key(&mut app, KeyCode::Char(' '));
    assert!(!app.paused);
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

#[test]
fn a_finding_opens_from_the_overview_and_leads_to_its_graph() {
    let mut app = app();
    let recompile = app
        .model
        .analysis
        .diagnostics
        .iter()
        .position(|d| d.kind == xlaprof_profiler::diagnostics::Kind::Recompile)
        .expect("a recompile finding");
    for _ in 0..recompile {
        key(&mut app, KeyCode::Char('j'));
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.tab, Tab::Diagnostics);
    assert!(app.diagnostic_detail);
    let screen = render(&app, 120, 40);
    assert!(screen.contains("what changed"), "{screen}");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.tab, Tab::Graphs);
    let hash = app.graph_detail.expect("the finding's graph");
    assert!(app.model.analysis.diagnostics[recompile].graphs.contains(&hash));
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.graph_detail, None);
}

/// A finding's rewrite of the user's line shows under its advice, as the line reads and would.
#[test]
fn a_finding_shows_what_to_change_in_the_users_line() {
    let mut app = app();
    let sync = app
        .model
        .analysis
        .diagnostics
        .iter()
        .position(|d| d.kind == xlaprof_profiler::diagnostics::Kind::HiddenSync)
        .expect("a hidden sync finding");
    app.model.analysis.diagnostics[sync].fix = Some(xlaprof_profiler::diagnostics::CodeFix {
        at: "train.py:12".into(),
        before: "    total += loss.item()".into(),
        after: "    total += loss.detach()".into(),
    });
    for _ in 0..sync {
        key(&mut app, KeyCode::Char('j'));
    }
    key(&mut app, KeyCode::Enter);
    assert!(app.diagnostic_detail);
    let screen = render(&app, 120, 40);
    assert!(screen.contains("change train.py:12:"), "{screen}");
    assert!(screen.contains("- total += loss.item()"), "{screen}");
    assert!(screen.contains("+ total += loss.detach()"), "{screen}");
}

#[test]
fn the_timeline_zooms_pans_and_finds_the_slowest_step() {
    let mut app = app();
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(app.window, None);
    key(&mut app, KeyCode::Char('m'));
    let slowest = app.step_selected.expect("a step");
    let max = app.model.analysis.steps.iter().map(|s| s.duration_ns).max().unwrap();
    assert_eq!(app.model.analysis.steps[slowest].duration_ns, max);
    let w = app.window.expect("zoomed to the step");
    assert!(w.len_ns < app.model.end_ns);
    key(&mut app, KeyCode::Char('-'));
    let wider = app.current_window();
    assert!(wider.len_ns > w.len_ns);
    key(&mut app, KeyCode::Char('+'));
    key(&mut app, KeyCode::Char('+'));
    let narrower = app.current_window();
    assert!(narrower.len_ns < w.len_ns);
    let before = app.current_window().start_ns;
    key(&mut app, KeyCode::Left);
    assert!(app.current_window().start_ns < before || before == 0);
    key(&mut app, KeyCode::Char('j'));
    assert_eq!(app.step_selected, Some((slowest + 1).min(app.model.analysis.steps.len() - 1)));
    let screen = render(&app, 120, 30);
    assert!(screen.contains("slowest steps"), "{screen}");
    key(&mut app, KeyCode::Char('0'));
    assert_eq!(app.window, None);
}

#[test]
fn zooming_a_profile_shorter_than_a_microsecond_keeps_it_whole() {
    let dir = dir();
    let path = dir.path().join("empty.xlaprof");
    std::fs::write(&path, xlaprof_profiler::file::header()).unwrap();
    let mut app = App::new(Source::open(&path), Thresholds::default());
    assert!(app.model.end_ns < 1_000);
    key(&mut app, KeyCode::Char('3'));
    keys(&mut app, "+-+");
    assert_eq!(app.window, None);
}

#[test]
fn hostile_strings_are_shown_inert() {
    use xlaprof_profiler::file::{frame as encode, header};
    use xlaprof_profiler::record::{Location, Meta, Record};
    let dir = dir();
    let path = dir.path().join("hostile.xlaprof");
    let mut bytes = header();
    let meta = Meta { program: "evil\x1b]0;pwned\x07\x1b[2J".into(), ..Meta::default() };
    bytes.extend(encode(&Record::Meta(meta)));
    bytes.extend(encode(&Record::Location {
        id: 0,
        location: Location {
            file: "a\u{202e}b.rs".into(),
            line: 1,
            function: "\x1b[31mred".into(),
        },
    }));
    std::fs::write(&path, bytes).unwrap();
    let app = App::new(Source::open(&path), Thresholds::default());
    let screen = render(&app, 100, 24);
    assert!(!screen.contains('\x1b') && !screen.contains('\u{202e}') && !screen.contains('\x07'));
    assert!(screen.contains("evil\u{fffd}]0;pwned"), "{screen}");
}

#[test]
fn missing_corrupt_and_truncated_files_show_what_they_can() {
    let missing =
        App::new(Source::open(Path::new("no-such-folder/nope.xlaprof")), Thresholds::default());
    let screen = render(&missing, 80, 24);
    assert!(screen.contains("cannot show this profile"), "{screen}");
    assert!(screen.contains("nope.xlaprof"), "{screen}");
    snapshot!("error_missing_80x24", screen);

    let dir = dir();
    let garbage = dir.path().join("garbage.xlaprof");
    std::fs::write(&garbage, b"this is not a profile at all").unwrap();
    let screen = render(&App::new(Source::open(&garbage), Thresholds::default()), 80, 24);
    assert!(screen.contains("cannot show this profile"), "{screen}");

    // The first half of a real profile, cut inside a record (a cut that lands on a record
    // boundary is no damage): the views open on what was read, with a warning.
    let whole = recorded();
    let half = dir.path().join("half.xlaprof");
    let app = (whole.len() / 2..whole.len())
        .find_map(|cut| {
            std::fs::write(&half, &whole[..cut]).unwrap();
            let app = App::new(Source::open(&half), Thresholds::default());
            (!app.source.profile.warnings.is_empty()).then_some(app)
        })
        .expect("a cut inside a record is damage");
    let screen = render(&app, 100, 24);
    assert!(screen.contains("⚠ 1 warning"), "{screen}");
    assert!(screen.contains("steps"), "{screen}");
}

#[test]
fn following_a_growing_file_shows_new_steps() {
    let whole = recorded();
    let dir = dir();
    let growing = dir.path().join("growing.xlaprof");
    let cut = whole.len() / 3;
    std::fs::write(&growing, &whole[..cut]).unwrap();
    let mut app = App::new(Source::follow(&growing), Thresholds::default());
    let before = app.model.analysis.steps.len();
    assert!(app.source.profile.warnings.is_empty(), "an unfinished record is not damage");
    std::fs::write(&growing, whole).unwrap();
    let start = std::time::Instant::now();
    let mut redrawn = false;
    while app.model.analysis.steps.len() < 6 {
        assert!(start.elapsed().as_secs() < 10, "the new steps never showed");
        std::thread::sleep(std::time::Duration::from_millis(20));
        redrawn |= app.tick();
    }
    assert!(redrawn, "new records redraw");
    assert!(before < 6);
}

/// The golden torch.compile profile (a real run: a print in `forward`, a batch that shrinks):
/// its compiles in the overview, its findings at the program's lines, its captured graphs in
/// the graphs view and its compiles and runs on the timeline.
#[test]
fn a_torch_compile_program_shows_its_compiles_breaks_and_graphs() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler/tests/data/profile-torch-compile.xlaprof");
    let mut app = App::new(Source::open(&golden), Thresholds::default());
    let screen = render(&app, 140, 40);
    assert!(screen.contains("torch.compile 6 compiles of 2 functions"), "{screen}");
    assert!(screen.contains("graph break"), "{screen}");
    assert!(screen.contains("torch_compile.py:18"), "the print's line: {screen}");
    app.tab = Tab::Graphs;
    let screen = render(&app, 140, 40);
    assert!(screen.contains("torch_compile.py:16"), "graphs at `forward`: {screen}");
    app.tab = Tab::Timeline;
    let screen = render(&app, 140, 40);
    assert!(screen.contains("syncs"), "{screen}");
}

#[test]
fn the_lines_view_shows_what_each_line_of_the_program_made_the_engine_do() {
    let mut app = app();
    key(&mut app, KeyCode::Char('6'));
    assert_eq!(app.tab, Tab::Lines);
    let screen = render(&app, 140, 40);
    assert!(screen.contains("Lines: what the engine did"), "{screen}");
    // The test program's lines: one recorded the step's ops, one forced every sync.
    let rows = &app.model.analysis.lines;
    assert!(rows.iter().any(|l| l.file.ends_with("tests.rs") && l.ops > 0), "{rows:?}");
    assert!(rows.iter().any(|l| l.syncs >= 6), "{rows:?}");
    assert!(screen.contains("src/tui/tests.rs:"), "{screen}");
}

#[test]
fn a_torch_xla_program_runs_through_the_layer_and_only_python_is_taken() {
    let command = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let rewritten =
        super::with_torch_xla(command(&[".venv/bin/python3", "train.py", "--fake_data"])).unwrap();
    assert_eq!(
        rewritten,
        command(&[".venv/bin/python3", "-m", "xlaprof.torch_xla", "train.py", "--fake_data"])
    );
    let refused = super::with_torch_xla(command(&["torchrun", "train.py"])).unwrap_err();
    assert!(refused.to_string().contains("--torch-xla runs a Python program"), "{refused}");
}

/// A rank's profile file (the GUI's tests open it too): `world` ranks, five all-reduces at line 20 (rank 1 entering each 30 ms
/// after the others, its loader's wait at line 10 just before), and a last one at line 30 that
/// only the ranks but `skip` enter.
pub(crate) fn rank_file(rank: u32, world: u32, skip: u32) -> Vec<u8> {
    use xlaprof_profiler::file;
    use xlaprof_profiler::record::{Location, Meta, Record};
    const MS: u64 = 1_000_000;
    let mut records = vec![Record::Meta(Meta {
        program: "train.py".into(),
        start_unix_ms: 1_000,
        ..Meta::default()
    })];
    for (id, line) in [(0u32, 10u32), (1, 20), (2, 30)] {
        let location = Location { file: "train.py".into(), line, function: "main".into() };
        records.push(Record::Location { id, location });
    }
    records.push(Record::JobRank { rank, world });
    let group = || "world".to_string();
    for seq in 1..=5u64 {
        let start = seq * 100 * MS;
        let enter = start + if rank == 1 { 30 * MS } else { 0 };
        if rank == 1 {
            records.push(Record::DataWait { t: enter, location: 0, dur: 30 * MS });
        }
        let op = "all_reduce".to_string();
        records.push(Record::CollectiveEnter {
            t: enter,
            group: group(),
            seq,
            op,
            bytes: 64,
            location: 1,
        });
        records.push(Record::CollectiveLeave { t: start + 31 * MS, group: group(), seq });
    }
    if rank != skip {
        let op = "all_reduce".to_string();
        records.push(Record::CollectiveEnter {
            t: 600 * MS,
            group: group(),
            seq: 6,
            op,
            bytes: 64,
            location: 2,
        });
    }
    let mut bytes = file::header();
    for r in &records {
        bytes.extend(file::frame(r));
    }
    bytes
}

#[test]
fn a_jobs_ranks_open_as_one_with_what_they_show_side_by_side() {
    let dir = dir();
    for rank in 0..3 {
        std::fs::write(dir.path().join(format!("job.rank{rank}.xlaprof")), rank_file(rank, 3, 2))
            .unwrap();
    }
    // `job.xlaprof` itself was never written: its ranks' files beside it are the job.
    let mut app = App::new(Source::open(&dir.path().join("job.xlaprof")), Thresholds::default());
    let screen = render(&app, 160, 30);
    assert!(screen.contains("rank 0 of 3 (r: next)"), "{screen}");
    assert!(screen.contains("job: 3 ranks, 5 collectives in common"), "{screen}");
    assert!(screen.contains("[straggler] rank 1 is the straggler"), "{screen}");
    assert!(
        screen.contains("[stuck in a collective] ranks 0, 1 are stuck in all_reduce #6"),
        "{screen}"
    );
    // The timeline has a lane per rank below the shown rank's own, aligned by the collectives.
    keys(&mut app, "3");
    let timeline = render(&app, 160, 30);
    assert!(
        ["rank 0", "rank 1", "rank 2"].iter().all(|r| timeline.contains(&format!("│{r} "))),
        "{timeline}"
    );
    keys(&mut app, "1");
    // `r` shows the next rank, `R` the one before (wrapping around).
    keys(&mut app, "r");
    assert!(render(&app, 160, 30).contains("rank 1 of 3"));
    assert_eq!(app.model.profile.job.map(|j| j.rank), Some(1));
    keys(&mut app, "RR");
    assert!(render(&app, 160, 30).contains("rank 2 of 3"));
}

#[test]
fn following_a_job_picks_up_each_rank_as_it_starts() {
    let dir = dir();
    let job = dir.path().join("job.xlaprof");
    std::fs::write(dir.path().join("job.rank0.xlaprof"), rank_file(0, 2, 9)).unwrap();
    let mut app = App::new(Source::follow(&job), Thresholds::default());
    assert_eq!(app.source.ranks().len(), 1);
    std::fs::write(dir.path().join("job.rank1.xlaprof"), rank_file(1, 2, 9)).unwrap();
    let started = std::time::Instant::now();
    while app.model.job.is_none() && started.elapsed() < std::time::Duration::from_secs(10) {
        app.tick();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let job = app.model.job.as_ref().expect("the second rank joined the job");
    assert_eq!(job.job.ranks.len(), 2);
    assert_eq!(job.job.matched, 5);
}
