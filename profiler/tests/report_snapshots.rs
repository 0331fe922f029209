//! The text reports of the golden profile, as snapshots (the golden file is fixed, so nothing in
//! them varies between runs: no redaction needed).

use std::path::Path;

use xlaprof_profiler::{analyze, load, report, Thresholds};

fn golden_analysis() -> xlaprof_profiler::Analysis {
    let p =
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/profile-v1.xlaprof")).unwrap();
    analyze(&p, &Thresholds::default())
}

#[test]
fn full_report() {
    insta::assert_snapshot!(report::text(&golden_analysis()));
}

#[test]
fn short_report() {
    insta::assert_snapshot!(report::short(&golden_analysis()));
}

#[test]
fn diff_of_a_profile_with_itself_shows_no_change() {
    let a = golden_analysis();
    let text = report::diff(&a, &a);
    assert!(
        !text.contains('%') || text.lines().all(|l| !l.contains('%') || l.contains("+0.0%")),
        "{text}"
    );
    insta::assert_snapshot!(text);
}
