//! The profile file format: golden files of every version still load, damaged files load partly
//! with a clear account of what was lost, and no input makes the reader panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use xlaprof_core::events::{self, Counters};
use xlaprof_profiler::metrics::engine_counter;
use xlaprof_profiler::record::{Meta, Record};
use xlaprof_profiler::recorder::{counter_names, counter_values};
use xlaprof_profiler::{file, load, Error, Profile, Recording};

fn golden(version: u16) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/profile-v{version}.xlaprof"))
}

/// A fresh file for a profile, removed when the test ends, passed or failed.
fn scratch(name: &str) -> tempfile::TempPath {
    let prefix = format!("xlaprof-{name}-");
    let file = tempfile::Builder::new().prefix(&prefix).suffix(".xlaprof").tempfile().unwrap();
    file.into_temp_path()
}

fn from_bytes(bytes: &[u8]) -> Result<Profile, Error> {
    let decoded = file::decode(bytes)?;
    let mut p = Profile::from_records(decoded.records);
    p.warnings.extend(decoded.warnings);
    Ok(p)
}

#[test]
fn the_version_1_golden_file_loads_whole() {
    let p = golden_loads_whole(1);
    // Version 1 wrote nodes as text: they read back as nodes, without attributes.
    let nodes = p.graphs.values().flat_map(|g| &g.def.node_defs);
    assert!(nodes.clone().any(|n| n.op == "dot_general" && n.inputs.len() == 2));
    assert!(nodes.clone().all(|n| n.attrs.is_empty()));
}

#[test]
fn the_version_2_golden_file_loads_whole_with_typed_nodes() {
    let p = golden_loads_whole(2);
    let dot = p
        .graphs
        .values()
        .flat_map(|g| &g.def.node_defs)
        .find(|n| n.op == "dot_general")
        .expect("the linear layer's matmul");
    let names: Vec<&str> = dot.attrs.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract"]);
    assert!(dot.hash != 0 && dot.inputs.len() == 2);
}

#[test]
fn the_version_1_golden_file_reads_its_counters_by_name() {
    let p = golden_loads_whole(1);
    let last = &p.counters.last().unwrap().1;
    let first = p.start_counters();
    let names: Vec<&str> = last.iter().map(|(name, _)| name).collect();
    assert_eq!(names.len(), 13, "{names:?}");
    assert!(names.contains(&"tensors_created") && names.contains(&"value_reads"));
    let syncs = |c: &xlaprof_profiler::profile::Counters| c.get("syncs").unwrap();
    assert_eq!(syncs(last) - syncs(&first), p.syncs.len() as u64);
}

/// Every counter the engine has reaches a profile under its own name, through a file and back:
/// the one conversion (`counter_names`, `counter_values`) is driven by `Counters::named`.
#[test]
fn every_engine_counter_survives_into_a_saved_profile() {
    // Some work first, so that the counters are not all zero.
    let x = xlaprof_core::Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let _ = x.add(&x).unwrap().to_vec::<f32>();
    let engine = events::counters();
    let meta = Meta {
        counter_names: counter_names(&engine),
        counters: counter_values(&engine),
        ..Meta::default()
    };
    let sync_end = Record::SyncEnd { t: 5, sync: 1, dur: 5, counters: counter_values(&engine) };
    let mut bytes = file::header();
    bytes.extend(file::frame(&Record::Meta(meta)));
    bytes.extend(file::frame(&sync_end));
    let path = scratch("counters");
    std::fs::write(&path, &bytes).unwrap();
    let p = load(&path).unwrap();
    let named = engine.named();
    assert!(named.iter().any(|&(_, v)| v > 0), "{named:?}");
    let read: Vec<(&str, u64)> = p.counters[0].1.iter().collect();
    assert_eq!(read, named);
    let start: Vec<(String, u64)> =
        p.start_counters().iter().map(|(n, v)| (n.to_string(), v)).collect();
    assert_eq!(start, named.iter().map(|&(n, v)| (n.to_string(), v)).collect::<Vec<_>>());
    // And in the JSON export, by name.
    let a = xlaprof_profiler::analyze(&p, &Default::default());
    let json = xlaprof_profiler::export::to_bytes(&p, &a, xlaprof_profiler::export::Format::Json);
    let v: serde_json::Value = serde_json::from_slice(&json.unwrap()).unwrap();
    for (name, value) in named {
        assert_eq!(v["profile"]["counters"][0][1][name], value, "{name}");
    }
}

