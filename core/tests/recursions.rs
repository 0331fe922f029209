//! Recursions over time compiled as loops: the CTC alphas against the recursion written out in
//! plain Rust, step by step, in float64.

use xlaprof_core::{Error, Tensor};

/// Deterministic values in [lo, hi).
fn values(count: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..count)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + ((s >> 11) as f64 / (1u64 << 53) as f64) * (hi - lo)
        })
        .collect()
}

fn log_add(terms: &[f64]) -> f64 {
    let top = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return top;
    }
    top + terms.iter().map(|x| (x - top).exp()).sum::<f64>().ln()
}

/// The alphas as the op defines them, one sequence and one step at a time.
fn reference(
    e: &[f64],
    skip: &[bool],
    first: &[i64],
    start: &[bool],
    b: usize,
    t: usize,
    l: usize,
) -> Vec<f64> {
    let mut out = vec![f64::NEG_INFINITY; b * t * l];
    for n in 0..b {
        for k in 0..t {
            for s in 0..l {
                let at = |k: usize, s: usize| (n * t + k) * l + s;
                let here = e[at(k, s)];
                out[at(k, s)] = match (k as i64).cmp(&first[n]) {
                    std::cmp::Ordering::Less => f64::NEG_INFINITY,
                    std::cmp::Ordering::Equal if start[n * l + s] => here,
                    std::cmp::Ordering::Equal => f64::NEG_INFINITY,
                    std::cmp::Ordering::Greater => {
                        let mut terms = vec![out[at(k - 1, s)]];
                        if s >= 1 {
                            terms.push(out[at(k - 1, s - 1)]);
                        }
                        if s >= 2 && skip[n * l + s] {
                            terms.push(out[at(k - 1, s - 2)]);
                        }
                        log_add(&terms) + here
                    }
                };
            }
        }
    }
    out
}

#[test]
fn ctc_alphas_are_the_recursion_step_by_step() {
    let (b, t, l) = (4usize, 13usize, 7usize);
    let mut e = values(b * t * l, 3, -4.0, 0.0);
    // A place no path may take at one step: its -inf has to stay -inf, not turn into NaN.
    e[(t + 5) * l + 2] = f64::NEG_INFINITY;
    let skip: Vec<bool> = values(b * l, 5, 0.0, 1.0).iter().map(|v| *v > 0.4).collect();
    let start: Vec<bool> = (0..b * l).map(|i| i % l < 2 || i == 3 * l + 4).collect();
    // From the first step, later, at the last, and never (a sequence with no steps at all).
    let first = vec![0i64, 4, t as i64 - 1, t as i64];
    let dims = [b as i64, t as i64, l as i64];
    let got = Tensor::from_slice(&e, &dims)
        .unwrap()
        .ctc_alphas(
            &Tensor::from_slice(&skip, &[b as i64, l as i64]).unwrap(),
            &Tensor::from_slice(&first, &[b as i64]).unwrap(),
            &Tensor::from_slice(&start, &[b as i64, l as i64]).unwrap(),
        )
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let want = reference(&e, &skip, &first, &start, b, t, l);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = (g == w) || (g - w).abs() <= 1e-12 * w.abs().max(1.0);
        assert!(
            same,
            "alpha {i} (batch {}, step {}, place {}) is {g}, expected {w}",
            i / (t * l),
            i / l % t,
            i % l
        );
    }
}

#[test]
fn ctc_alphas_of_mismatched_shapes_are_an_error_naming_them() {
    let e = Tensor::from_slice(&[0.0f32; 2 * 3 * 5], &[2, 3, 5]).unwrap();
    let skip = Tensor::from_slice(&[true; 8], &[2, 4]).unwrap();
    let start = Tensor::from_slice(&[true; 10], &[2, 5]).unwrap();
    let first = Tensor::from_slice(&[0i64, 0], &[2]).unwrap();
    match e.ctc_alphas(&skip, &first, &start) {
        Err(Error::Shape { message, .. }) => {
            assert!(message.contains("f32[2,3,5]") && message.contains("bool[2,4]"), "{message}")
        }
        other => panic!("expected a shape error, got {:?}", other.map(|t| t.shape().to_string())),
    }
}
