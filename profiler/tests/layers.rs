//! The profiler's folders depend one way, in the order data flows: `record` (the records and the
//! file format), `profile` (the profile built from records, and the recorder that makes them),
//! `analysis` (metrics, timeline, devices, diagnostics, views, job), `output` (report, exports,
//! merge). Each may use the ones before it and the shared leaves (`error`, `util`), never a later
//! one. The root re-exports modules by their short names (`crate::metrics`): each is counted in
//! the folder it lives in.

use std::collections::BTreeSet;
use std::path::Path;

const LAYERS: [(&str, &[&str]); 4] = [
    ("record", &["record", "file"]),
    ("profile", &["profile", "recorder", "variables"]),
    (
        "analysis",
        &[
            "analysis",
            "metrics",
            "timeline",
            "devices",
            "diagnostics",
            "views",
            "analyze",
            "breaks",
            "job",
        ],
    ),
    ("output", &["output", "report", "export", "merge"]),
];
const SHARED: [&str; 2] = ["error", "util"];

fn uses(folder: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(folder).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            uses(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            for (i, _) in text.match_indices("crate::") {
                let name: String = text[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // Modules only: `crate::Profile` and the like are items of the root.
                if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                    found.insert(name);
                }
            }
        }
    }
}

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, names)| names.contains(&name))
}

#[test]
fn folders_depend_only_on_earlier_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (at, (folder, _)) in LAYERS.iter().enumerate() {
        let mut found = BTreeSet::new();
        uses(&src.join(folder), &mut found);
        for name in &found {
            if SHARED.contains(&name.as_str()) {
                continue;
            }
            let layer = layer_of(name).unwrap_or_else(|| {
                panic!("profiler/src/{folder} uses crate::{name}, which no layer lists: add it to LAYERS or SHARED")
            });
            assert!(
                layer <= at,
                "profiler/src/{folder} uses crate::{name} (of {}): the folders run {:?}, and a folder \
                 may use only those before it and {SHARED:?}",
                LAYERS[layer].0,
                LAYERS.map(|l| l.0)
            );
        }
    }
}

#[test]
fn every_source_file_is_in_a_layer_folder_or_shared() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).expect("src") {
        let path = entry.expect("an entry").path();
        let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let known = LAYERS.iter().any(|(f, _)| *f == name)
            || SHARED.contains(&name.as_str())
            || name == "lib";
        assert!(
            known,
            "profiler/src/{name}: every module is in a layer's folder, or a shared leaf"
        );
    }
}
