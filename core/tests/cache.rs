//! Compiled-graph cache behaviour, asserted through the event stream: what compiles, what hits.
//! Tests in this file run one at a time (they share the process-wide engine and listeners).

use std::sync::{Arc, Mutex};

use xlaprof_core::events::{self, Event, Listener};
use xlaprof_core::{sync, Tensor};

#[derive(Default)]
struct Lookups(Mutex<Vec<(u64, bool)>>);

impl Listener for Lookups {
    fn on_event(&self, _: u64, e: &Event) {
        if let Event::CacheLookup { hash, hit, .. } = e {
            self.0.lock().unwrap().push((*hash, *hit));
        }
    }
}

static SERIAL: Mutex<()> = Mutex::new(());

/// `sync()` computes every live pending tensor of the process, so tests that count syncs must
/// not record tensors at the same time: each holds this for its whole run.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` and returns the cache lookups it caused, as (hash, hit).
fn lookups(f: impl FnOnce()) -> Vec<(u64, bool)> {
    let l = Arc::new(Lookups::default());
    let id = events::add_listener(l.clone());
    f();
    events::remove_listener(id);
    let v = l.0.lock().unwrap().clone();
    v
}

fn step(x: &Tensor, scale: f64) -> Tensor {
    x.mul_scalar(scale).unwrap().tanh().unwrap().sum(&[-1], false).unwrap()
}

#[test]
fn same_structure_compiles_once_and_changing_scalars_do_not_recompile() {
    let _serial = serial();
    let x = Tensor::from_slice(&[0.5f32; 15], &[3, 5]).unwrap();
    let seen = lookups(|| {
        for i in 0..5 {
            let _y = step(&x, 1.0 + i as f64);
            sync().unwrap();
        }
    });
    assert_eq!(seen.len(), 5);
    assert!(!seen[0].1, "the first sync compiles");
    assert!(seen[1..].iter().all(|&(h, hit)| hit && h == seen[0].0), "{seen:?}");
}

#[test]
fn a_shape_change_is_a_miss_with_a_new_hash() {
    let _serial = serial();
    let a = Tensor::from_slice(&[0.5f32; 12], &[3, 4]).unwrap();
    let b = Tensor::from_slice(&[0.5f32; 16], &[4, 4]).unwrap();
    let seen = lookups(|| {
        let _y = step(&a, 7.0);
        sync().unwrap();
        let _z = step(&b, 7.0);
        sync().unwrap();
    });
    assert_ne!(seen[0].0, seen[1].0);
    assert!(!seen[1].1, "a new shape must compile");
}

#[test]
fn a_dtype_change_is_a_miss() {
    let _serial = serial();
    let a = Tensor::from_slice(&[0.5f32; 4], &[4]).unwrap();
    let b = Tensor::from_slice(&[0.5f64; 4], &[4]).unwrap();
    let seen = lookups(|| {
        let _y = step(&a, 3.0);
        sync().unwrap();
        let _z = step(&b, 3.0);
        sync().unwrap();
    });
    assert_ne!(seen[0].0, seen[1].0);
}

#[test]
fn a_structure_change_and_a_changed_synced_set_are_misses() {
    let _serial = serial();
    let a = Tensor::from_slice(&[0.25f32; 8], &[8]).unwrap();
    let seen = lookups(|| {
        let _y = a.exp().unwrap();
        sync().unwrap();
        let _y = a.log().unwrap(); // structure: another op
        sync().unwrap();
        let _y = a.exp().unwrap();
        let _z = a.sin().unwrap(); // the synced set: one more tensor
        sync().unwrap();
    });
    let hashes: std::collections::HashSet<u64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(hashes.len(), 3, "{seen:?}");
}