/// A recording writes the engine's counters as they are, and reads them back the same.
#[test]
fn a_recording_keeps_every_counter_of_every_sync() {
    let path = scratch("recorded-counters");
    let recording = Recording::to_file(&path).unwrap();
    let x = xlaprof_core::Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let _ = x.mul(&x).unwrap().to_vec::<f32>();
    let live = recording.stop();
    let p = load(&path).unwrap();
    let names: Vec<&str> = Counters::default().named().into_iter().map(|(n, _)| n).collect();
    assert!(!p.counters.is_empty());
    for (_, c) in &p.counters {
        assert_eq!(c.iter().map(|(n, _)| n).collect::<Vec<_>>(), names);
    }
    assert_eq!(p.counters, live.counters);
    assert_eq!(p.start_counters(), live.start_counters());
}

/// The counters the profiler reads are the engine's: a renamed counter fails here, not silently
/// as a zero in every report.
#[test]
fn the_counters_the_profiler_reads_are_named_by_the_engine() {
    let names: Vec<&str> = Counters::default().named().into_iter().map(|(n, _)| n).collect();
    for name in engine_counter::ALL {
        assert!(names.contains(&name), "{name} is not among {names:?}");
    }
}

fn golden_loads_whole(version: u16) -> Profile {
    let p = load(&golden(version)).unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.steps.len(), 5);
    assert_eq!(p.syncs.len(), 6, "five step syncs and one value read");
    assert_eq!(p.scopes.len(), 5);
    assert!(p.scopes.iter().all(|s| s.name == "train_step" && s.end_ns.is_some()));
    assert_eq!(p.value_reads.len(), 1);
    // Batch 4; the loss read mid-step; that step's graph without the loss (now data); batch 6.
    assert_eq!(p.graphs.len(), 4);
    assert_eq!(p.compiles.len(), 4);
    assert_eq!(p.executions.len(), 6);
    assert!(p
        .graphs
        .values()
        .all(|g| g.stablehlo.as_deref().is_some_and(|t| t.contains("func.func @main"))));
    assert!(p.meta.platform.starts_with("cpu"));
    p
}

#[test]
fn a_truncated_file_keeps_every_complete_record_and_says_what_was_lost() {
    let bytes = std::fs::read(golden(1)).unwrap();
    let whole = from_bytes(&bytes).unwrap();
    let cut = bytes.len() * 2 / 3;
    let p = from_bytes(&bytes[..cut]).unwrap();
    assert!(p.records < whole.records);
    assert!(p.records > 0);
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].contains("ends in the middle of a record"), "{}", p.warnings[0]);
}

#[test]
fn a_corrupt_record_is_skipped_and_the_rest_is_read() {
    let mut bytes = std::fs::read(golden(1)).unwrap();
    let whole = from_bytes(&bytes).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5A;
    let p = from_bytes(&bytes).unwrap();
    assert!(p.warnings.iter().any(|w| w.contains("corrupt")), "{:?}", p.warnings);
    assert!(p.records >= whole.records - 1, "only the damaged record is lost");
}

#[test]
fn other_files_are_clear_errors() {
    assert!(matches!(from_bytes(b"hello world, not a profile"), Err(Error::NotAProfile)));
    let mut newer = file::header();
    newer[8] = 99;
    let err = from_bytes(&newer).unwrap_err();
    assert!(matches!(err, Error::NewerFormat { version: 99, .. }), "{err}");
    assert!(err.to_string().contains("newer xlaprof"));
    let missing = load(Path::new("/nonexistent/profile.xlaprof")).unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/profile.xlaprof"));
}

