//! The training samples run as a user would run them (a few steps each), and their output says
//! they learned and compiled what they should.

mod common;

use std::collections::HashSet;
use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    // Without a persistent compile cache, so every count is about this process alone.
    common::stdout_of(bin, Command::new(bin).args(args).env_remove("XLAPROF_CACHE_DIR"))
}

/// The whitespace-separated columns of the step lines: a step number, then a number.
fn step_rows(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| {
            cols.len() >= 4 && cols[0].parse::<usize>().is_ok() && cols[1].parse::<f64>().is_ok()
        })
        .collect()
}

/// The number after `prefix` on the line that starts with it.
fn number_after(out: &str, prefix: &str) -> f64 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| {
            let n: String =
                rest.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            n.parse().ok()
        })
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}:\n{out}"))
}

#[test]
fn cnn_train_learns_the_shapes_and_compiles_one_training_graph() {
    let out = run(env!("CARGO_BIN_EXE_cnn_train"), &["30"]);
    let acc = number_after(&out, "held-out accuracy");
    assert!(acc > 60.0, "accuracy {acc}% should clearly beat chance (25%):\n{out}");
    assert!(out.contains("training graphs compiled: 1\n"), "{out}");
    let rows = step_rows(&out);
    assert_eq!(rows.len(), 30, "{out}");
    // step, loss, compiles, cache hits: one compile at step 1, then hits.
    assert_eq!(&rows[29][2..], &["1", "29"], "{out}");
}

#[test]
fn transformer_block_loss_falls_and_one_training_graph_compiles() {
    let out = run(env!("CARGO_BIN_EXE_transformer_block"), &["25"]);
    let rows = step_rows(&out);
    assert_eq!(rows.len(), 25, "{out}");
    let losses: Vec<f64> = rows.iter().map(|r| r[1].parse().expect("a loss")).collect();
    assert!(losses.iter().all(|l| l.is_finite()), "{out}");
    let mean = |ls: &[f64]| ls.iter().sum::<f64>() / ls.len() as f64;
    let (first, last) = (mean(&losses[..3]), mean(&losses[22..]));
    assert!(
        last < 0.9 * first,
        "the loss should fall: first steps {first:.4}, last {last:.4}\n{out}"
    );
    assert!(out.contains("loss decreased:"), "{out}");
    assert!(out.contains("training graphs compiled: 1\n"), "{out}");
    assert_eq!(&rows[24][2..], &["1", "24"], "{out}");
}

/// The losses of a run's step lines.
fn losses(out: &str) -> Vec<f64> {
    step_rows(out).iter().map(|r| r[1].parse().expect("a loss")).collect()
}

/// Each sample trained with its batch split over 4 devices, then with its parameters split too
/// (FSDP), has the one-device run's losses (printed to 4 decimals) and compiles one training graph.
#[test]
fn data_parallel_and_fsdp_training_match_the_one_device_run() {
    for bin in [env!("CARGO_BIN_EXE_mlp_train"), env!("CARGO_BIN_EXE_transformer_block")] {
        let one = losses(&run(bin, &["6"]));
        assert_eq!(one.len(), 6);
        for extra in [&["--data-parallel", "4"][..], &["--data-parallel", "4", "--fsdp"]] {
            let args: Vec<&str> = ["6"].iter().chain(extra).copied().collect();
            let out = run(bin, &args);
            assert!(out.contains("4 devices"), "{out}");
            assert!(out.contains("training graphs compiled: 1\n"), "{bin} {extra:?}:\n{out}");
            let many = losses(&out);
            assert_eq!(many.len(), 6, "{out}");
            for (step, (a, b)) in many.iter().zip(&one).enumerate() {
                assert!((a - b).abs() <= 2e-4, "{bin} {extra:?} step {}: {a} vs {b}", step + 1);
            }
        }
    }
}

#[test]
fn recompile_demo_compiles_once_per_signature_and_hits_on_repeats() {
    let out = run(env!("CARGO_BIN_EXE_recompile_demo"), &["14"]);
    let rows = step_rows(&out);
    assert_eq!(rows.len(), 14, "{out}");
    let mut seen = HashSet::new();
    for row in &rows {
        // step, batch, dtype, graph, ...
        let signature = (row[1], row[2]);
        let expected = if seen.insert(signature) { "compile" } else { "hit" };
        assert_eq!(row[3], expected, "step {} with signature {signature:?}:\n{out}", row[0]);
    }
    let dtypes: HashSet<&str> = seen.iter().map(|s| s.1).collect();
    assert!(dtypes.contains("f32") && dtypes.contains("f64"), "{out}");
    assert!(seen.len() >= 4, "the demo should recompile several times:\n{out}");
    let compiled = number_after(&out, "graphs compiled:") as usize;
    assert_eq!(compiled, seen.len(), "one compile per distinct (batch, dtype):\n{out}");
    assert_eq!(number_after(&out, "distinct signatures:") as usize, seen.len(), "{out}");
    let hits = number_after(&out, "cache hits:") as usize;
    assert_eq!(hits, rows.len() - seen.len(), "every repeated signature is a cache hit:\n{out}");
}
