//! Recursions compiled as loops, against the recursions written out in plain Rust, step by
//! step, in float64: the CTC alphas, the recurrent layers and their backwards against central
//! differences of a loss, and a matrix's repeated squaring.

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

/// `v` with element `i` moved by `by`: a central difference's two points.
fn nudged(v: &[f64], i: usize, by: f64) -> Vec<f64> {
    let mut v = v.to_vec();
    v[i] += by;
    v
}

fn tensor(v: &[f64], dims: &[usize]) -> Tensor {
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    Tensor::from_slice(v, &dims).unwrap()
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

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// An LSTM layer step by step: each step's `h` and `c` side by side, `[t, b, 2h]`.
fn lstm_reference(
    xp: &[f64],
    w: &[f64],
    h0: &[f64],
    c0: &[f64],
    t: usize,
    b: usize,
    hid: usize,
) -> Vec<f64> {
    let g = 4 * hid;
    let (mut h, mut c) = (h0.to_vec(), c0.to_vec());
    let mut out = vec![0.0; t * b * 2 * hid];
    for k in 0..t {
        let (mut h1, mut c1) = (vec![0.0; b * hid], vec![0.0; b * hid]);
        for n in 0..b {
            let pre = |j: usize| {
                xp[(k * b + n) * g + j]
                    + (0..hid).map(|m| h[n * hid + m] * w[j * hid + m]).sum::<f64>()
            };
            for m in 0..hid {
                let (i, f) = (sigmoid(pre(m)), sigmoid(pre(hid + m)));
                let (gg, o) = (pre(2 * hid + m).tanh(), sigmoid(pre(3 * hid + m)));
                c1[n * hid + m] = f * c[n * hid + m] + i * gg;
                h1[n * hid + m] = o * c1[n * hid + m].tanh();
                out[(k * b + n) * 2 * hid + m] = h1[n * hid + m];
                out[(k * b + n) * 2 * hid + hid + m] = c1[n * hid + m];
            }
        }
        (h, c) = (h1, c1);
    }
    out
}

#[test]
fn an_lstm_loop_is_the_layer_step_by_step_and_its_backward_is_the_loss_gradient() {
    let (t, b, hid) = (6usize, 2usize, 3usize);
    let g = 4 * hid;
    let xp = values(t * b * g, 11, -1.0, 1.0);
    let w = values(g * hid, 12, -0.7, 0.7);
    let (h0, c0) = (values(b * hid, 13, -1.0, 1.0), values(b * hid, 14, -1.0, 1.0));
    // A loss of every step's h (weights dh) and the last c (weights dc).
    let dh = values(t * b * hid, 15, -1.0, 1.0);
    let dc = values(b * hid, 16, -1.0, 1.0);
    let loss = |xp: &[f64], h0: &[f64], c0: &[f64]| {
        let s = lstm_reference(xp, &w, h0, c0, t, b, hid);
        let mut total = 0.0;
        for k in 0..t {
            for n in 0..b {
                for m in 0..hid {
                    total += s[(k * b + n) * 2 * hid + m] * dh[(k * b + n) * hid + m];
                    if k == t - 1 {
                        total += s[(k * b + n) * 2 * hid + hid + m] * dc[n * hid + m];
                    }
                }
            }
        }
        total
    };
    let (xt, wt) = (tensor(&xp, &[t, b, g]), tensor(&w, &[g, hid]));
    let (h0t, c0t) = (tensor(&h0, &[b, hid]), tensor(&c0, &[b, hid]));
    let states = xt.lstm_loop(&wt, &h0t, &c0t).unwrap();
    let want = lstm_reference(&xp, &w, &h0, &c0, t, b, hid);
    for (i, (got, want)) in states.to_vec::<f64>().unwrap().iter().zip(&want).enumerate() {
        assert!((got - want).abs() <= 1e-12, "state {i} is {got}, expected {want}");
    }
    let back = xt
        .lstm_loop_backward(
            &wt,
            &h0t,
            &c0t,
            &states,
            &tensor(&dh, &[t, b, hid]),
            &tensor(&dc, &[b, hid]),
        )
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    // Central differences of the loss: through the gates' pre-activations (the projected
    // inputs) and the initial states, which the last row holds (h's, then c's).
    let eps = 1e-6;
    for i in 0..t * b * g {
        let numeric = (loss(&nudged(&xp, i, eps), &h0, &c0)
            - loss(&nudged(&xp, i, -eps), &h0, &c0))
            / (2.0 * eps);
        assert!(
            (back[i] - numeric).abs() <= 1e-7,
            "gate gradient {i} is {}, expected {numeric}",
            back[i]
        );
    }
    for n in 0..b {
        for m in 0..hid {
            let i = n * hid + m;
            let dh0 = (loss(&xp, &nudged(&h0, i, eps), &c0)
                - loss(&xp, &nudged(&h0, i, -eps), &c0))
                / (2.0 * eps);
            let dc0 = (loss(&xp, &h0, &nudged(&c0, i, eps))
                - loss(&xp, &h0, &nudged(&c0, i, -eps)))
                / (2.0 * eps);
            let row = (t * b + n) * g;
            assert!(
                (back[row + m] - dh0).abs() <= 1e-7,
                "dh0 {i} is {}, expected {dh0}",
                back[row + m]
            );
            assert!(
                (back[row + hid + m] - dc0).abs() <= 1e-7,
                "dc0 {i} is {}, expected {dc0}",
                back[row + hid + m]
            );
            assert_eq!(back[row + 2 * hid + m], 0.0);
        }
    }
}

/// A GRU layer step by step (torch's gates: reset, update, new): each step's `h`, `[t, b, h]`.
fn gru_reference(
    xp: &[f64],
    w: &[f64],
    bias: &[f64],
    h0: &[f64],
    t: usize,
    b: usize,
    hid: usize,
) -> Vec<f64> {
    let g = 3 * hid;
    let mut h = h0.to_vec();
    let mut out = vec![0.0; t * b * hid];
    for k in 0..t {
        let mut h1 = vec![0.0; b * hid];
        for n in 0..b {
            let rec =
                |j: usize| bias[j] + (0..hid).map(|m| h[n * hid + m] * w[j * hid + m]).sum::<f64>();
            let x = |j: usize| xp[(k * b + n) * g + j];
            for m in 0..hid {
                let r = sigmoid(x(m) + rec(m));
                let z = sigmoid(x(hid + m) + rec(hid + m));
                let new = (x(2 * hid + m) + r * rec(2 * hid + m)).tanh();
                h1[n * hid + m] = (1.0 - z) * new + z * h[n * hid + m];
                out[(k * b + n) * hid + m] = h1[n * hid + m];
            }
        }
        h = h1;
    }
    out
}

#[test]
fn a_gru_loop_is_the_layer_step_by_step_and_its_backward_is_the_loss_gradient() {
    let (t, b, hid) = (5usize, 2usize, 3usize);
    let g = 3 * hid;
    let xp = values(t * b * g, 21, -1.0, 1.0);
    let w = values(g * hid, 22, -0.7, 0.7);
    let bias = values(g, 23, -0.5, 0.5);
    let h0 = values(b * hid, 24, -1.0, 1.0);
    let dh = values(t * b * hid, 25, -1.0, 1.0);
    let loss = |xp: &[f64], bias: &[f64], h0: &[f64]| -> f64 {
        gru_reference(xp, &w, bias, h0, t, b, hid).iter().zip(&dh).map(|(h, d)| h * d).sum()
    };
    let (xt, wt, bt, h0t) = (
        tensor(&xp, &[t, b, g]),
        tensor(&w, &[g, hid]),
        tensor(&bias, &[g]),
        tensor(&h0, &[b, hid]),
    );
    let hs = xt.gru_loop(&wt, &bt, &h0t).unwrap();
    let want = gru_reference(&xp, &w, &bias, &h0, t, b, hid);
    for (i, (got, want)) in hs.to_vec::<f64>().unwrap().iter().zip(&want).enumerate() {
        assert!((got - want).abs() <= 1e-12, "state {i} is {got}, expected {want}");
    }
    let back = xt
        .gru_loop_backward(&wt, &bt, &h0t, &hs, &tensor(&dh, &[t, b, hid]))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let eps = 1e-6;
    // The reset and update gates' and the new state's pre-activations are the projected
    // inputs'; the bias of the recurrent part the reset gate scales is the fourth block's sum.
    for k in 0..t {
        for n in 0..b {
            for j in 0..g {
                let i = (k * b + n) * g + j;
                let numeric = (loss(&nudged(&xp, i, eps), &bias, &h0)
                    - loss(&nudged(&xp, i, -eps), &bias, &h0))
                    / (2.0 * eps);
                let got = back[(k * b + n) * 4 * hid + j];
                assert!(
                    (got - numeric).abs() <= 1e-7,
                    "gate gradient {i} is {got}, expected {numeric}"
                );
            }
        }
    }
    for m in 0..hid {
        let j = 2 * hid + m;
        let numeric = (loss(&xp, &nudged(&bias, j, eps), &h0)
            - loss(&xp, &nudged(&bias, j, -eps), &h0))
            / (2.0 * eps);
        let got: f64 = (0..t * b).map(|r| back[r * 4 * hid + 3 * hid + m]).sum();
        assert!((got - numeric).abs() <= 1e-7, "b_hn gradient {m} is {got}, expected {numeric}");
    }
    for i in 0..b * hid {
        let numeric = (loss(&xp, &bias, &nudged(&h0, i, eps))
            - loss(&xp, &bias, &nudged(&h0, i, -eps)))
            / (2.0 * eps);
        let (n, m) = (i / hid, i % hid);
        let got = back[(t * b + n) * 4 * hid + m];
        assert!((got - numeric).abs() <= 1e-7, "dh0 {i} is {got}, expected {numeric}");
    }
}

#[test]
fn an_rnn_loop_is_the_layer_step_by_step_and_its_backward_is_the_loss_gradient() {
    let (t, b, hid) = (5usize, 2usize, 3usize);
    for relu in [false, true] {
        let xp = values(t * b * hid, 31, -1.0, 1.0);
        let w = values(hid * hid, 32, -0.9, 0.9);
        let h0 = values(b * hid, 33, -1.0, 1.0);
        let dh = values(t * b * hid, 34, -1.0, 1.0);
        let layer = |xp: &[f64], h0: &[f64]| {
            let mut h = h0.to_vec();
            let mut out = Vec::new();
            for k in 0..t {
                h = (0..b * hid)
                    .map(|i| {
                        let (n, m) = (i / hid, i % hid);
                        let pre = xp[k * b * hid + i]
                            + (0..hid).map(|j| h[n * hid + j] * w[m * hid + j]).sum::<f64>();
                        if relu {
                            pre.max(0.0)
                        } else {
                            pre.tanh()
                        }
                    })
                    .collect();
                out.extend_from_slice(&h);
            }
            out
        };
        let loss = |xp: &[f64], h0: &[f64]| -> f64 {
            layer(xp, h0).iter().zip(&dh).map(|(h, d)| h * d).sum()
        };
        let (tt, bb, hh) = (t, b, hid);
        let hs = tensor(&xp, &[tt, bb, hh])
            .rnn_loop(&tensor(&w, &[hh, hh]), &tensor(&h0, &[bb, hh]), relu)
            .unwrap();
        for (i, (got, want)) in hs.to_vec::<f64>().unwrap().iter().zip(&layer(&xp, &h0)).enumerate()
        {
            assert!(
                (got - want).abs() <= 1e-12,
                "relu {relu}: state {i} is {got}, expected {want}"
            );
        }
        let back = hs
            .rnn_loop_backward(&tensor(&w, &[hh, hh]), &tensor(&dh, &[tt, bb, hh]), relu)
            .unwrap();
        let back = back.to_vec::<f64>().unwrap();
        let eps = 1e-6;
        for i in 0..t * b * hid {
            let numeric =
                (loss(&nudged(&xp, i, eps), &h0) - loss(&nudged(&xp, i, -eps), &h0)) / (2.0 * eps);
            assert!(
                (back[i] - numeric).abs() <= 1e-7,
                "relu {relu}: gradient {i} is {}, expected {numeric}",
                back[i]
            );
        }
        for i in 0..b * hid {
            let numeric =
                (loss(&xp, &nudged(&h0, i, eps)) - loss(&xp, &nudged(&h0, i, -eps))) / (2.0 * eps);
            let got = back[t * b * hid + i];
            assert!(
                (got - numeric).abs() <= 1e-7,
                "relu {relu}: dh0 {i} is {got}, expected {numeric}"
            );
        }
    }
}

/// `a` (`n x n`, row-major) times `b`.
fn times(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
        }
    }
    out
}

