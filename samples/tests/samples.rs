//! Every sample runs as a user would run it, and its output says it did its job.

mod common;

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    run_with(bin, args, &[])
}

fn run_with(bin: &str, args: &[&str], env: &[(&str, &std::path::Path)]) -> String {
    common::stdout_of(bin, Command::new(bin).args(args).envs(env.iter().copied()))
}

#[test]
fn mlp_train_learns_and_compiles_one_training_graph() {
    let out = run(env!("CARGO_BIN_EXE_mlp_train"), &["25"]);
    let acc: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("held-out accuracy "))
        .and_then(|l| l.split('%').next())
        .and_then(|v| v.parse().ok())
        .expect("accuracy line");
    assert!(acc > 50.0, "accuracy {acc}% should clearly beat chance:\n{out}");
    assert!(out.contains("training graphs compiled: 1"), "{out}");
    // The last step line: 25 steps, 1 compile, 24 hits.
    let last = out.lines().find(|l| l.trim_start().starts_with("25 ")).expect("step 25");
    let cols: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(&cols[2..], &["1", "24"], "{last}");
}

#[test]
fn a_second_process_loads_compiled_graphs_from_the_persistent_cache() {
    let dir = std::env::temp_dir().join(format!("xlaprof-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let env = [("XLAPROF_CACHE_DIR", dir.as_path())];
    let bin = env!("CARGO_BIN_EXE_mlp_train");

    let first = run_with(bin, &["3"], &env);
    assert!(first.contains("persistent compile cache: 0 loaded, 2 compiled"), "{first}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the cache directory is private");

    let second = run_with(bin, &["3"], &env);
    assert!(second.contains("persistent compile cache: 2 loaded, 0 compiled"), "{second}");
    assert!(second.contains("training graphs compiled: 1"), "{second}");

    // Corrupt every entry: each is detected, removed and compiled again, and the run succeeds.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 0xFF;
        bytes.truncate(n - 7);
        std::fs::write(&path, bytes).unwrap();
    }
    let third = run_with(bin, &["3"], &env);
    assert!(third.contains("persistent compile cache: 0 loaded, 2 compiled"), "{third}");
    let fourth = run_with(bin, &["3"], &env);
    assert!(fourth.contains("persistent compile cache: 2 loaded, 0 compiled"), "{fourth}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn xlaprof_profile_records_a_sample_from_its_start_and_the_profiler_explains_its_recompiles() {
    let file =
        std::env::temp_dir().join(format!("xlaprof-recompile-demo-{}.xlaprof", std::process::id()));
    let out = run_with(
        env!("CARGO_BIN_EXE_recompile_demo"),
        &["14"],
        &[("XLAPROF_PROFILE", file.as_path())],
    );
    assert!(out.contains("distinct signatures"), "{out}");
    let profile = xlaprof_profiler::load(&file).unwrap();
    assert!(profile.warnings.is_empty(), "{:?}", profile.warnings);
    assert_eq!(profile.steps.len(), 14);
    let analysis = xlaprof_profiler::analyze(&profile, &xlaprof_profiler::Thresholds::default());
    // Fourteen steps of changing shapes are a storm: one finding that sums the recompiles and
    // explains each one.
    use xlaprof_profiler::diagnostics::Kind;
    let recompile = analysis
        .diagnostics
        .iter()
        .find(|d| matches!(d.kind, Kind::Recompile | Kind::RecompileStorm))
        .expect("the recompiles are explained");
    assert!(
        recompile.location.starts_with("samples/src/bin/recompile_demo.rs:"),
        "{}",
        recompile.location
    );
    assert!(
        recompile.instances.iter().any(|i| i.message.contains("changed from")),
        "{:#?}",
        recompile.instances
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn xlaprof_optimized_hlo_keeps_xlas_optimized_program_in_the_profile() {
    let file = std::env::temp_dir().join(format!("xlaprof-hlo-{}.xlaprof", std::process::id()));
    let one = std::path::Path::new("1");
    run_with(
        env!("CARGO_BIN_EXE_mlp_train"),
        &["2"],
        &[("XLAPROF_PROFILE", file.as_path()), ("XLAPROF_OPTIMIZED_HLO", one)],
    );
    let profile = xlaprof_profiler::load(&file).unwrap();
    assert!(!profile.graphs.is_empty());
    for g in profile.graphs.values() {
        let hlo = g.optimized_hlo.as_deref().expect("optimized HLO recorded");
        assert!(hlo.contains("HloModule") && hlo.contains("ENTRY"), "{hlo}");
    }
    let _ = std::fs::remove_file(&file);
}

/// Two processes of one job (here two trainings started together, as two hosts would be), each
/// recording its own profile, merged onto one timeline: a process each, placed by when it
/// started, and the report compares their steps. (The CPU plugin cannot join processes in one
/// collective, so they train apart: see ARCHITECTURE.md, "Past one machine".)
#[test]
fn the_profiles_of_two_processes_merge_onto_one_timeline() {
    let dir = std::env::temp_dir().join(format!("xlaprof-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = env!("CARGO_BIN_EXE_mlp_train");
    let files: Vec<std::path::PathBuf> =
        (0..2).map(|i| dir.join(format!("p{i}.xlaprof"))).collect();
    let children: Vec<std::process::Child> = files
        .iter()
        .map(|f| {
            Command::new(bin)
                .arg("3")
                .env("XLAPROF_PROFILE", f)
                .env_remove("XLAPROF_CACHE_DIR")
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let profiles: Vec<xlaprof_profiler::Profile> =
        files.iter().map(|f| xlaprof_profiler::load(f).unwrap()).collect();
    let t = xlaprof_profiler::Thresholds::default();
    let analyses: Vec<_> = profiles.iter().map(|p| xlaprof_profiler::analyze(p, &t)).collect();
    let runs: Vec<_> = profiles.iter().zip(&analyses).collect();
    let processes = xlaprof_profiler::merge::place(&runs);
    assert!(processes.iter().any(|p| p.offset_ns == 0), "times count from the first to start");
    let text = xlaprof_profiler::merge::text(&processes);
    assert!(text.contains("merged report: 2 processes"), "{text}");
    assert!(text.contains("steps 1..3: the processes end each step a median"), "{text}");
    let placed: Vec<_> = processes.iter().map(|p| (p.profile, p.offset_ns)).collect();
    let mut trace = Vec::new();
    xlaprof_profiler::export::chrome::write_processes(&placed, &mut trace).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&trace).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    for (pid, p) in profiles.iter().enumerate() {
        let name = format!("process {pid}: mlp_train 3 (pid {})", p.meta.pid);
        assert!(events.iter().any(|e| e["args"]["name"] == name.as_str()), "{name}");
        let steps =
            events.iter().filter(|e| e["pid"] == pid as u64 + 1 && e["cat"] == "step").count();
        assert_eq!(steps, 3, "process {pid}'s three steps on its own track group");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
