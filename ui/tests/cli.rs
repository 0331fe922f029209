//! The `xlaprof` command line end to end: the demo records a real profile, and every report
//! format, the diff and the rule check work on it, with clear errors for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn xlaprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xlaprof")).args(args).output().expect("xlaprof starts")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A fresh folder for the test `test`, removed when it ends.
fn dir(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("xlaprof-cli-{test}-")).tempdir().unwrap()
}

/// The demo's profile, recorded once for all tests. Kept as bytes, not as a file: many tests
/// share it, and none knows when the last is done with it.
fn demo_bytes() -> &'static [u8] {
    static PROFILE: OnceLock<Vec<u8>> = OnceLock::new();
    PROFILE.get_or_init(|| {
        let dir = dir("demo");
        let out = dir.path().join("demo.xlaprof");
        let o = xlaprof(&["demo", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains("Findings, by time lost"), "{t}");
        assert!(t.contains("[recompile]") && t.contains("f32[64,784] to f32[40,784]"), "{t}");
        assert!(t.contains("[hidden sync]") && t.contains("ui/src/demo.rs:"), "{t}");
        std::fs::read(&out).unwrap()
    })
}

/// The demo's profile as a file in `dir`, for the commands the test runs.
fn demo_profile(dir: &Path) -> PathBuf {
    let path = dir.join("demo.xlaprof");
    std::fs::write(&path, demo_bytes()).unwrap();
    path
}

