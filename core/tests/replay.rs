//! A captured graph recorded into the lazy trace at each run (`Replay::recorded`: torch.compile's
//! steps as one program, `XLAPROF_FUSED_STEPS=1`): its runs and the lazy code around them are
//! computed by one sync, a value read ends the step, and a graph called again before its last
//! results were computed runs the pending step first instead of letting the trace grow.
//! One test in this binary: it counts the process's executions and compiles.

use xlaprof_core::events::counters;
use xlaprof_core::{Replay, SourceLocation, Tensor};

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{got:?} vs {want:?}");
    }
}

#[test]
fn recorded_runs_join_the_step_and_a_step_is_one_program_compiled_once() {
    let here = SourceLocation::caller();
    let w_values = [1.0f32, 2.0, -3.0, 0.25];
    let w = Tensor::from_slice(&w_values, &[4]).unwrap(); // a constant of the graph
    let x = Tensor::from_slice(&[0.5f32; 4], &[4]).unwrap(); // its argument
    let y = x.mul(&w).unwrap().add_scalar(1.0).unwrap();
    let graph =
        |v: &[f32]| -> Vec<f32> { v.iter().zip(&w_values).map(|(a, b)| a * b + 1.0).collect() };
    let (replay, out) = Replay::recorded(&[&x], &[&y], here.clone()).unwrap().expect("device data");
    assert_eq!(replay.key(), 0, "a recorded graph is part of a larger program");
    let mut want = graph(&[0.5; 4]);

    // A step: lazy code, the graph, a read. The read computes both in one program.
    let mut value = out.into_iter().next().unwrap();
    let mut counts = Vec::new();
    for _ in 0..8 {
        let before = value.mul_scalar(0.5).unwrap();
        value = replay.run(&[&before], &[], here.clone()).unwrap().expect("not split").remove(0);
        want = graph(&want.iter().map(|v| v * 0.5).collect::<Vec<_>>());
        close(&value.to_vec::<f32>().unwrap(), &want);
        counts.push(counters());
    }
    let (first, last) = (&counts[2], &counts[7]);
    assert_eq!(last.executions - first.executions, 5, "one program a step");
    assert_eq!(last.compiles, first.compiles, "the step's program compiled once");

    // Never read: each run computes the one before it, so each program stays one step long.
    let start = counters();
    for _ in 0..10 {
        value = replay.run(&[&value], &[], here.clone()).unwrap().expect("not split").remove(0);
        want = graph(&want);
    }
    close(&value.to_vec::<f32>().unwrap(), &want);
    let end = counters();
    // Nine calls found their last run pending, then the read: ten programs of one run each, of
    // one structure (a program a step longer each call would compile at every call).
    assert_eq!(end.executions - start.executions, 10, "a program per call, not a growing one");
    assert!(end.compiles - start.compiles <= 1, "{} compiles", end.compiles - start.compiles);
}
