//! How the sample tests run a sample: as a user would, from its binary.

use std::process::Command;

/// Runs `command` (the sample `bin`, its arguments and environment set) and returns what it
/// printed; fails the test with both of its outputs when the sample fails.
pub fn stdout_of(bin: &str, command: &mut Command) -> String {
    let out = command.output().expect("the sample starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{bin} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