#[test]
fn report_prints_summary_findings_and_metrics() {
    let dir = dir("report");
    let o = xlaprof(&["report", demo_profile(dir.path()).to_str().unwrap()]);
    assert!(o.status.success());
    let t = text(&o);
    for want in [
        "xlaprof report:",
        "Findings, by time lost",
        "Metric: CompileTime",
        "Counter: CachedCompile",
        "Percentiles:",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
}

#[test]
fn every_export_format_writes_what_it_says() {
    let d = dir("exports");
    let profile = demo_profile(d.path());
    let profile = profile.to_str().unwrap();
    let json = d.path().join("r.json");
    assert!(xlaprof(&["report", profile, "--format", "json", "-o", json.to_str().unwrap()])
        .status
        .success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["format"], "xlaprof-json");
    let chrome = d.path().join("trace.json");
    assert!(xlaprof(&["report", profile, "--format", "chrome", "-o", chrome.to_str().unwrap()])
        .status
        .success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 50);
    let svg = d.path().join("flame.svg");
    assert!(xlaprof(&["report", profile, "--format", "flamegraph", "-o", svg.to_str().unwrap()])
        .status
        .success());
    assert!(String::from_utf8_lossy(&std::fs::read(&svg).unwrap()).contains("<svg"));
    for (format, ext) in [("csv", "csv"), ("parquet", "parquet")] {
        let out = d.path().join(format);
        assert!(xlaprof(&["report", profile, "--format", format, "-o", out.to_str().unwrap()])
            .status
            .success());
        for table in ["spans", "graphs", "compiles", "executions", "diagnostics"] {
            assert!(out.join(format!("{table}.{ext}")).is_file(), "{format} {table}");
        }
    }
    let o = xlaprof(&["report", profile, "--format", "csv"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("give a folder with -o"), "{}", text(&o));
}

#[test]
fn check_fails_the_build_when_a_rule_fails() {
    let dir = dir("check");
    let profile = demo_profile(dir.path());
    let profile = profile.to_str().unwrap();
    let o =
        xlaprof(&["check", profile, "--rule", "max-hidden-syncs=0", "--rule", "max-compiles=100"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("FAIL") && t.contains("hidden syncs") && t.contains("ui/src/demo.rs:"),
        "{t}"
    );
    assert!(t.contains("pass"), "{t}");
    let o = xlaprof(&["check", profile, "--rule", "max-compiles=100"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = xlaprof(&["check", profile, "--rule", "fastest-ever=1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("unknown rule; the rules are: no-compiles-after-step=N"),
        "{}",
        text(&o)
    );
}

#[test]
fn diff_compares_two_runs_metric_by_metric() {
    let dir = dir("diff");
    let profile = demo_profile(dir.path());
    let profile = profile.to_str().unwrap();
    let o = xlaprof(&["diff", profile, profile]);
    assert!(o.status.success());
    let t = text(&o);
    assert!(t.contains("CompileTime") && t.contains("+0.0%"), "{t}");
}

#[test]
fn bad_files_are_clear_errors_and_damaged_ones_open_with_a_warning() {
    let o = xlaprof(&["report", "/nonexistent/run.xlaprof"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("/nonexistent/run.xlaprof"), "{}", text(&o));
    let bytes = demo_bytes();
    let dir = dir("bad-files");
    let cut = dir.path().join("cut.xlaprof");
    // One byte short: always inside the last record (a cut further back can land on a boundary).
    std::fs::write(&cut, &bytes[..bytes.len() - 1]).unwrap();
    let o = xlaprof(&["report", cut.to_str().unwrap(), "--format", "short"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("warning: the file ends in the middle of a record"), "{t}");
    assert!(t.contains("xlaprof report:"), "{t}");
    let junk = dir.path().join("junk.xlaprof");
    std::fs::write(&junk, b"certainly not a profile").unwrap();
    let o = xlaprof(&["report", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not an xlaprof profile"), "{}", text(&o));
}

/// `bench --json` prints one JSON object with every figure; JAX's peers that cannot run leave
/// their figures null with a warning, never a failed bench.
#[test]
fn bench_prints_its_figures_as_json() {
    let dir = dir("bench");
    let missing = dir.path().join("no-peers-here");
    let o = xlaprof(&[
        "bench",
        "--json",
        "--reps",
        "2",
        "--steps",
        "6",
        "--jax-peers",
        missing.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    for key in [
        "trace_ns_per_op",
        "sync_overhead_us",
        "sync_total_us",
        "execute_us",
        "chain_execute_us",
        "mlp_step_ms",
        "mlp_first_step_ms",
        "cold_start_ms",
        "warm_start_ms",
    ] {
        let x = v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"));
        assert!(x > 0.0, "{key} = {x}");
    }
    assert_eq!(v["execute_us"], v["chain_execute_us"]);
    for key in [
        "jax_chain_execute_us",
        "jax_chain_execute_after_host_us",
        "jax_mlp_step_ms",
        "jax_cold_start_ms",
        "jax_warm_start_ms",
        "chain_execute_ratio",
        "chain_execute_ratio_back_to_back",
        "mlp_step_ratio",
        "warm_start_ratio",
    ] {
        assert!(v[key].is_null(), "{key} should be null without JAX: {v}");
    }
    assert!(String::from_utf8_lossy(&o.stderr).contains("JAX's figures are left out"));
}

#[test]
fn report_merges_the_profiles_of_several_processes() {
    let dir = dir("merge");
    let demo = demo_profile(dir.path());
    let demo = demo.to_str().unwrap();
    let spmd =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data/profile-spmd.xlaprof");
    let spmd = spmd.to_str().unwrap();
    let o = xlaprof(&["report", demo, spmd]);
    assert!(!o.status.success());
    assert!(text(&o).contains("give --merge"), "{}", text(&o));
    let o = xlaprof(&["report", demo, spmd, "--merge"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("merged report: 2 processes") && t.contains("== process 1"), "{t}");
    let out = dir.path().join("merged.json");
    let o = xlaprof(&[
        "report",
        demo,
        spmd,
        "--merge",
        "--format",
        "chrome",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let names: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[1].starts_with("process 1: mlp_train 3 --data-parallel 4"), "{names:?}");
    let o = xlaprof(&["report", demo, spmd, "--merge", "--format", "csv"]);
    assert!(text(&o).contains("--merge writes text or chrome"), "{}", text(&o));
}
