//! End to end through the real engine: each recompilation cause and each kind of hidden sync is
//! produced by a small program, and the diagnostic names the cause and the right source line.

use std::sync::Mutex;

use xlaprof_core::{step, sync, DType, Tensor};
use xlaprof_profiler::diagnostics::{check, GraphChange, Kind, Rule};
use xlaprof_profiler::{analyze, Profile, Recording, Thresholds};

/// One recording at a time, and `sync()` syncs every live tensor: tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn record(f: impl FnOnce()) -> Profile {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let recording = Recording::start().unwrap();
    f();
    recording.stop()
}

/// `file:line` of the statement on the line after this macro (each checked statement stands on a
/// line of its own right below it).
macro_rules! next_line {
    () => {
        format!("{}:{}", file!(), line!() + 1)
    };
}

fn model_step(x: &Tensor, w: &Tensor) -> Tensor {
    x.matmul(w).unwrap().tanh().unwrap().sum(&[], false).unwrap()
}

#[test]
fn a_batch_size_change_is_explained_with_the_input_and_where_it_was_created() {
    let w = Tensor::from_slice(&[0.1f32; 32], &[8, 4]).unwrap();
    let mut created = String::new();
    let mut synced = String::new();
    let p = record(|| {
        for batch in [16i64, 16, 24] {
            created = next_line!();
            let x = Tensor::from_slice(&vec![1f32; batch as usize * 8], &[batch, 8]).unwrap();
            let _loss = model_step(&x, &w);
            synced = next_line!();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    assert_eq!(d.location, synced, "the sync's line");
    assert!(d.message.contains("changed from f32[16,8] to f32[24,8]"), "{}", d.message);
    assert!(
        d.message.contains(&format!("the tensor made at {created}")),
        "{} / {created}",
        d.message
    );
    assert!(
        matches!(&d.changes[0], GraphChange::InputShape { from, to, .. } if from.dims == [16, 8] && to.dims == [24, 8])
    );
}

#[test]
fn a_dtype_change_is_explained() {
    let p = record(|| {
        for dtype in [DType::F32, DType::F32, DType::F64] {
            let x = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap().cast(dtype).unwrap();
            let y = Tensor::from_slice(&[0.5f64, 0.5, 0.5], &[3]).unwrap();
            let _z =
                x.exp().unwrap().sum(&[], false).unwrap().add(&y.sum(&[], false).unwrap()).unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    let sentences: Vec<String> = d.changes.iter().map(|c| c.sentence()).collect();
    assert!(
        d.changes.iter().any(|c| matches!(c, GraphChange::Structure { .. })),
        "an f32 input cast to f64 changes the ops (a convert appears or disappears): {sentences:?}"
    );
    assert!(d.advice.is_some());
}

#[test]
fn a_dtype_change_of_an_input_names_both_dtypes() {
    let p = record(|| {
        for double in [false, false, true] {
            let a = if double {
                Tensor::from_slice(&[1f64, 2.0], &[2]).unwrap()
            } else {
                Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap()
            };
            let _y = a.mul_scalar(2.0).unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    assert!(d.message.contains("from f32[2] to f64[2]"), "{}", d.message);
    assert_eq!(d.advice.as_deref().map(|s| s.contains("dtype")), Some(true));
}

#[test]
fn a_structure_change_names_the_diverging_node_and_its_line() {
    let mut op_line = String::new();
    let p = record(|| {
        let x = Tensor::from_slice(&[0.5f32; 4], &[4]).unwrap();
        for i in 0..3 {
            let y = x.exp().unwrap();
            let _z = if i < 2 {
                y.sin().unwrap()
            } else {
                op_line = next_line!();
                y.cos().unwrap()
            };
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    let structure = d.changes.iter().find_map(|c| match c {
        GraphChange::Structure { to, location, .. } => Some((to.clone(), location.clone())),
        _ => None,
    });
    let (to, location) = structure.expect("a structure change");
    assert!(to.contains("cosine"), "{to}");
    assert_eq!(location, op_line);
}

#[test]
fn a_changed_set_of_synced_tensors_is_explained() {
    let p = record(|| {
        let x = Tensor::from_slice(&[0.5f32; 5], &[5]).unwrap();
        for keep in [false, false, true] {
            let _a = x.exp().unwrap();
            // One more live tensor the last time.
            let _kept = keep.then(|| x.sin().unwrap().sum(&[], false).unwrap());
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    assert!(
        d.changes.iter().any(|c| matches!(c, GraphChange::SyncedTensors { from: 1, to: 2, .. })),
        "{:?}",
        d.changes
    );
    assert!(d.message.contains("2 tensors were synced instead of 1"), "{}", d.message);
}

#[test]
fn a_recompile_finding_advises_on_its_most_frequent_cause() {
    let p = record(|| {
        let x = Tensor::from_slice(&[0.5f32; 4], &[4]).unwrap();
        // Once one more live tensor, then three times a sequence one longer (a generation loop,
        // which marks no steps).
        for (len, keep) in [(4usize, false), (4, true), (5, true), (6, true), (7, true)] {
            let seq = Tensor::from_slice(&vec![1f32; len], &[len as i64]).unwrap();
            let _a = seq.exp().unwrap().sum(&[], false).unwrap();
            let _kept = keep.then(|| x.sin().unwrap().sum(&[], false).unwrap());
            sync().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let found: Vec<_> = a.diagnostics.iter().map(|d| (d.kind, d.message.clone())).collect();
    let d = a.of_kind(Kind::Recompile).next().expect(&format!("a recompile finding: {found:?}"));
    assert!(d.message.contains("3 times because"), "{}", d.message);
    let advice = d.advice.as_deref().unwrap();
    assert!(advice.contains("grows step by step"), "{advice}");
}

#[test]
fn a_changing_scalar_does_not_recompile() {
    let p = record(|| {
        let x = Tensor::from_slice(&[0.5f32; 4], &[4]).unwrap();
        for lr in [0.1, 0.05, 0.025, 0.0125] {
            let _y = x.mul_scalar(lr).unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    assert_eq!(a.summary.compiles, 1);
    assert_eq!(a.of_kind(Kind::Recompile).count(), 0);
}

#[test]
fn an_item_inside_the_step_is_a_hidden_sync_at_its_line() {
    let w = Tensor::from_slice(&[0.1f32; 32], &[8, 4]).unwrap();
    let mut read = String::new();
    let p = record(|| {
        for _ in 0..4 {
            let x = Tensor::from_slice(&[1f32; 64], &[8, 8]).unwrap();
            let loss = model_step(&x, &w);
            read = next_line!();
            let value = loss.item().unwrap();
            assert!(value.is_finite());
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::HiddenSync).next().expect("a hidden sync finding");
    assert_eq!(d.location, read);
    assert_eq!(d.count, 4);
    assert!(d.message.contains("4 times in 4 steps"), "{}", d.message);
    let rules = check(&p, &[Rule::MaxHiddenSyncs(0)], 2);
    assert!(!rules[0].passed);
    assert!(rules[0].message.contains(&read), "{}", rules[0].message);
}

/// A read that only sums the loss for the log (`total += loss.item()`, the tutorials' way) is
/// given its rewrite in the user's line, in the finding and in the report.
#[test]
fn a_read_summed_for_the_log_is_given_its_rewrite() {
    use xlaprof_core::location::{with_location, ExternalLocation};
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("train.py");
    std::fs::write(
        &script,
        "total = 0.0\nfor x in batches:\n    total += loss.item()  # for the log\n",
    )
    .unwrap();
    let here = ExternalLocation {
        caller: None,
        file: script.display().to_string(),
        line: 3,
        function: "<module>".into(),
    };
    let w = Tensor::from_slice(&[0.1f32; 32], &[8, 4]).unwrap();
    let p = record(|| {
        for _ in 0..3 {
            // (A batch size of its own: the engine's cache of graphs is the process's, and
            // another test's warm-up must still compile.)
            let x = Tensor::from_slice(&[1f32; 56], &[7, 8]).unwrap();
            let loss = model_step(&x, &w);
            with_location(here.clone(), || assert!(loss.item().unwrap().is_finite()));
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::HiddenSync).next().expect("a hidden sync finding");
    let fix = d.fix.as_ref().expect("its rewrite");
    assert_eq!(fix.at, format!("{}:3", script.display()));
    assert_eq!(fix.trimmed(), ("total += loss.item()  # for the log", "total += loss.detach()"));
    let report = xlaprof_profiler::report::text(&a);
    assert!(report.contains(&format!("change {}:3:\n       - total += loss.item()  # for the log\n       + total += loss.detach()", script.display())), "{report}");
    // Where the file cannot be read, the finding keeps its prose alone.
    std::fs::remove_file(&script).unwrap();
    let a = analyze(&p, &Thresholds::default());
    assert!(a.of_kind(Kind::HiddenSync).next().unwrap().fix.is_none());
}

#[test]
fn printing_a_pending_tensor_is_a_hidden_sync() {
    // Formatting cannot see the printing line: the read is located where the tensor was computed.
    let mut computed = String::new();
    let p = record(|| {
        for _ in 0..2 {
            let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
            computed = next_line!();
            let y = x.exp().unwrap();
            let text = format!("{y}");
            assert!(text.contains("tensor(f32[2]"));
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::HiddenSync).next().expect("a hidden sync finding");
    assert_eq!(d.location, computed);
}

#[test]
fn a_sync_inside_a_step_is_reported() {
    let mut mid = String::new();
    let p = record(|| {
        for _ in 0..3 {
            let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
            let _y = x.exp().unwrap();
            mid = next_line!();
            sync().unwrap();
            let _z = x.sin().unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::MidStepSync).next().expect("a mid-step sync finding");
    assert_eq!(d.location, mid);
    assert_eq!(d.count, 3);
}

#[test]
fn sync_then_step_with_nothing_pending_splits_nothing() {
    let p = record(|| {
        for _ in 0..3 {
            let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
            let _y = x.exp().unwrap();
            sync().unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    assert_eq!(a.of_kind(Kind::MidStepSync).count(), 0, "{:#?}", a.diagnostics);
}

#[test]
fn a_batch_made_on_the_device_names_its_varying_dimension_at_its_line() {
    let mut made = String::new();
    let p = record(|| {
        for (i, rows) in [8i64, 8, 5, 9, 3, 6].into_iter().enumerate() {
            made = next_line!();
            let x = Tensor::randn(&[rows, 4], i as i64, DType::F32).unwrap();
            let _loss = x.exp().unwrap().sum(&[], false).unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::RecompileStorm).next().expect("a storm finding");
    let subject = format!("dimension 0 of the tensor made by `randn` at {made}");
    assert!(d.message.contains(&subject), "{}", d.message);
    assert!(d.message.contains("3, 5, 6, 8, 9"), "{}", d.message);
    // The storm sums the site's recompiles; they are not a second finding.
    assert_eq!(a.of_kind(Kind::Recompile).count(), 0, "{:#?}", a.diagnostics);
}

#[test]
fn reading_a_materialized_value_is_a_host_read_not_a_hidden_sync() {
    let mut read = String::new();
    let p = record(|| {
        for _ in 0..3 {
            let x = Tensor::from_slice(&vec![1f32; 32 * 1024], &[32, 1024]).unwrap();
            let y = x.exp().unwrap();
            let loss = y.sum(&[], false).unwrap();
            step().unwrap();
            read = next_line!();
            let _ = y.to_vec::<f32>().unwrap();
            // Logging a scalar after the step stalls for microseconds: no finding.
            let _ = loss.item().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    assert_eq!(a.of_kind(Kind::HiddenSync).count(), 0);
    let reads: Vec<_> = a.of_kind(Kind::HostRead).collect();
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(reads[0].location, read);
    assert_eq!(reads[0].count, 3);
}

#[test]
fn a_storm_after_warm_up_names_the_varying_dimension_and_the_buckets() {
    let w = Tensor::from_slice(&[0.1f32; 32], &[8, 4]).unwrap();
    let p = record(|| {
        for batch in [8i64, 8, 8, 9, 17, 30, 8, 9] {
            let x = Tensor::from_slice(&vec![1f32; batch as usize * 8], &[batch, 8]).unwrap();
            let _loss = model_step(&x, &w);
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::RecompileStorm).next().expect("a storm finding");
    assert!(d.message.contains("dimension 0 of the tensor made at"), "{}", d.message);
    assert!(d.message.contains("9, 17, 30"), "{}", d.message);
    let advice = d.advice.as_deref().unwrap();
    // Every size the site compiled counts, warm-up's 8 included: {8, 16, 32} serve them all.
    assert!(advice.contains("{8, 16, 32}: 3 graphs instead of 4"), "{advice}");
    let rules = check(&p, &[Rule::NoCompilesAfterStep(3), Rule::MaxCompiles(10)], 2);
    assert!(!rules[0].passed, "{}", rules[0].message);
    assert!(rules[1].passed);
}

#[test]
fn metrics_match_the_event_stream() {
    let p = record(|| {
        // A shape no other test uses, so the first step compiles here.
        let x = Tensor::from_slice(&[0.5f32; 7], &[7]).unwrap();
        for _ in 0..5 {
            let _y = x.exp().unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let m = &a.metrics;
    assert_eq!(m.metric("CompileTime").unwrap().count, 1);
    assert_eq!(m.metric("ExecuteTime").unwrap().count, 5);
    assert_eq!(m.counter("CachedCompile"), 4);
    assert_eq!(m.counter("UncachedCompile"), 1);
    assert_eq!(m.counter("MarkStep"), 5);
    assert_eq!(m.counter("Sync"), 5);
    assert_eq!(m.metric("StepTime").unwrap().count, 5);
    let total: u64 = p.executions.iter().map(|e| e.duration_ns).sum();
    assert_eq!(m.metric("ExecuteTime").unwrap().total, total as f64);
    assert!(m.counter("CreateTensor") >= 5, "each step records a tensor");
}

#[test]
fn the_graph_table_links_each_version_to_the_one_it_replaced_and_steps_add_up() {
    use xlaprof_profiler::diagnostics::find_recompiles;
    use xlaprof_profiler::views::{graph_rows, site_history, step_phases};
    // Shapes no other test uses: graphs compiled by an earlier test would be cache hits here.
    let w = Tensor::from_slice(&[0.1f32; 56], &[8, 7]).unwrap();
    let mut synced = String::new();
    let p = record(|| {
        for batch in [16i64, 16, 24, 24] {
            let x = Tensor::from_slice(&vec![1f32; batch as usize * 8], &[batch, 8]).unwrap();
            let _loss = model_step(&x, &w);
            if batch == 24 {
                // A read of another value: a sync of its own, at its own line.
                assert!(w.sum(&[], false).unwrap().item().unwrap().is_finite());
            }
            synced = next_line!();
            step().unwrap();
        }
    });
    let rows = graph_rows(&p, &find_recompiles(&p));
    let at_step: Vec<_> = rows.iter().filter(|r| r.site == synced).collect();
    assert_eq!(at_step.len(), 2, "{rows:#?}");
    let (first, second) = (at_step[0], at_step[1]);
    assert_eq!((first.version, second.version), (1, 2));
    assert_eq!(second.previous, Some(first.hash));
    assert!(second.changes.iter().any(|c| matches!(c, GraphChange::InputShape { .. })));
    assert_eq!(first.executions, 2);
    assert_eq!(first.mean_execute_ns, first.execute_ns / 2);
    assert!(first.source_lines.iter().any(|(l, _)| l.contains("diagnostics.rs")));
    assert_eq!(site_history(&rows, second.hash), vec![first, second]);

    let steps = step_phases(&p);
    assert_eq!(steps.len(), 4);
    assert_eq!(steps.iter().map(|s| s.compiles).collect::<Vec<_>>(), [1, 0, 2, 0]);
    assert_eq!(steps.iter().map(|s| s.value_read_syncs).collect::<Vec<_>>(), [0, 0, 1, 1]);
    for s in &steps {
        let total: u64 = s.phases().iter().map(|(_, ns)| ns).sum();
        assert_eq!(total, s.duration_ns, "{s:?}");
    }
}

#[test]
fn steps_numbered_from_later_in_the_process_keep_their_own_syncs() {
    use xlaprof_profiler::record::{Cause, Record};
    // A second recording in one process: its steps are numbered on from the first's (11, 12,
    // ...), while its syncs count steps from 1. Each step keeps the device busy 90% of the time.
    let mut records = Vec::new();
    for i in 0..6u64 {
        let start = i * 1000;
        records.extend([
            Record::SyncBegin {
                t: start + 10,
                sync: i,
                cause: Cause::StepEnd,
                location: 0,
                tensors: 1,
            },
            Record::Executed { t: start + 990, sync: i, hash: 1, dur: 900 },
            Record::SyncEnd { t: start + 995, sync: i, dur: 985, counters: Vec::new() },
            Record::Step { t: start + 1000, step: 11 + i, location: 0 },
        ]);
    }
    let p = Profile::from_records(records);
    assert_eq!(p.steps[0].index, 11);
    let a = analyze(&p, &Thresholds::default());
    assert_eq!(a.of_kind(Kind::IdleDevice).count(), 0, "{:#?}", a.diagnostics);
}

#[test]
fn programs_left_in_flight_count_their_execution_time_once() {
    use xlaprof_profiler::record::{Cause, Record};
    // Eight programs of 100 units launched 10 apart, each waiting for the one before: the
    // device executes from 10 to 890, and the sum of the eight (800) must not be counted
    // beside it as if the programs had run one after another.
    let mut records = Vec::new();
    for i in 0..8u64 {
        records.extend([
            Record::SyncBegin {
                t: 10 * i + 1,
                sync: i,
                cause: Cause::CompiledGraph,
                location: 0,
                tensors: 1,
            },
            Record::SyncEnd { t: 10 * i + 5, sync: i, dur: 4, counters: Vec::new() },
        ]);
    }
    for i in 0..8u64 {
        let (start, end) = (10 + 110 * i, 10 + 110 * i + 100);
        records.push(Record::Executed { t: end, sync: i, hash: 1, dur: end - start });
    }
    records.push(Record::Step { t: 1000, step: 1, location: 0 });
    let a = analyze(&Profile::from_records(records), &Thresholds::default());
    assert_eq!(a.summary.execute_ns, 8 * 100, "gaps of 10 between the programs are idle");
    let mut overlapping = Vec::new();
    for i in 0..8u64 {
        overlapping.push(Record::Executed { t: 10 * i + 100, sync: i, hash: 1, dur: 100 });
    }
    overlapping.push(Record::Step { t: 1000, step: 1, location: 0 });
    let a = analyze(&Profile::from_records(overlapping), &Thresholds::default());
    assert_eq!(a.summary.execute_ns, 170, "eight spans of 100 starting 10 apart cover 0..170");
}

#[test]
fn every_rule_reads_back_as_written_and_is_named_in_the_syntax() {
    let rules = [
        Rule::NoCompilesAfterStep(3),
        Rule::MaxCompiles(1),
        Rule::MaxHiddenSyncs(0),
        Rule::MaxStepMs(2.5),
        Rule::MaxCompileMs(100.0),
    ];
    for rule in rules {
        assert_eq!(Rule::parse(&rule.to_string()).unwrap(), rule);
        assert!(Rule::SYNTAX.split(" | ").any(|s| s.starts_with(&format!("{}=", rule.name()))));
    }
}

/// The recompile finding of a program that runs `op(i)` on steps 0, 1 and 2, its op written at
/// `op_line`: the attribute changes it names (each located at the op), and its message.
fn attribute_changes(
    op_line: &str,
    op: impl Fn(usize) -> Tensor,
) -> (Vec<(String, String, String)>, String) {
    let p = record(|| {
        for i in 0..3 {
            let _y = op(i);
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    assert!(d.advice.as_deref().is_some_and(|s| s.contains("changes between steps")), "{d:?}");
    let named = d
        .changes
        .iter()
        .filter_map(|c| match c {
            GraphChange::Attribute { name, from, to, location, .. } => {
                assert!(location.starts_with(op_line), "{location} / {op_line}");
                Some((name.clone(), from.clone(), to.clone()))
            }
            _ => None,
        })
        .collect();
    (named, d.message.clone())
}

#[test]
fn a_recompile_by_reduction_axes_names_the_axes() {
    let x = Tensor::from_slice(&[1f32; 16], &[4, 4]).unwrap();
    let at = next_line!();
    let op = |i| x.sum(&[if i < 2 { 0 } else { 1 }], false).unwrap();
    let (named, message) = attribute_changes(&at, op);
    assert_eq!(named, [("axes".to_string(), "[0]".to_string(), "[1]".to_string())]);
    assert!(message.contains("changed its axes from [0] to [1]"), "{message}");
}

#[test]
fn a_recompile_by_permutation_names_the_permutation() {
    let x = Tensor::from_slice(&[1f32; 27], &[3, 3, 3]).unwrap();
    let at = next_line!();
    let op = |i| x.permute(if i < 2 { &[0, 2, 1] } else { &[1, 0, 2] }).unwrap().exp().unwrap();
    let (named, _) = attribute_changes(&at, op);
    assert_eq!(named, [("perm".to_string(), "[0, 2, 1]".to_string(), "[1, 0, 2]".to_string())]);
}

#[test]
fn a_recompile_by_slice_bounds_names_the_bounds() {
    let x = Tensor::from_slice(&[1f32; 8], &[8]).unwrap();
    let start = |i| if i < 2 { 0 } else { 3 };
    let at = next_line!();
    let op = |i| x.slice(0, start(i), start(i) + 4, 1).unwrap().exp().unwrap();
    let (named, _) = attribute_changes(&at, op);
    let names: Vec<&str> = named.iter().map(|n| n.0.as_str()).collect();
    assert_eq!(names, ["start", "limit"], "{named:?}");
    assert_eq!((named[0].1.as_str(), named[0].2.as_str()), ("[0]", "[3]"));
    assert_eq!((named[1].1.as_str(), named[1].2.as_str()), ("[4]", "[7]"));
}

/// A constant's value is a graph input, never structure: changing it does not compile again,
/// except where constants recorded at one line (here by a loop) stop (or start) being equal,
/// since equal ones share an input. That case is named so.
#[test]
fn constants_recompile_only_when_equal_ones_at_a_line_start_to_differ() {
    let x = Tensor::from_slice(&[1f32; 4], &[4]).unwrap();
    let p = record(|| {
        for (a, b) in [(2.0, 2.0), (3.0, 3.0), (3.0, 4.0)] {
            let mut y = x.clone();
            for k in [a, b] {
                y = y.mul_scalar(k).unwrap();
            }
            step().unwrap();
        }
    });
    let compiles = p.syncs.iter().filter(|s| s.compiled()).count();
    assert_eq!(compiles, 2, "new values alone never compile; a new pattern of equal ones does");
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Recompile).next().expect("a recompile finding");
    assert_eq!(d.changes, [GraphChange::ScalarPattern], "{:?}", d.changes);
    assert!(d.message.contains("host scalars recorded at one line"), "{}", d.message);
}

#[test]
fn what_the_debugging_tools_caught_comes_first_at_the_line_behind_it() {
    let mut made_nan = String::new();
    let mut read = String::new();
    let p = record(|| {
        let x = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
        {
            let _checked = xlaprof_core::detect_anomalies();
            made_nan = next_line!();
            let _nan = x.sub_scalar(5.0).unwrap().sqrt().unwrap();
            assert!(matches!(step(), Err(xlaprof_core::Error::Anomaly { .. })));
        }
        let pending = x.mul_scalar(2.0).unwrap();
        {
            let _forbidden = xlaprof_core::forbid_syncs();
            read = next_line!();
            assert!(pending.to_vec::<f32>().is_err());
        }
        step().unwrap();
    });
    let a = analyze(&p, &Thresholds::default());
    let kinds: Vec<Kind> = a.diagnostics.iter().take(2).map(|d| d.kind).collect();
    assert_eq!(kinds, [Kind::Anomaly, Kind::ForbiddenSync], "{:#?}", a.diagnostics);
    let nan = &a.diagnostics[0];
    assert_eq!(nan.location, made_nan);
    assert!(
        nan.message.contains("`sqrt`") && nan.message.contains("made the first NaN or Inf"),
        "{}",
        nan.message
    );
    assert!(nan.advice.is_some());
    assert_eq!(a.diagnostics[1].location, read);
    assert!(
        a.diagnostics[1].message.contains("inside forbid_sync()"),
        "{}",
        a.diagnostics[1].message
    );
}

/// A size the data decides, as the torch bridge's `x[mask]` reads it (a front end's size read):
/// the read syncs inside each step and each new size compiles a graph. One finding at the line,
/// not a hidden sync and a recompile storm of a slice bound.
#[test]
fn a_size_read_from_the_device_is_one_data_dependent_shape_finding() {
    use std::time::Instant;
    use xlaprof_core::events::size_read;
    use xlaprof_core::SourceLocation;

    /// `x[..count]` as the bridge's `x[mask]` makes it: the count read and reported as a size
    /// read, then the slice, all at the caller's line.
    #[track_caller]
    fn select_first(x: &Tensor, count: &Tensor) -> Tensor {
        let start = Instant::now();
        let n = count.item().unwrap() as i64;
        let what = "the count of true entries in its boolean mask";
        let took = start.elapsed().as_nanos() as u64;
        size_read("aten::index", what, n as u64, SourceLocation::caller(), took);
        x.slice(0, 0, n, 1).unwrap()
    }

    let mut at = String::new();
    let p = record(|| {
        for step_index in 0..8i64 {
            let kept = 3 + step_index % 4; // how many entries the mask keeps: 3 to 6
            let data: Vec<f32> = (0..8).map(|i| if i < kept { 1.0 } else { -1.0 }).collect();
            let x = Tensor::from_slice(&data, &[8]).unwrap().mul_scalar(2.0).unwrap();
            let count =
                x.gt_scalar(0.0).unwrap().cast(DType::S64).unwrap().sum(&[], false).unwrap();
            at = next_line!();
            let kept_values = select_first(&x, &count);
            let _loss = kept_values.exp().unwrap().sum(&[], false).unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::DataDependentShape).next().expect("a data-dependent shape finding");
    assert_eq!(d.location, at);
    assert!(
        d.message.contains("`aten::index`") && d.message.contains("4 sizes (3, 4, 5, 6)"),
        "{}",
        d.message
    );
    assert!(d.message.contains("8 times in 8 steps"), "{}", d.message);
    // Its reads' syncs and its sizes' graphs are its own: no other finding names them.
    assert!(a.of_kind(Kind::HiddenSync).next().is_none(), "{:?}", a.diagnostics);
    assert!(a.of_kind(Kind::RecompileStorm).next().is_none(), "{:?}", a.diagnostics);
    assert!(a.of_kind(Kind::Recompile).next().is_none(), "{:?}", a.diagnostics);
    assert!(d.advice.as_deref().unwrap_or("").contains("torch.where"));
}

/// A line that reads two values every step (a helper that logs the loss and the accuracy, a
/// library's `n == 0` then `n > 0`) syncs two graphs there: each compiled once, neither a
/// recompile of the other.
#[test]
fn two_reads_at_one_line_are_two_graphs_not_a_recompile() {
    let p = record(|| {
        let x = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
        let read = |t: Tensor| t.item().unwrap();
        for _ in 0..3 {
            let y = x.exp().unwrap();
            let _total = read(y.sum(&[], false).unwrap());
            let _scaled = read(y.mul_scalar(2.0).unwrap().tanh().unwrap().sum(&[], false).unwrap());
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let recompiles: Vec<&str> = a
        .diagnostics
        .iter()
        .filter(|d| d.kind == Kind::Recompile)
        .map(|d| d.message.as_str())
        .collect();
    assert!(recompiles.is_empty(), "{recompiles:?}");
}

/// A collective between processes that goes through the host (the lazy device's, as DDP's
/// gradient bucket is reduced during `backward()`): its read of the device's tensors splits each
/// step, and the finding names the collective, not a value the program read.
#[test]
fn a_collective_through_the_host_that_splits_each_step_is_named_for_itself() {
    use xlaprof_core::{events, SourceLocation};
    let w = Tensor::from_slice(&[0.1f32; 32], &[8, 4]).unwrap();
    let mut reduced = String::new();
    let p = record(|| {
        for seq in 1..=4u64 {
            let x = Tensor::from_slice(&[1f32; 64], &[8, 8]).unwrap();
            let h = x.matmul(&w).unwrap().tanh().unwrap();
            let op = "all_reduce of a DDP gradient bucket, through the host";
            events::collective_enter("world", seq, op, 128, SourceLocation::caller());
            // The read inside it, at the line the program made it from (as the Python side
            // names both).
            reduced = next_line!();
            let on_host = h.to_vec::<f32>().unwrap();
            events::collective_leave("world", seq);
            let back = Tensor::from_slice(&on_host, &[8, 4]).unwrap();
            let _update = back.mul(&h).unwrap().sum(&[], false).unwrap();
            step().unwrap();
        }
    });
    let a = analyze(&p, &Thresholds::default());
    let hidden: Vec<_> = a.of_kind(Kind::HiddenSync).collect();
    assert_eq!(hidden.len(), 1, "{hidden:#?}");
    let d = hidden[0];
    assert_eq!(d.location, reduced);
    assert!(
        d.message.starts_with(&format!(
            "the all_reduce of a DDP gradient bucket at {reduced} goes through the host"
        )),
        "{}",
        d.message
    );
    assert!(d.message.contains("4 times in 4 steps"), "{}", d.message);
    assert!(d.advice.as_deref().unwrap_or("").contains("no_sync()"), "{:?}", d.advice);
}
