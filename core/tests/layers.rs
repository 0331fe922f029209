//! The engine's pipeline folders depend one way, in the order data flows: `runtime`, `ir`,
//! `trace`, `lower`, `exec`. Each may use the ones before it and the shared modules (dtypes,
//! shapes, locations, errors, events, settings, meshes and shardings), never a later one, and none uses the tensor API
//! built above them (`tensor`, `ops`, `autograd`, `nn`).

use std::collections::BTreeSet;
use std::path::Path;

const PIPELINE: [&str; 5] = ["runtime", "ir", "trace", "lower", "exec"];
const SHARED: [&str; 9] =
    ["dtype", "shape", "location", "error", "events", "config", "debug", "lib", "spmd"];

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
                // Modules only: `crate::Error` and the like are items of the root.
                if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                    found.insert(name);
                }
            }
        }
    }
}

#[test]
fn pipeline_folders_depend_only_on_earlier_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (at, folder) in PIPELINE.iter().enumerate() {
        let mut found = BTreeSet::new();
        uses(&src.join(folder), &mut found);
        for name in &found {
            let earlier = PIPELINE[..=at].contains(&name.as_str());
            assert!(
                earlier || SHARED.contains(&name.as_str()),
                "core/src/{folder} uses crate::{name}: the pipeline runs {PIPELINE:?}, and a \
                 folder may use only those before it and the shared modules {SHARED:?}"
            );
        }
    }
}
