//! The profile file format: golden files of every version still load, damaged files load partly
//! with a clear account of what was lost, and no input makes the reader panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use xlaprof_profiler::{file, load, Error, Profile};

fn golden(version: u16) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/profile-v{version}.xlaprof"))
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
    let path = std::env::temp_dir().join(format!("xlaprof-follow-{}.xlaprof", std::process::id()));
    std::fs::write(&path, &bytes[..5]).unwrap(); // not even a whole header yet
    let mut follower = file::Follower::open(&path).unwrap();
    let mut total = 0;
    total += follower.poll().unwrap().records.len();
    for end in [bytes.len() / 3, bytes.len() / 2, bytes.len()] {
        std::fs::write(&path, &bytes[..end]).unwrap();
        total += follower.poll().unwrap().records.len();
    }
    assert_eq!(total as u64, from_bytes(&bytes).unwrap().records);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_follower_checks_a_header_that_arrives_late() {
    let path =
        std::env::temp_dir().join(format!("xlaprof-follow-late-{}.xlaprof", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let mut follower = file::Follower::open(&path).unwrap();
    let mut newer = file::header();
    newer[8] = 99;
    std::fs::write(&path, &newer).unwrap();
    let err = follower.poll().unwrap_err();
    assert!(err.to_string().contains("newer xlaprof"), "{err}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_follower_names_damage_by_its_place_in_the_file() {
    let mut bytes = std::fs::read(golden(1)).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff; // the last record's checksum fails
    let expected = file::decode(&bytes).unwrap().warnings;
    assert_eq!(expected.len(), 1, "{expected:?}");
    let path =
        std::env::temp_dir().join(format!("xlaprof-follow-damage-{}.xlaprof", std::process::id()));
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let mut follower = file::Follower::open(&path).unwrap();
    let mut warnings = follower.poll().unwrap().warnings;
    std::fs::write(&path, &bytes).unwrap();
    warnings.extend(follower.poll().unwrap().warnings);
    assert_eq!(warnings, expected);
    let _ = std::fs::remove_file(&path);
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