#[test]
fn shared_inputs_and_distinct_inputs_are_different_graphs() {
    let _serial = serial();
    // f(a, a) and f(a, b) have the same tree but not the same parameters.
    let a = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let b = Tensor::from_slice(&[3f32, 4.0], &[2]).unwrap();
    let mut out = (vec![], vec![]);
    let seen = lookups(|| {
        let y = a.add(&a).unwrap();
        out.0 = y.to_vec::<f32>().unwrap();
        let z = a.add(&b).unwrap();
        out.1 = z.to_vec::<f32>().unwrap();
    });
    assert_ne!(seen[0].0, seen[1].0);
    assert_eq!(out.0, vec![2.0, 4.0]);
    assert_eq!(out.1, vec![4.0, 6.0]);
}

#[test]
fn reading_a_value_syncs_only_what_it_needs() {
    let _serial = serial();
    let a = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let _unrelated = a.mul_scalar(10.0).unwrap();
    let wanted = a.add_scalar(1.0).unwrap();
    assert_eq!(wanted.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    assert!(wanted.is_materialized());
    assert!(!_unrelated.is_materialized(), "a value read computes only that value");
}

#[derive(Default)]
struct Donations(Mutex<Vec<usize>>);

impl Listener for Donations {
    fn on_event(&self, _: u64, e: &Event) {
        if let Event::GraphBuilt { summary, .. } = e {
            self.0.lock().unwrap().push(summary.donated.len());
        }
    }
}

#[test]
fn an_updated_parameter_donates_its_old_buffer_unless_someone_still_holds_it() {
    let _serial = serial();
    let p = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let seen = Arc::new(Donations::default());
    let id = events::add_listener(seen.clone());

    // In-place update: nothing else refers to the old value, so its buffer is reused.
    let updated = p.mul_scalar(2.0).unwrap();
    p.set_value(&updated).unwrap();
    drop(updated);
    sync().unwrap();
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);

    // The same update while the old value is still held: it must stay readable.
    let kept = p.detach();
    let updated = p.mul_scalar(2.0).unwrap();
    p.set_value(&updated).unwrap();
    drop(updated);
    sync().unwrap();
    events::remove_listener(id);
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![4.0, 8.0, 12.0]);
    assert_eq!(kept.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0], "a held value is never donated");
    assert_eq!(*seen.0.lock().unwrap(), vec![1, 0]);
}

#[derive(Default)]
struct Compiles(Mutex<usize>);

impl Listener for Compiles {
    fn on_event(&self, _: u64, e: &Event) {
        if let Event::Compiled { .. } = e {
            *self.0.lock().unwrap() += 1;
        }
    }
}

#[test]
fn an_input_that_becomes_donatable_runs_the_executable_compiled_without_donating_it() {
    let _serial = serial();
    let p = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let seen = Arc::new(Donations::default());
    let compiles = Arc::new(Compiles::default());
    let ids = [events::add_listener(seen.clone()), events::add_listener(compiles.clone())];
    let update = |p: &Tensor| {
        let updated = p.mul_scalar(5.0).unwrap().add_scalar(1.0).unwrap();
        p.set_value(&updated).unwrap();
        drop(updated);
        sync().unwrap();
    };

    // First while the old value is held elsewhere (nothing donatable), then once it is not.
    let kept = p.detach();
    update(&p);
    drop(kept);
    update(&p);
    update(&p);
    for id in ids {
        events::remove_listener(id);
    }
    let want = [1f32, 2.0, 3.0].map(|v| ((v * 5.0 + 1.0) * 5.0 + 1.0) * 5.0 + 1.0);
    assert_eq!(p.to_vec::<f32>().unwrap(), want.to_vec());
    assert_eq!(*compiles.0.lock().unwrap(), 1, "the donation alone compiles nothing");
    assert_eq!(*seen.0.lock().unwrap(), vec![0, 0, 0], "the executable's donations, none");
}

