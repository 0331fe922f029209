//! The README's table of environment variables lists exactly the variables the code reads.

use std::collections::BTreeSet;

#[test]
fn the_readme_lists_every_environment_variable_and_no_other() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("the workspace README");
    let listed: BTreeSet<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `XLAPROF_"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    let listed: BTreeSet<String> = listed.iter().map(|n| format!("XLAPROF_{n}")).collect();
    let known: BTreeSet<String> =
        xlaprof_core::config::VARS.iter().map(|v| v.name.to_string()).collect();
    assert_eq!(listed, known, "README table vs config::VARS");
}
