//! `forbid_syncs()` and `explain()`: a block that may not run graphs or read values, and the
//! pending graph described without running it.

use std::sync::Mutex;

use xlaprof_core::{explain, forbid_syncs, sync, Error, Tensor};

/// One at a time: a sync in one test would compute another's pending tensors.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn inside_forbid_syncs_a_sync_or_a_read_is_an_error_at_its_line_and_nothing_is_lost() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let a = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let b;
    {
        let _outer = forbid_syncs();
        b = a.mul(&a).unwrap().sum(&[], false).unwrap();
        let line = line!() + 1;
        let err = sync().unwrap_err();
        assert!(matches!(err, Error::SyncForbidden { .. }), "{err}");
        assert!(err.to_string().contains(&format!("debug_tools.rs:{line}")), "{err}");
        {
            let _inner = forbid_syncs(); // blocks nest
        }
        let err = b.item().unwrap_err();
        assert!(err.to_string().starts_with("a value read ran a graph"), "{err}");
    }
    // The block is over: the pending value computes as it would have.
    assert_eq!(b.item().unwrap(), 14.0);
    // Another thread is not inside the block.
    let _block = forbid_syncs();
    let c = a.add(&a).unwrap();
    let on_another = std::thread::spawn(move || c.to_vec::<f32>().unwrap());
    assert_eq!(on_another.join().unwrap(), vec![2.0, 4.0, 6.0]);
    assert!(matches!(a.to_vec::<f32>(), Err(Error::SyncForbidden { .. })));
}

#[test]
fn explain_describes_the_pending_graph_and_runs_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let x = Tensor::from_slice(&[1f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let line = line!() + 1;
    let y = x.matmul(&x).unwrap().relu().unwrap();
    let before = xlaprof_core::events::counters();
    let e = explain(&[&y]).unwrap();
    assert_eq!(xlaprof_core::events::counters().syncs, before.syncs);
    let text = e.to_string();
    assert!(text.starts_with("pending graph of 1 tensor:"), "{text}");
    assert!(text.contains("1 device data"), "{text}");
    assert!(text.contains("dot_general"), "{text}");
    assert!(text.contains(&format!("debug_tools.rs:{line}")), "{text}");
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![7.0, 10.0, 15.0, 22.0]);
}

#[test]
fn detect_anomalies_names_the_op_that_made_the_first_nan_and_its_line() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let x = Tensor::from_slice(&[1f32, 0.5, -2.0, 4.0], &[4]).unwrap();
    // Clean: nothing to say, and the values are as without the check.
    {
        let _on = xlaprof_core::detect_anomalies();
        let y = x.mul(&x).unwrap().add(&x).unwrap();
        sync().unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 0.75, 2.0, 20.0]);
    }
    let _on = xlaprof_core::detect_anomalies();
    let shifted = x.add_scalar(1.0).unwrap(); // [2, 1.5, -1, 5]
    let line = line!() + 1;
    let logs = shifted.log().unwrap(); // log(-1) is NaN
    let out = logs.mul_scalar(2.0).unwrap().sum(&[], false).unwrap();
    let sync_line = line!() + 1;
    let err = sync().unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Anomaly { .. }), "{text}");
    assert!(text.contains("`log` (f32[4])"), "{text}");
    assert!(text.contains(&format!("debug_tools.rs:{line}")), "the op's line: {text}");
    assert!(text.contains(&format!("debug_tools.rs:{sync_line}")), "the sync's line: {text}");
    assert!(text.contains("f32[4] in [-1, 5]"), "its input's range: {text}");
    // The sync itself ran: the values are there, NaN included (a read of computed values runs
    // no graph, and checks nothing).
    assert!(out.item().unwrap().is_nan());
}

#[test]
fn the_anomaly_check_is_part_of_each_syncs_own_program_and_records_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let x = Tensor::from_slice(&[1f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let _on = xlaprof_core::detect_anomalies();
    for _ in 0..3 {
        let y = x.matmul(&x).unwrap().add(&x).unwrap();
        let z = y.sum(&[1], false).unwrap().cast(xlaprof_core::DType::F64).unwrap();
        let before = xlaprof_core::events::counters();
        sync().unwrap();
        let after = xlaprof_core::events::counters();
        // One program ran, and the check recorded no op of its own.
        assert_eq!(after.executions - before.executions, 1);
        assert_eq!(after.ops_traced, before.ops_traced);
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![8.0, 12.0, 18.0, 26.0]);
        assert_eq!(z.to_vec::<f64>().unwrap(), vec![20.0, 44.0]);
        // A value read is checked by its own program too.
        let w = x.mul_scalar(2.0).unwrap();
        let before = xlaprof_core::events::counters();
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
        assert_eq!(xlaprof_core::events::counters().executions - before.executions, 1);
        let v = x.mul_scalar(f32::MAX as f64).unwrap().mul_scalar(4.0).unwrap(); // overflows
        let err = v.to_vec::<f32>().unwrap_err();
        assert!(matches!(err, Error::Anomaly { .. }), "{err}");
        assert!(err.to_string().contains("`multiply`"), "{err}");
    }
}

#[test]
fn the_check_finds_a_nan_in_any_output_small_or_large_of_any_dtype() {
    // The program sums the small outputs of each dtype together and a large one on its own:
    // a NaN in any of them, in a sync with all kinds, is found and located.
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _on = xlaprof_core::detect_anomalies();
    let kinds: [(&[i64], xlaprof_core::DType); 5] = [
        (&[3], xlaprof_core::DType::F32),
        (&[2, 4], xlaprof_core::DType::F32),
        (&[5], xlaprof_core::DType::F64),
        (&[1 << 21], xlaprof_core::DType::F32),
        (&[7], xlaprof_core::DType::BF16),
    ];
    for bad in 0..=kinds.len() {
        let outputs: Vec<Tensor> = kinds
            .iter()
            .enumerate()
            .map(|(k, (dims, dtype))| {
                // sqrt of 2 everywhere, or of -2 in the one made bad
                let sign = if k == bad { -2.0 } else { 2.0 };
                Tensor::full(dims, sign, *dtype).sqrt().unwrap()
            })
            .collect();
        let result = sync();
        if bad == kinds.len() {
            result.unwrap(); // none is bad
            for t in &outputs {
                assert!(
                    t.cast(xlaprof_core::DType::F32).unwrap().to_vec::<f32>().unwrap()[0] > 1.4
                );
            }
        } else {
            let err = result.unwrap_err();
            let (dims, dtype) = kinds[bad];
            let shape = xlaprof_core::Shape::new(dtype, dims);
            assert!(err.to_string().contains(&format!("`sqrt` ({shape})")), "output {bad}: {err}");
        }
    }
}
