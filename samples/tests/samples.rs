//! Every sample runs as a user would run it, and its output says it did its job.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("the sample starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{bin} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
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
    assert!(
        acc > 50.0,
        "accuracy {acc}% should clearly beat chance:\n{out}"
    );
    assert!(out.contains("training graphs compiled: 1"), "{out}");
    // The last step line: 25 steps, 1 compile, 24 hits.
    let last = out
        .lines()
        .find(|l| l.trim_start().starts_with("25 "))
        .expect("step 25");
    let cols: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(&cols[2..], &["1", "24"], "{last}");
}