#[test]
fn squarings_square_each_matrix_its_own_number_of_times() {
    // A batch of 2 x 3 matrices 4 x 4: counts 0 (unchanged), 1, 2, 5, 3, 0 — the loop runs
    // five rounds and must leave each matrix at its own count.
    let n = 4usize;
    let counts = [0i64, 1, 2, 5, 3, 0];
    let m = values(counts.len() * n * n, 11, -0.6, 0.6);
    let got = tensor(&m, &[2, 3, n, n])
        .squarings(&Tensor::from_slice(&counts, &[2, 3]).unwrap())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    for (i, &count) in counts.iter().enumerate() {
        let mut want = m[i * n * n..(i + 1) * n * n].to_vec();
        for _ in 0..count {
            want = times(&want, &want, n);
        }
        for (j, (g, w)) in got[i * n * n..(i + 1) * n * n].iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "matrix {i}, entry {j}: {g}, expected {w}"
            );
        }
    }
    // One matrix, its count a 0-d tensor.
    let one = tensor(&m[..n * n], &[n, n])
        .squarings(&Tensor::from_slice(&[3i64], &[]).unwrap())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let mut want = m[..n * n].to_vec();
    for _ in 0..3 {
        want = times(&want, &want, n);
    }
    assert!(one.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-12 * w.abs().max(1.0)));
    // No matrices (an empty batch): no round runs.
    let none =
        tensor(&[], &[0, n, n]).squarings(&Tensor::from_slice(&[0i64; 0], &[0]).unwrap()).unwrap();
    assert_eq!(none.to_vec::<f64>().unwrap().len(), 0);
}

