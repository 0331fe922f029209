//! The host running ahead of the device (`XLAPROF_RUN_AHEAD=1`, the default on GPUs, asked for
//! here on the CPU plugin): a sync returns once its program is queued, values read afterwards
//! are the right ones, every execution is still reported (by the device's end, after its sync
//! when need be), and `wait()` leaves nothing running.

use std::sync::{Arc, Mutex};

use xlaprof_core::events::{self, Event, Listener};
use xlaprof_core::nn::{Linear, Module, Optimizer, Sgd};
use xlaprof_core::{engine, step, sync, wait, Tensor};

#[derive(Default)]
struct Seen(Mutex<Vec<(&'static str, u64)>>);

impl Listener for Seen {
    fn on_event(&self, _at: u64, event: &Event) {
        let seen = match event {
            Event::SyncEnd { sync_id, .. } => ("end", *sync_id),
            Event::Executed { sync_id, .. } => ("executed", *sync_id),
            _ => return,
        };
        self.0.lock().unwrap().push(seen);
    }
}

#[test]
fn a_program_runs_while_the_host_goes_on_and_every_execution_is_reported() {
    // One test in this binary: the engine reads the variable once, when it starts.
    std::env::set_var("XLAPROF_RUN_AHEAD", "1");
    assert!(engine().unwrap().runs_ahead());
    let seen = Arc::new(Seen::default());
    let id = events::add_listener(seen.clone());

    // A chain synced every round: each sync's program may still run when the next round traces.
    let mut x = Tensor::from_slice(&[1.0f32; 64], &[8, 8]).unwrap();
    let mut want = 1.0f32;
    for _ in 0..20 {
        for _ in 0..50 {
            x = x.mul_scalar(1.001).unwrap().add_scalar(0.01).unwrap();
            want = want * 1.001 + 0.01;
        }
        sync().unwrap();
    }
    let got = x.to_vec::<f32>().unwrap();
    assert!(got.iter().all(|v| (v - want).abs() < 1e-3 * want), "{got:?} vs {want}");

    // Training: each step's update reads the one before, queued behind it on the device.
    let layer = Linear::new(8, 1, true, 7).unwrap();
    let mut opt = Sgd::new(layer.parameters(), 0.1);
    let data = Tensor::from_slice(&[0.5f32; 64], &[8, 8]).unwrap();
    let target = Tensor::from_slice(&[1.0f32; 8], &[8, 1]).unwrap();
    let mut losses = Vec::new();
    for _ in 0..10 {
        opt.zero_grad();
        let err = layer.forward(&data).unwrap().sub(&target).unwrap();
        let loss = err.mul(&err).unwrap().mean(&[], false).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        step().unwrap();
        losses.push(loss);
    }
    wait().unwrap();
    let losses: Vec<f32> = losses.iter().map(|l| l.to_vec::<f32>().unwrap()[0]).collect();
    assert!(losses.windows(2).all(|w| w[1] < w[0]), "the loss goes down: {losses:?}");
    events::remove_listener(id);

    // Every sync that ran a program has its execution reported, once.
    let seen = seen.0.lock().unwrap().clone();
    let ended: Vec<u64> = seen.iter().filter(|s| s.0 == "end").map(|s| s.1).collect();
    let mut executed: Vec<u64> = seen.iter().filter(|s| s.0 == "executed").map(|s| s.1).collect();
    executed.sort_unstable();
    let mut ran = ended.clone();
    ran.retain(|s| executed.contains(s));
    assert_eq!(executed.len(), ran.len(), "one execution per sync: {seen:?}");
    assert!(executed.len() >= 30, "20 chain syncs and 10 steps ran programs: {seen:?}");
    // Nothing is left running, and waiting again is a no-op.
    wait().unwrap();
}