#[test]
fn each_updated_tensor_donates_its_old_buffer_to_its_own_new_value() {
    let _serial = serial();
    // An optimizer's shape: three tensors of one shape updated in place, read in another order
    // than they were made (a full sync's outputs are oldest first, its inputs in order of first
    // use). Paired by shape alone, `v`'s buffer went to `p`'s update and XLA copied both.
    let names = ["p", "m", "v"];
    let [p, m, v] = [1f32, 2.0, 3.0].map(|x| Tensor::from_slice(&[x; 4], &[4]).unwrap());
    for (t, name) in [&p, &m, &v].into_iter().zip(names) {
        t.set_name(name);
    }
    let seen = Arc::new(Summaries::default());
    let id = events::add_listener(seen.clone());
    for _ in 0..2 {
        let new_v = v.mul_scalar(0.5).unwrap();
        let new_m = m.add(&new_v).unwrap();
        let new_p = p.sub(&new_m.mul(&new_v).unwrap()).unwrap();
        v.set_value(&new_v).unwrap();
        m.set_value(&new_m).unwrap();
        p.set_value(&new_p).unwrap();
        drop((new_v, new_m, new_p));
        sync().unwrap();
    }
    events::remove_listener(id);
    // v: 3, 1.5, 0.75; m: 2, 3.5, 4.25; p: 1, 1 - 3.5 * 1.5, then minus 4.25 * 0.75.
    assert_eq!(v.to_vec::<f32>().unwrap(), vec![0.75; 4]);
    assert_eq!(m.to_vec::<f32>().unwrap(), vec![4.25; 4]);
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![1.0 - 5.25 - 3.1875; 4]);
    let summaries = seen.0.lock().unwrap();
    assert_eq!(summaries.len(), 2);
    for summary in summaries.iter() {
        let donated: Vec<(&str, usize)> = summary
            .donated
            .iter()
            .map(|&(input, output)| (summary.inputs[input].name.as_deref().unwrap_or("?"), output))
            .collect();
        // The outputs are p, m and v (oldest first).
        let mut want = vec![("v", 2), ("m", 1), ("p", 0)];
        let mut got = donated.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "each input's buffer goes to its own tensor's update: {donated:?}");
    }
}

#[test]
fn reading_one_value_never_donates_an_input_another_pending_tensor_needs() {
    let _serial = serial();
    // `shared` feeds both results; reading `first` computes only its part of the graph.
    let p = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let updated = p.mul_scalar(3.0).unwrap();
    p.set_value(&updated).unwrap();
    drop(updated);
    let shared = p.exp().unwrap();
    let first = shared.sum(&[], false).unwrap();
    let second = shared.mul_scalar(2.0).unwrap();
    let _ = first.item().unwrap();
    let values = second.to_vec::<f32>().unwrap();
    let want: Vec<f32> = [3f32, 6.0, 9.0].iter().map(|v| v.exp() * 2.0).collect();
    assert!(values.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-3 * b), "{values:?}");
}

#[derive(Default)]
struct Summaries(Mutex<Vec<Arc<events::GraphSummary>>>);

impl Listener for Summaries {
    fn on_event(&self, _: u64, e: &Event) {
        if let Event::GraphBuilt { summary, .. } = e {
            self.0.lock().unwrap().push(summary.clone());
        }
    }
}

#[test]
fn a_full_sync_computes_nothing_no_live_tensor_needs() {
    let _serial = serial();
    let x = Tensor::from_slice(&[0.5f32, 1.0, 2.0], &[3]).unwrap();
    let seen = Arc::new(Summaries::default());
    let id = events::add_listener(seen.clone());
    let e = x.exp().unwrap();
    drop(e.sin().unwrap()); // recorded, then dropped: dead
    let unused = e.cos().unwrap();
    let y = e.mul_scalar(2.0).unwrap();
    drop(e); // still needed by `y`
    drop(unused);
    sync().unwrap();
    events::remove_listener(id);
    let summaries = seen.0.lock().unwrap().clone();
    assert_eq!(summaries.len(), 1);
    let ops: Vec<&str> = summaries[0].ops.iter().map(|(op, _)| *op).collect();
    assert!(!ops.contains(&"sin") && !ops.contains(&"cos"), "{ops:?}");
    // x, exp, the scalar, its broadcast, mul.
    assert_eq!(summaries[0].nodes, 5, "{:?}", summaries[0].node_defs);
    assert_eq!(summaries[0].outputs.len(), 1);
    let want: Vec<f32> = [0.5f32, 1.0, 2.0].iter().map(|v| 2.0 * v.exp()).collect();
    let got = y.to_vec::<f32>().unwrap();
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 * b), "{got:?}");
}

