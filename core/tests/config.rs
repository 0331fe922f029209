//! The table of environment variables (`docs/environment.md`) lists exactly the variables the
//! code reads.

use std::collections::BTreeSet;

#[test]
fn the_environment_table_lists_every_variable_and_no_other() {
    let table =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/environment.md"))
            .expect("docs/environment.md");
    let listed: BTreeSet<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `XLAPROF_"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    let listed: BTreeSet<String> = listed.iter().map(|n| format!("XLAPROF_{n}")).collect();
    let known: BTreeSet<String> =
        xlaprof_core::config::VARS.iter().map(|v| v.name.to_string()).collect();
    assert_eq!(listed, known, "docs/environment.md vs config::VARS");
}
