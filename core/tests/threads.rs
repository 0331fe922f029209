//! Tracing and syncing from several threads at once: every sync computes what all threads have
//! pending, so each thread's values must come out right whichever thread's sync computed them.

use xlaprof_core::{sync, Tensor};

fn expected(start: f32, rounds: usize) -> f32 {
    (0..rounds).fold(start, |v, _| (v * 1.5 + 0.25).tanh())
}

#[test]
fn threads_tracing_and_syncing_together_all_get_their_values() {
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let start = 0.1 * (t + 1) as f32;
                let mut x = Tensor::from_slice(&[start; 8], &[2, 4]).unwrap();
                for round in 1..=60 {
                    x = x.mul_scalar(1.5).unwrap().add_scalar(0.25).unwrap().tanh().unwrap();
                    // Some rounds end in a full sync, some in a value read, some in neither.
                    match (round + t) % 3 {
                        0 => sync().unwrap(),
                        1 => {
                            let got = x.to_vec::<f32>().unwrap();
                            let want = expected(start, round);
                            assert!(got.iter().all(|v| (v - want).abs() < 1e-5), "{got:?} {want}");
                        }
                        _ => {}
                    }
                    // A temporary recorded and dropped on every round.
                    drop(x.exp().unwrap());
                }
                let got = x.to_vec::<f32>().unwrap();
                let want = expected(start, 60);
                assert!(got.iter().all(|v| (v - want).abs() < 1e-5), "{got:?} {want}");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