/// A graph with shared subexpressions, an input used twice, equal scalars from one line and
/// from two, and two outputs sharing a node.
fn tangle(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let shared = a.mul(b).unwrap().add(a).unwrap();
    let mut acc = shared.clone();
    for _ in 0..3 {
        acc = acc.mul_scalar(0.5).unwrap().add(&shared).unwrap();
    }
    let other = shared.mul_scalar(0.5).unwrap().sub(&b.exp().unwrap()).unwrap();
    (acc.tanh().unwrap(), other)
}

#[test]
fn a_full_sync_and_value_reads_compute_the_same_values() {
    let _serial = serial();
    let a = Tensor::from_slice(&[0.1f32, -0.4, 0.9, 1.5], &[2, 2]).unwrap();
    let b = Tensor::from_slice(&[0.3f32, 0.2], &[2]).unwrap();
    // Read one by one: each read walks the part of the graph it needs.
    let (p, q) = tangle(&a, &b);
    let read = (p.to_vec::<f32>().unwrap(), q.to_vec::<f32>().unwrap());
    // Synced together, from the trace; twice, so the second is a cache hit.
    for _ in 0..2 {
        let (p, q) = tangle(&a, &b);
        let seen = lookups(|| sync().unwrap());
        assert_eq!(seen.len(), 1);
        assert_eq!((p.to_vec::<f32>().unwrap(), q.to_vec::<f32>().unwrap()), read);
    }
}

#[test]
fn work_abandoned_before_a_loop_does_not_change_its_graph() {
    let _serial = serial();
    let x = Tensor::from_slice(&[0.5f32; 6], &[2, 3]).unwrap();
    let first = lookups(|| {
        let _y = step(&x, 2.0);
        sync().unwrap();
    });
    // Recorded and abandoned while another tensor was pending, then that one dropped too.
    let keep = x.exp().unwrap();
    drop(x.sin().unwrap().cos().unwrap());
    drop(keep);
    let again = lookups(|| {
        let _y = step(&x, 3.0);
        sync().unwrap();
    });
    assert_eq!(again, vec![(first[0].0, true)]);
}

#[test]
fn a_value_read_inside_each_step_does_not_recompile_the_step() {
    let _serial = serial();
    let x = Tensor::from_slice(&[0.5f32; 6], &[2, 3]).unwrap();
    let seen = lookups(|| {
        for i in 0..4 {
            let y = step(&x, 1.0 + i as f64);
            let _z = y.mul_scalar(2.0).unwrap();
            y.to_vec::<f32>().unwrap();
            sync().unwrap();
        }
    });
    // Each step: the read, then the sync of what is left; from the second step on, both hit.
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(seen[2..].iter().all(|s| s.1), "{seen:?}");
    assert_eq!(seen[3].0, seen[7].0);
}

#[test]
fn a_graph_reached_by_a_value_read_and_by_sync_compiles_once() {
    let _serial = serial();
    let x = Tensor::from_slice(&[0.25f32; 6], &[2, 3]).unwrap();
    let seen = lookups(|| {
        // A value read: the graph walk lays the graph out.
        let y = step(&x, 2.0);
        y.to_vec::<f32>().unwrap();
        // The same structure, synced: the trace's incremental key.
        let _z = step(&x, 3.0);
        sync().unwrap();
        // Read once more.
        let w = step(&x, 4.0);
        w.to_vec::<f32>().unwrap();
    });
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(!seen[0].1, "the first compiles");
    assert!(seen[1..].iter().all(|&(h, hit)| hit && h == seen[0].0), "one key: {seen:?}");
}

