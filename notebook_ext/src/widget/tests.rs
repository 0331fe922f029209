//! The widget drawn from real recordings: what it shows, and that hostile strings stay text.

use std::sync::Mutex;

use xlaprof_core::location::{with_location, ExternalLocation};
use xlaprof_core::{events, Tensor};
use xlaprof_profiler::{analyze, Recording, Thresholds};

use super::*;

/// One recording at a time in a process; tests run in parallel.
static RECORDING: Mutex<()> = Mutex::new(());

const HOSTILE: &str = "<script>alert('x')</script><img src=x onerror=alert(1)>\u{1b}[31m\u{0}";

/// Records two shapes at one hostile line (sizes distinct per test: the compile cache is shared).
fn hostile_profile(sizes: [i64; 2]) -> (Profile, Analysis) {
    let _one = RECORDING.lock().unwrap_or_else(|p| p.into_inner());
    let recording = Recording::start().expect("recording starts");
    let here = ExternalLocation {
        caller: None,
        file: format!("{HOSTILE}.py"),
        line: 7,
        function: format!("</details>{HOSTILE}"),
    };
    with_location(here, || {
        let _scope = events::scope(HOSTILE);
        for n in sizes {
            // Two shapes at one line: a recompile, whose explanation names the hostile file.
            let x = Tensor::from_slice(&vec![1f32; (n * n) as usize], &[n, n]).expect("upload");
            let y = x.matmul(&x).expect("matmul").relu().expect("relu");
            y.sum(&[], false).expect("sum").item().expect("item");
            xlaprof_core::step().expect("step");
        }
    });
    let profile = recording.stop();
    let analysis = analyze(&profile, &Thresholds::default());
    (profile, analysis)
}

#[test]
fn hostile_strings_render_as_text() {
    let (p, a) = hostile_profile([2, 3]);
    let mut options = WidgetOptions { title: HOSTILE.to_string(), ..Default::default() };
    options.source_lines.insert(0, HOSTILE.to_string());
    let html = render(&p, &a, &options);
    // No markup from the profile survives: the only tags are the widget's own.
    assert!(!html.contains("<script"), "a script tag got through");
    assert!(!html.contains("<img"), "an img tag got through");
    assert!(!html.contains("</details><script"), "a closing tag from a name got through");
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(!html.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
    assert!(html.contains("\\x1b[31m"), "control characters are shown escaped");
    // The sections and what they hold.
    for needle in ["Summary", "Diagnostics", "Timeline", "Flamegraph", "Metrics", "Graphs"] {
        assert!(html.contains(needle), "missing section {needle}");
    }
    assert!(html.contains("<svg class=\"xp-flame\""), "the flamegraph is inline");
    assert!(html.contains("class=\"xp-timeline\""), "the timeline is inline");
    assert!(html.contains("CompileTime"), "the metrics table is there");
    assert!(html.contains("recompile"), "the recompile is a finding");
    assert!(html.contains("a recompile"), "the second graph is shown as a recompile");
}

#[test]
fn diagnostics_show_the_source_line_text() {
    let (p, a) = hostile_profile([4, 5]);
    let d = a.diagnostics.first().expect("the shape change is a finding");
    let mut options = WidgetOptions::default();
    options.source_lines.insert(d.location_id, "y = x @ x  # the line".to_string());
    let html = render(&p, &a, &options);
    assert!(html.contains("<code class=\"xp-src\">y = x @ x  # the line</code>"));
}

#[test]
fn diagnostics_show_what_to_change_in_the_users_line() {
    let (p, mut a) = hostile_profile([4, 5]);
    a.diagnostics[0].fix = Some(xlaprof_profiler::diagnostics::CodeFix {
        at: "train.py:12".into(),
        before: "    total += loss.item()  # <b>".into(),
        after: "    total += loss.detach()".into(),
    });
    let html = render(&p, &a, &WidgetOptions::default());
    assert!(html.contains("<i>change train.py:12:</i>"), "{html}");
    assert!(html.contains("<pre class=\"xp-fix\">- total += loss.item()  # &lt;b&gt;\n+ total += loss.detach()</pre>"), "{html}");
}

#[test]
fn progress_line_counts() {
    let html = progress_html(3, 4, 1, 0.25);
    assert!(html.contains("3 steps, 4 syncs, 1 compiles, 0.2 s") || html.contains("0.3 s"));
}

#[test]
fn a_partitioned_run_shows_its_devices_lanes_and_sharding() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler/tests/data/profile-spmd.xlaprof");
    let profile = xlaprof_profiler::load(&path).expect("the recorded data-parallel run");
    let analysis = analyze(&profile, &Thresholds::default());
    let html = render(&profile, &analysis, &WidgetOptions::default());
    assert!(html.contains("<summary>Devices (4)</summary>"), "a devices section");
    for device in 0..4 {
        assert!(html.contains(&format!("<tr><td>{device}</td>")), "a row for device {device}");
        assert!(html.contains(&format!(">device {device}</text>")), "a timeline lane for {device}");
    }
    assert!(html.contains("mesh data=4 on devices [0, 1, 2, 3]"), "the graph's sharding table");
    assert!(html.contains("all-reduce f32[784,512] + 6 more"), "its all-reduce");
}