#[test]
fn squarings_of_matrices_that_are_not_square_are_an_error_naming_both_shapes() {
    let m = Tensor::from_slice(&[0.0f32; 2 * 3 * 4], &[2, 3, 4]).unwrap();
    let counts = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    match m.squarings(&counts) {
        Err(Error::Shape { message, .. }) => {
            assert!(message.contains("f32[2,3,4]") && message.contains("s64[2]"), "{message}")
        }
        other => panic!("expected a shape error, got {:?}", other.map(|t| t.shape().to_string())),
    }
}

#[test]
fn a_three_term_recurrence_is_each_element_s_polynomial_of_its_own_degree() {
    // Legendre's: P_m = ((2m - 1) x P_{m-1} - (m - 1) P_{m-2}) / m, from P_1 = x, each element
    // to its own degree (0 and 1 give P_1, the caller's to replace), against the recurrence
    // written out; and Hermite's at a degree where it overflows to NaN, which stops the loop
    // and stays NaN.
    let x = values(12, 7, -1.2, 1.2);
    let n: Vec<i64> = vec![0, 1, 2, 3, 5, 8, 13, 21, 2, 4, 30, 7];
    let got = tensor(&x, &[3, 4])
        .three_term_recurrence(
            &Tensor::from_slice(&n, &[3, 4]).unwrap(),
            &tensor(&x, &[3, 4]),
            [2, -1, 0, 0, 1, -1, 1, 0],
        )
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    for (i, (&xi, &ni)) in x.iter().zip(&n).enumerate() {
        let (mut p, mut q) = (1.0, xi);
        for m in 2..=ni {
            let m = m as f64;
            let r = ((2.0 * m - 1.0) * xi * q - (m - 1.0) * p) / m;
            p = q;
            q = r;
        }
        assert!(
            (got[i] - q).abs() <= 1e-12 * q.abs().max(1.0),
            "element {i} (n = {ni}): {}, expected {q}",
            got[i]
        );
    }
    let big = Tensor::from_slice(&[40.0f32, 0.5], &[2]).unwrap();
    let h = big
        .three_term_recurrence(
            &Tensor::from_slice(&[400i64, 3], &[2]).unwrap(),
            &big.mul_scalar(2.0).unwrap(),
            [0, 2, 0, 0, 2, -2, 0, 1],
        )
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(h[0].is_nan() && (h[1] - (8.0 * 0.125 - 12.0 * 0.5)).abs() < 1e-5, "{h:?}");
}