#[test]
fn nodes_recorded_in_between_and_left_unused_do_not_change_the_key() {
    let _serial = serial();
    let x = Tensor::from_slice(&[0.5f32; 6], &[3, 2]).unwrap();
    let seen = lookups(|| {
        let _y = step(&x, 2.0);
        sync().unwrap();
        // The same graph, with unused work recorded before, between and after its nodes: the
        // trace has gaps there, and the key must not see them.
        let unused_before = x.cos().unwrap();
        let scaled = x.mul_scalar(2.0).unwrap();
        let unused_between = scaled.exp().unwrap();
        let _y = scaled.tanh().unwrap().sum(&[-1], false).unwrap();
        let unused_after = x.sin().unwrap();
        drop((unused_before, unused_between, unused_after, scaled));
        sync().unwrap();
    });
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[1].1 && seen[1].0 == seen[0].0, "one key: {seen:?}");
}

/// `x * 0.5` recorded where no gradient is (one lock, one tensor) and where one is (the general
/// path) is one graph; and a loop's host scalar is one operand, not one per iteration.
#[test]
fn an_op_with_a_host_scalar_records_one_graph_with_or_without_a_gradient() {
    let _serial = serial();
    let chain = |grad: bool| {
        let x = Tensor::from_slice(&[1f32; 6], &[2, 3]).unwrap();
        x.set_requires_grad(grad);
        let mut y = x.clone();
        for _ in 0..50 {
            y = y.mul_scalar(1.5).unwrap().add_scalar(0.25).unwrap();
        }
        // Without the tensors the gradient saved, which a sync would also compute.
        let detached = y.detach();
        drop(y);
        sync().unwrap();
        let y = detached;
        y.to_vec::<f32>().unwrap()
    };
    let summaries = Arc::new(Summaries::default());
    let id = events::add_listener(summaries.clone());
    let seen = lookups(|| {
        let (plain, with_grad) = (chain(false), chain(true));
        assert_eq!(plain, with_grad);
        let mut expected = 1f32;
        for _ in 0..50 {
            expected = expected * 1.5 + 0.25;
        }
        assert!((plain[0] - expected).abs() <= expected * 1e-5, "{} vs {expected}", plain[0]);
    });
    events::remove_listener(id);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(!seen[0].1 && seen[1].1 && seen[1].0 == seen[0].0, "one key: {seen:?}");
    let summaries = summaries.0.lock().unwrap();
    assert_eq!(summaries.len(), 2, "one graph per sync");
    let broadcasts = summaries[0].ops.iter().find(|(op, _)| *op == "broadcast_in_dim");
    assert_eq!(
        broadcasts.map(|b| b.1),
        Some(2),
        "one operand per line and value: {:?}",
        summaries[0].ops
    );
}

#[test]
fn an_input_held_for_a_step_runs_the_donating_executable_without_donating_it() {
    // The reverse of the test above: compiled donating the old value, then that value is held
    // elsewhere for one step (a reference the collector has not freed yet). The executable it
    // has runs, told not to donate that input: nothing compiles, the held value stays readable.
    let _serial = serial();
    let p = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let compiles = Arc::new(Compiles::default());
    let id = events::add_listener(compiles.clone());
    // A graph of its own (two products): the cache is the process's, shared with the tests above.
    let update = |p: &Tensor| {
        let updated = p.mul_scalar(3.0).unwrap().mul_scalar(0.5).unwrap();
        p.set_value(&updated).unwrap();
        drop(updated);
        sync().unwrap();
    };
    update(&p); // donates the old value
    let kept = p.detach();
    update(&p); // the old value is held: not donated, by the same executable
    let was = kept.to_vec::<f32>().unwrap();
    drop(kept);
    update(&p);
    events::remove_listener(id);
    let step = |v: f32| v * 3.0 * 0.5;
    assert_eq!(was, [1f32, 2.0, 3.0].map(step).to_vec(), "the held value is intact");
    assert_eq!(p.to_vec::<f32>().unwrap(), [1f32, 2.0, 3.0].map(|v| step(step(step(v)))).to_vec());
    assert_eq!(*compiles.0.lock().unwrap(), 1, "holding a value for a step compiles nothing");
}