#[test]
fn every_truncation_point_loads_without_panicking() {
    let bytes = std::fs::read(golden(1)).unwrap();
    let mut last = 0;
    for cut in (12..bytes.len()).step_by(97) {
        let p = from_bytes(&bytes[..cut]).unwrap();
        assert!(p.records >= last, "a longer prefix never reads fewer records");
        last = p.records;
    }
}

#[test]
fn a_follower_sees_records_as_they_are_appended() {
    let bytes = std::fs::read(golden(1)).unwrap();
    let path = scratch("follow");
    std::fs::write(&path, &bytes[..5]).unwrap(); // not even a whole header yet
    let mut follower = file::Follower::open(&path).unwrap();
    let mut total = 0;
    total += follower.poll().unwrap().records.len();
    for end in [bytes.len() / 3, bytes.len() / 2, bytes.len()] {
        std::fs::write(&path, &bytes[..end]).unwrap();
        total += follower.poll().unwrap().records.len();
    }
    assert_eq!(total as u64, from_bytes(&bytes).unwrap().records);
}

#[test]
fn a_follower_checks_a_header_that_arrives_late() {
    let path = scratch("follow-late");
    std::fs::write(&path, b"").unwrap();
    let mut follower = file::Follower::open(&path).unwrap();
    let mut newer = file::header();
    newer[8] = 99;
    std::fs::write(&path, &newer).unwrap();
    let err = follower.poll().unwrap_err();
    assert!(err.to_string().contains("newer xlaprof"), "{err}");
}

#[test]
fn a_follower_names_damage_by_its_place_in_the_file() {
    let mut bytes = std::fs::read(golden(1)).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff; // the last record's checksum fails
    let expected = file::decode(&bytes).unwrap().warnings;
    assert_eq!(expected.len(), 1, "{expected:?}");
    let path = scratch("follow-damage");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let mut follower = file::Follower::open(&path).unwrap();
    let mut warnings = follower.poll().unwrap().warnings;
    std::fs::write(&path, &bytes).unwrap();
    warnings.extend(follower.poll().unwrap().warnings);
    assert_eq!(warnings, expected);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut bytes = file::header();
        bytes.extend_from_slice(&body);
        let _ = from_bytes(&bytes);
        let _ = from_bytes(&body);
    }

    #[test]
    fn random_damage_to_the_golden_file_never_panics(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = std::fs::read(golden(1)).unwrap();
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        let _ = from_bytes(&bytes);
    }
}

#[test]
fn a_second_writer_of_one_file_writes_beside_it_and_leaves_the_first_whole() {
    // Two processes given one XLAPROF_PROFILE once interleaved their records ("the file ends in
    // the middle of a record"): the file's lock sends the second beside it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.xlaprof");
    let records = || file::decode(&std::fs::read(golden(2)).unwrap()).unwrap().records;
    let mut first = file::Writer::create(&path).unwrap();
    let mut second = file::Writer::create(&path).unwrap();
    assert_eq!(first.path(), path);
    assert_eq!(second.path(), dir.path().join(format!("job.{}.xlaprof", std::process::id())));
    for (a, b) in records().iter().zip(records().iter()) {
        first.append(a).unwrap();
        second.append(b).unwrap();
    }
    drop((first, second));
    let whole = golden_loads_whole(2);
    for written in [path.clone(), dir.path().join(format!("job.{}.xlaprof", std::process::id()))] {
        let p = load(&written).unwrap();
        assert!(p.warnings.is_empty(), "{written:?}: {:?}", p.warnings);
        assert_eq!(p.records, whole.records);
    }
    // Once the first is done, its file is free to write again.
    assert_eq!(file::Writer::create(&path).unwrap().path(), path);
}
