//! Finite-difference gradient checks, in f64, for every differentiable op, and the semantics of
//! autograd (accumulation, `zero_grad`, `no_grad`, `detach`, errors, freed graphs).
//!
//! `gradcheck` runs `f` once with leaf inputs that require grad, reduces the output to a scalar
//! with a fixed weighting (so every output element matters), back-propagates, and compares each
//! input's gradient with central differences of the same weighted scalar, computed by re-running
//! `f` on perturbed host values under `no_grad`. Every perturbed run is the same graph structure,
//! so it is a cache hit after the first compile. Nothing here calls `sync()`: values are read with
//! `to_vec`/`item`, which materialize only what they need, so the tests can run in parallel.

use xlaprof_core::{no_grad, DType, Error, Result, Tensor};

// ---------------------------------------------------------------------------------------------
// The checker
// ---------------------------------------------------------------------------------------------

const EPS: f64 = 1e-6;
const RTOL: f64 = 1e-6;
const ATOL: f64 = 1e-6;

/// A small deterministic generator (64-bit LCG), so every run sees the same values.
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        Lcg(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1)
    }
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn count(dims: &[i64]) -> usize {
    dims.iter().product::<i64>() as usize
}

/// Values in ±[0.1, 1.1): away from 0 (relu, abs kinks) and, in practice, free of ties.
fn rnd(dims: &[i64], seed: u64) -> (Vec<f64>, Vec<i64>) {
    let mut g = Lcg::new(seed);
    let v = (0..count(dims))
        .map(|_| {
            let m = 0.1 + g.next();
            if g.next() < 0.5 {
                -m
            } else {
                m
            }
        })
        .collect();
    (v, dims.to_vec())
}

/// Values in [lo, hi).
fn uniform(dims: &[i64], seed: u64, lo: f64, hi: f64) -> (Vec<f64>, Vec<i64>) {
    let mut g = Lcg::new(seed);
    let v = (0..count(dims)).map(|_| lo + (hi - lo) * g.next()).collect();
    (v, dims.to_vec())
}

/// Positive values in [0.5, 2).
fn pos(dims: &[i64], seed: u64) -> (Vec<f64>, Vec<i64>) {
    uniform(dims, seed, 0.5, 2.0)
}

/// Distinct values 0.1 * (a permutation of 1..=n) with random signs: no ties, gaps >> EPS.
fn distinct(dims: &[i64], seed: u64) -> (Vec<f64>, Vec<i64>) {
    let n = count(dims);
    let mut g = Lcg::new(seed);
    let mut v: Vec<f64> = (1..=n).map(|i| 0.1 * i as f64).collect();
    for i in (1..n).rev() {
        let j = (g.next() * (i + 1) as f64) as usize;
        v.swap(i, j);
    }
    for x in &mut v {
        if g.next() < 0.5 {
            *x = -*x;
        }
    }
    (v, dims.to_vec())
}

/// The fixed weighting of an output of `dims`: values in ±[0.5, 1.5).
fn weights(dims: &[i64]) -> Vec<f64> {
    let mut g = Lcg::new(0x5eed);
    (0..count(dims))
        .map(|_| {
            let m = 0.5 + g.next();
            if g.next() < 0.5 {
                -m
            } else {
                m
            }
        })
        .collect()
}

/// A constant f64 tensor (not requiring grad).
fn c(values: &[f64], dims: &[i64]) -> Tensor {
    Tensor::from_slice(values, dims).expect("from_slice")
}

fn idx(values: &[i64]) -> Tensor {
    Tensor::from_slice(values, &[values.len() as i64]).expect("from_slice s64")
}

fn weighted(out: &Tensor, w: &Tensor) -> Result<Tensor> {
    out.mul(w)?.sum(&[], false)
}

/// Checks the gradients of `f` at `inputs` against central differences; panics with every
/// mismatching element (input, flat index, analytic, numeric).
fn gradcheck(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[(Vec<f64>, Vec<i64>)]) {
    if let Err(msg) = try_gradcheck(&f, inputs) {
        panic!("gradcheck failed:\n{msg}");
    }
}

fn try_gradcheck(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[(Vec<f64>, Vec<i64>)],
) -> std::result::Result<(), String> {
    let e = |what: &str, err: Error| format!("{what}: {err}");
    for (i, (v, d)) in inputs.iter().enumerate() {
        assert_eq!(v.len(), count(d), "input {i}: {} values for dims {d:?}", v.len());
    }
    // Analytic: one forward with leaves that require grad, one backward.
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|(v, d)| {
            let t = c(v, d);
            t.set_requires_grad(true);
            t
        })
        .collect();
    let out = f(&leaves).map_err(|err| e("forward", err))?;
    if out.dtype() != DType::F64 {
        return Err(format!("the output is {}, not f64", out.shape()));
    }
    let out_dims = out.dims().to_vec();
    let w = c(&weights(&out_dims), &out_dims);
    let loss = weighted(&out, &w).map_err(|err| e("weighting", err))?;
    if !out.requires_grad() {
        return Err(format!(
            "the output {} does not require grad (the op recorded no gradient)",
            out.shape()
        ));
    }
    loss.backward().map_err(|err| e("backward", err))?;
    let mut analytic = Vec::new();
    for (i, leaf) in leaves.iter().enumerate() {
        match leaf.grad() {
            None => analytic.push(None),
            Some(g) => {
                if g.shape() != leaf.shape() {
                    return Err(format!(
                        "input {i}: the gradient is {} but the input is {}",
                        g.shape(),
                        leaf.shape()
                    ));
                }
                let values = g
                    .to_vec::<f64>()
                    .map_err(|err| e(&format!("reading grad of input {i}"), err))?;
                analytic.push(Some(values));
            }
        }
    }
    drop(loss);
    drop(out);
    drop(leaves);

    // Numeric: central differences of the same weighted scalar.
    let eval = |values: &[Vec<f64>]| -> std::result::Result<f64, String> {
        no_grad(|| {
            let ts: Vec<Tensor> = values.iter().zip(inputs).map(|(v, (_, d))| c(v, d)).collect();
            let out = f(&ts).map_err(|err| e("forward (perturbed)", err))?;
            let s = weighted(&out, &w).map_err(|err| e("weighting (perturbed)", err))?;
            s.item().map_err(|err| e("item (perturbed)", err))
        })
    };
    let mut values: Vec<Vec<f64>> = inputs.iter().map(|(v, _)| v.clone()).collect();
    let mut bad = Vec::new();
    for i in 0..inputs.len() {
        let mut numeric = Vec::with_capacity(values[i].len());
        for j in 0..values[i].len() {
            let x0 = values[i][j];
            values[i][j] = x0 + EPS;
            let fp = eval(&values)?;
            values[i][j] = x0 - EPS;
            let fm = eval(&values)?;
            values[i][j] = x0;
            numeric.push((fp - fm) / (2.0 * EPS));
        }
        match &analytic[i] {
            None => {
                if numeric.iter().any(|n| n.abs() > ATOL) {
                    bad.push(format!(
                        "input {i} {:?}: no gradient, numeric {numeric:?}",
                        inputs[i].1
                    ));
                }
            }
            Some(a) => {
                for (j, (&a, &n)) in a.iter().zip(&numeric).enumerate() {
                    let ok = (a - n).abs() <= ATOL + RTOL * a.abs().max(n.abs());
                    if !ok {
                        bad.push(format!(
                            "input {i} {:?} [{j}] = {}: analytic {a:.9}, numeric {n:.9}",
                            inputs[i].1, inputs[i].0[j]
                        ));
                    }
                }
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n"))
    }
}

// ---------------------------------------------------------------------------------------------
// Elementwise binary ops (with broadcasting)
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_add() {
    gradcheck(|x| x[0].add(&x[1]), &[rnd(&[2, 3], 1), rnd(&[2, 3], 2)]);
    gradcheck(|x| x[0].add(&x[1]), &[rnd(&[2, 3], 3), rnd(&[3], 4)]);
    gradcheck(|x| x[0].add_scalar(0.7), &[rnd(&[4], 5)]);
}

#[test]
fn grad_sub() {
    gradcheck(|x| x[0].sub(&x[1]), &[rnd(&[2, 1], 6), rnd(&[1, 3], 7)]);
    gradcheck(|x| x[0].sub_scalar(0.3), &[rnd(&[3], 8)]);
}

#[test]
fn grad_mul() {
    gradcheck(|x| x[0].mul(&x[1]), &[rnd(&[2, 3], 9), rnd(&[2, 3], 10)]);
    gradcheck(|x| x[0].mul(&x[1]), &[rnd(&[2, 3], 11), rnd(&[2, 1], 12)]);
    gradcheck(|x| x[0].mul_scalar(-1.7), &[rnd(&[3], 13)]);
    // The same input on both sides: the two contributions add.
    gradcheck(|x| x[0].mul(&x[0]), &[rnd(&[3], 14)]);
}

#[test]
fn grad_div() {
    gradcheck(|x| x[0].div(&x[1]), &[rnd(&[2, 3], 15), pos(&[2, 3], 16)]);
    gradcheck(|x| x[0].div(&x[1]), &[rnd(&[2, 3], 17), rnd(&[3], 18)]);
    gradcheck(|x| x[0].div_scalar(0.4), &[rnd(&[3], 19)]);
}

#[test]
fn grad_pow() {
    gradcheck(|x| x[0].pow(&x[1]), &[pos(&[2, 3], 20), rnd(&[2, 3], 21)]);
    gradcheck(|x| x[0].pow(&x[1]), &[pos(&[2, 3], 22), rnd(&[3], 23)]);
    gradcheck(|x| x[0].pow_scalar(3.0), &[rnd(&[4], 24)]);
    gradcheck(|x| x[0].pow_scalar(0.5), &[pos(&[4], 25)]);
}

#[test]
fn grad_maximum() {
    // Distinct values: no ties between the two operands.
    let (v, _) = distinct(&[12], 26);
    let a = (v[..6].to_vec(), vec![2, 3]);
    let b = (v[6..].to_vec(), vec![2, 3]);
    gradcheck(|x| x[0].maximum(&x[1]), &[a.clone(), b.clone()]);
    gradcheck(|x| x[0].maximum(&x[1]), &[a, (v[6..9].to_vec(), vec![3])]);
    gradcheck(|x| x[0].maximum_scalar(0.05), &[rnd(&[6], 27)]);
}

#[test]
fn grad_minimum() {
    let (v, _) = distinct(&[12], 28);
    let a = (v[..6].to_vec(), vec![2, 3]);
    let b = (v[6..].to_vec(), vec![2, 3]);
    gradcheck(|x| x[0].minimum(&x[1]), &[a.clone(), b]);
    gradcheck(|x| x[0].minimum(&x[1]), &[a, (v[6..8].to_vec(), vec![2, 1])]);
    gradcheck(|x| x[0].minimum_scalar(-0.05), &[rnd(&[6], 29)]);
}

#[test]
fn grad_remainder() {
    // Away from the jumps of the remainder; positive and negative dividends.
    let a = (vec![5.3, -5.3, 2.9, -0.7, 7.45, -3.1], vec![6]);
    let b = (vec![2.0, 2.0, 1.3, 1.6, -2.2, -1.9], vec![6]);
    gradcheck(|x| x[0].remainder(&x[1]), &[a, b]);
}

// ---------------------------------------------------------------------------------------------
// Elementwise unary ops and composites
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_neg() {
    gradcheck(|x| x[0].neg(), &[rnd(&[2, 3], 30)]);
}

#[test]
fn grad_abs() {
    gradcheck(|x| x[0].abs(), &[rnd(&[2, 3], 31)]);
}

#[test]
fn grad_exp() {
    gradcheck(|x| x[0].exp(), &[rnd(&[2, 3], 32)]);
}

#[test]
fn grad_log() {
    gradcheck(|x| x[0].log(), &[pos(&[2, 3], 33)]);
}

#[test]
fn grad_sqrt() {
    gradcheck(|x| x[0].sqrt(), &[pos(&[2, 3], 34)]);
}

#[test]
fn grad_rsqrt() {
    gradcheck(|x| x[0].rsqrt(), &[pos(&[2, 3], 35)]);
}

#[test]
fn grad_sin() {
    gradcheck(|x| x[0].sin(), &[uniform(&[2, 3], 36, -3.0, 3.0)]);
}

#[test]
fn grad_cos() {
    gradcheck(|x| x[0].cos(), &[uniform(&[2, 3], 37, -3.0, 3.0)]);
}

#[test]
fn grad_tanh() {
    gradcheck(|x| x[0].tanh(), &[uniform(&[2, 3], 38, -2.0, 2.0)]);
}

#[test]
fn grad_erf_erfc_log1p_expm1() {
    gradcheck(|x| x[0].erf(), &[uniform(&[2, 3], 81, -2.0, 2.0)]);
    gradcheck(|x| x[0].erfc(), &[uniform(&[2, 3], 82, -2.0, 2.0)]);
    gradcheck(|x| x[0].log1p(), &[uniform(&[2, 3], 83, -0.5, 2.0)]);
    gradcheck(|x| x[0].expm1(), &[uniform(&[2, 3], 84, -2.0, 2.0)]);
}

#[test]
fn grad_zeta_in_q() {
    gradcheck(
        |x| Tensor::full(&[2, 3], 3.0, x[0].dtype()).zeta(&x[0]),
        &[uniform(&[2, 3], 85, 0.5, 3.0)],
    );
}

#[test]
fn grad_sigmoid() {
    gradcheck(|x| x[0].sigmoid(), &[uniform(&[2, 3], 39, -3.0, 3.0)]);
}

#[test]
fn grad_relu() {
    gradcheck(|x| x[0].relu(), &[rnd(&[2, 4], 40)]);
}

#[test]
fn grad_gelu() {
    gradcheck(|x| x[0].gelu(), &[uniform(&[2, 4], 41, -3.0, 3.0)]);
}

#[test]
fn grad_silu() {
    gradcheck(|x| x[0].silu(), &[uniform(&[2, 4], 42, -3.0, 3.0)]);
}

#[test]
fn grad_clamp() {
    // Below, inside and above [-0.5, 0.5], none within EPS of a bound.
    let x = (vec![-1.2, -0.7, -0.3, 0.1, 0.45, 0.8, 1.5, -0.05], vec![2, 4]);
    gradcheck(|x| x[0].clamp(-0.5, 0.5), &[x]);
}

#[test]
fn grad_where() {
    let cond = c(&[1.0, -1.0, 1.0, 1.0, -1.0, -1.0], &[2, 3]).gt_scalar(0.0).unwrap();
    gradcheck(|x| Tensor::where_(&cond, &x[0], &x[1]), &[rnd(&[2, 3], 43), rnd(&[2, 3], 44)]);
    // Broadcast operands and condition.
    let cond_row = c(&[1.0, -1.0, 1.0], &[3]).gt_scalar(0.0).unwrap();
    gradcheck(|x| Tensor::where_(&cond_row, &x[0], &x[1]), &[rnd(&[2, 3], 45), rnd(&[2, 1], 46)]);
}

#[test]
fn grad_cast_flows() {
    // f64 -> f32 -> f64 is not smooth at the scale of EPS: check that the gradient flows back,
    // with the input's dtype and the exact value.
    let x = c(&[0.5, -1.25, 2.0], &[3]);
    x.set_requires_grad(true);
    let y = x.cast(DType::F32).unwrap().mul_scalar(3.0).unwrap().cast(DType::F64).unwrap();
    assert!(y.requires_grad());
    y.sum(&[], false).unwrap().backward().unwrap();
    let g = x.grad().expect("the gradient flows through cast");
    assert_eq!(g.dtype(), DType::F64);
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![3.0, 3.0, 3.0]);
}

#[test]
fn grad_composite_expression() {
    // A diamond: x feeds three branches that meet again.
    gradcheck(
        |x| {
            let a = x[0].sin()?;
            let b = x[0].mul(&x[1])?;
            let c = x[0].exp()?.div(&x[1].mul(&x[1])?.add_scalar(1.0)?)?;
            a.mul(&b)?.add(&c)?.tanh()
        },
        &[rnd(&[2, 3], 47), rnd(&[3], 48)],
    );
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_sum() {
    gradcheck(|x| x[0].sum(&[], false), &[rnd(&[2, 3], 50)]);
    gradcheck(|x| x[0].sum(&[1], false), &[rnd(&[2, 3], 51)]);
    gradcheck(|x| x[0].sum(&[0], true), &[rnd(&[2, 3], 52)]);
    gradcheck(|x| x[0].sum(&[0, 2], false), &[rnd(&[2, 3, 2], 53)]);
    gradcheck(|x| x[0].sum(&[-1], true), &[rnd(&[2, 3, 2], 54)]);
}

#[test]
fn grad_mean() {
    gradcheck(|x| x[0].mean(&[], false), &[rnd(&[2, 3], 55)]);
    gradcheck(|x| x[0].mean(&[1], true), &[rnd(&[2, 3], 56)]);
    gradcheck(|x| x[0].mean(&[0, 2], false), &[rnd(&[2, 3, 2], 57)]);
}

#[test]
fn grad_amax() {
    gradcheck(|x| x[0].amax(&[], false), &[distinct(&[2, 3], 58)]);
    gradcheck(|x| x[0].amax(&[1], false), &[distinct(&[2, 3], 59)]);
    gradcheck(|x| x[0].amax(&[0], true), &[distinct(&[2, 3], 60)]);
    gradcheck(|x| x[0].amax(&[0, 2], false), &[distinct(&[2, 3, 2], 61)]);
}

#[test]
fn grad_amin() {
    gradcheck(|x| x[0].amin(&[], false), &[distinct(&[2, 3], 62)]);
    gradcheck(|x| x[0].amin(&[1], true), &[distinct(&[2, 3], 63)]);
    gradcheck(|x| x[0].amin(&[-1], false), &[distinct(&[2, 3, 2], 64)]);
}

#[test]
fn grad_var() {
    gradcheck(|x| x[0].var(&[], 1, false), &[rnd(&[2, 3], 65)]);
    gradcheck(|x| x[0].var(&[1], 1, true), &[rnd(&[2, 3], 66)]);
    gradcheck(|x| x[0].var(&[0], 0, false), &[rnd(&[3, 2], 67)]);
}

#[test]
fn grad_logsumexp() {
    gradcheck(|x| x[0].logsumexp(&[], false), &[rnd(&[2, 3], 68)]);
    gradcheck(|x| x[0].logsumexp(&[1], false), &[rnd(&[2, 3], 69)]);
    gradcheck(|x| x[0].logsumexp(&[0], true), &[rnd(&[2, 3], 70)]);
}

// ---------------------------------------------------------------------------------------------
// Movement ops
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_reshape() {
    gradcheck(|x| x[0].reshape(&[3, 2]), &[rnd(&[2, 3], 71)]);
    gradcheck(|x| x[0].reshape(&[-1]), &[rnd(&[2, 3], 72)]);
    gradcheck(|x| x[0].flatten(), &[rnd(&[2, 1, 3], 73)]);
}

#[test]
fn grad_permute() {
    gradcheck(|x| x[0].permute(&[2, 0, 1]), &[rnd(&[2, 3, 2], 74)]);
    gradcheck(|x| x[0].permute(&[1, 2, 0]), &[rnd(&[2, 3, 2], 75)]);
}

#[test]
fn grad_transpose() {
    gradcheck(|x| x[0].transpose(0, 1), &[rnd(&[2, 3], 76)]);
    gradcheck(|x| x[0].transpose(-1, 0), &[rnd(&[2, 3, 2], 77)]);
}

#[test]
fn grad_broadcast_to() {
    gradcheck(|x| x[0].broadcast_to(&[2, 3]), &[rnd(&[3], 78)]);
    gradcheck(|x| x[0].broadcast_to(&[2, 2, 3]), &[rnd(&[2, 1], 79)]);
    gradcheck(|x| x[0].broadcast_to(&[2, 3]), &[rnd(&[], 80)]);
}

#[test]
fn grad_squeeze_unsqueeze() {
    gradcheck(|x| x[0].squeeze(1), &[rnd(&[2, 1, 3], 81)]);
    gradcheck(|x| x[0].unsqueeze(0), &[rnd(&[2, 3], 82)]);
    gradcheck(|x| x[0].unsqueeze(-1), &[rnd(&[2, 3], 83)]);
}

#[test]
fn grad_slice() {
    gradcheck(|x| x[0].slice(0, 1, 6, 2), &[rnd(&[7], 84)]);
    gradcheck(|x| x[0].slice(1, 0, 5, 2), &[rnd(&[2, 5], 85)]);
    gradcheck(|x| x[0].slice(1, 1, 4, 3), &[rnd(&[2, 5], 86)]);
    gradcheck(|x| x[0].slice(-1, -3, -1, 1), &[rnd(&[2, 5], 87)]);
    gradcheck(|x| x[0].slice(0, 1, 3, 1), &[rnd(&[3, 2], 88)]);
}

#[test]
fn grad_concat() {
    gradcheck(
        |x| Tensor::concat(&[&x[0], &x[1], &x[2]], 1),
        &[rnd(&[2, 1], 89), rnd(&[2, 3], 90), rnd(&[2, 2], 91)],
    );
    gradcheck(|x| Tensor::concat(&[&x[0], &x[1]], 0), &[rnd(&[1, 3], 92), rnd(&[2, 3], 93)]);
    // The same tensor twice.
    gradcheck(|x| Tensor::concat(&[&x[0], &x[0]], 0), &[rnd(&[3], 94)]);
}

#[test]
fn grad_stack() {
    gradcheck(
        |x| Tensor::stack(&[&x[0], &x[1], &x[2]], 0),
        &[rnd(&[2, 2], 95), rnd(&[2, 2], 96), rnd(&[2, 2], 97)],
    );
    gradcheck(|x| Tensor::stack(&[&x[0], &x[1]], -1), &[rnd(&[3], 98), rnd(&[3], 99)]);
}

#[test]
fn grad_pad() {
    gradcheck(|x| x[0].pad(&[(1, 2), (0, 1)], 0.5), &[rnd(&[2, 3], 100)]);
    gradcheck(|x| x[0].pad(&[(2, 0)], 0.0), &[rnd(&[3], 101)]);
}

#[test]
fn grad_flip() {
    gradcheck(|x| x[0].flip(&[0]), &[rnd(&[2, 3], 102)]);
    gradcheck(|x| x[0].flip(&[0, 1]), &[rnd(&[2, 3], 103)]);
    gradcheck(|x| x[0].flip(&[-1]), &[rnd(&[2, 3, 2], 104)]);
}

#[test]
fn grad_index_select() {
    // Repeated indices: their gradients add up.
    let i = idx(&[2, 0, 2, 3, 2]);
    gradcheck(|x| x[0].index_select(0, &i), &[rnd(&[4, 2], 105)]);
    let j = idx(&[1, 1, 0]);
    gradcheck(|x| x[0].index_select(1, &j), &[rnd(&[2, 3], 106)]);
    let k = Tensor::from_slice(&[0i32, 2, 0], &[3]).unwrap();
    gradcheck(|x| x[0].index_select(-1, &k), &[rnd(&[2, 3], 107)]);
}

#[test]
fn grad_index_add() {
    let i = idx(&[1, 3, 1]);
    gradcheck(|x| x[0].index_add(0, &i, &x[1]), &[rnd(&[4, 2], 108), rnd(&[3, 2], 109)]);
    let j = idx(&[0, 0]);
    gradcheck(|x| x[0].index_add(1, &j, &x[1]), &[rnd(&[2, 3], 110), rnd(&[2, 2], 111)]);
}

// ---------------------------------------------------------------------------------------------
// Matrix products
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_matmul_2d() {
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[2, 3], 120), rnd(&[3, 4], 121)]);
    gradcheck(|x| x[0].matmul(&x[0]), &[rnd(&[3, 3], 122)]);
}

#[test]
fn grad_matmul_batched() {
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[2, 2, 3], 123), rnd(&[2, 3, 2], 124)]);
    // Broadcast batch dims: [2,1,2,3] @ [3,3,2] -> [2,3,2,2], and a plain matrix on the right.
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[2, 1, 2, 3], 125), rnd(&[3, 3, 2], 126)]);
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[2, 2, 3], 127), rnd(&[3, 2], 128)]);
}

#[test]
fn grad_matmul_vectors() {
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[3], 129), rnd(&[3], 130)]);
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[3], 131), rnd(&[3, 2], 132)]);
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[2, 3], 133), rnd(&[3], 134)]);
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[3], 135), rnd(&[2, 3, 2], 136)]);
    gradcheck(|x| x[0].matmul(&x[1]), &[rnd(&[2, 2, 3], 137), rnd(&[3], 138)]);
}

// ---------------------------------------------------------------------------------------------
// Neural-network ops
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_softmax() {
    gradcheck(|x| x[0].softmax(-1), &[rnd(&[2, 3], 140)]);
    gradcheck(|x| x[0].softmax(0), &[rnd(&[2, 3], 141)]);
}

#[test]
fn grad_log_softmax() {
    gradcheck(|x| x[0].log_softmax(-1), &[rnd(&[2, 3], 142)]);
    gradcheck(|x| x[0].log_softmax(0), &[rnd(&[3, 2], 143)]);
}

#[test]
fn grad_cross_entropy() {
    let labels = idx(&[2, 0, 1]);
    gradcheck(|x| x[0].cross_entropy(&labels), &[rnd(&[3, 4], 144)]);
    // Through a linear layer, as in training.
    gradcheck(
        |x| x[0].matmul(&x[1])?.add(&x[2])?.cross_entropy(&labels),
        &[rnd(&[3, 2], 145), rnd(&[2, 4], 146), rnd(&[4], 147)],
    );
}

#[test]
fn grad_layer_norm() {
    gradcheck(
        |x| x[0].layer_norm(&[3], Some(&x[1]), Some(&x[2]), 1e-5),
        &[rnd(&[2, 3], 150), rnd(&[3], 151), rnd(&[3], 152)],
    );
    gradcheck(
        |x| x[0].layer_norm(&[2, 3], Some(&x[1]), Some(&x[2]), 1e-5),
        &[rnd(&[2, 2, 3], 153), rnd(&[2, 3], 154), rnd(&[2, 3], 155)],
    );
    gradcheck(|x| x[0].layer_norm(&[4], None, None, 1e-5), &[rnd(&[2, 4], 156)]);
}

#[test]
fn grad_embedding() {
    let ids = Tensor::from_slice(&[3i64, 0, 3, 1, 3, 0], &[2, 3]).unwrap();
    gradcheck(|x| x[0].embedding(&ids), &[rnd(&[4, 2], 157)]);
    let flat = idx(&[1, 1, 2]);
    gradcheck(|x| x[0].embedding(&flat), &[rnd(&[3, 3], 158)]);
}

#[test]
fn grad_dropout() {
    // A fixed seed gives the same mask in every evaluation.
    let out = c(&[1.0; 16], &[16]).dropout(0.5, 1234, true).unwrap();
    let v = out.to_vec::<f64>().unwrap();
    let zeros = v.iter().filter(|&&x| x == 0.0).count();
    assert!(zeros > 0 && zeros < 16, "a trivial mask: {v:?}");
    assert!(v.iter().all(|&x| x == 0.0 || x == 2.0), "{v:?}");
    gradcheck(|x| x[0].dropout(0.5, 1234, true), &[rnd(&[16], 160)]);
    gradcheck(|x| x[0].dropout(0.25, 99, true), &[rnd(&[2, 4], 161)]);
    gradcheck(|x| x[0].dropout(0.5, 1234, false), &[rnd(&[4], 162)]);
}

#[test]
fn grad_conv2d() {
    gradcheck(
        |x| x[0].conv2d(&x[1], [1, 1], [0, 0], [1, 1], 1),
        &[rnd(&[1, 2, 3, 3], 170), rnd(&[2, 2, 2, 2], 171)],
    );
}

#[test]
fn grad_conv2d_stride_padding_dilation() {
    gradcheck(
        |x| x[0].conv2d(&x[1], [2, 1], [1, 1], [1, 1], 1),
        &[rnd(&[1, 1, 4, 3], 172), rnd(&[2, 1, 2, 2], 173)],
    );
    gradcheck(
        |x| x[0].conv2d(&x[1], [1, 1], [0, 1], [2, 1], 1),
        &[rnd(&[1, 1, 4, 3], 174), rnd(&[1, 1, 2, 2], 175)],
    );
}

#[test]
fn grad_conv2d_groups() {
    gradcheck(
        |x| x[0].conv2d(&x[1], [1, 1], [0, 0], [1, 1], 2),
        &[rnd(&[2, 2, 3, 3], 176), rnd(&[2, 1, 2, 2], 177)],
    );
    // Groups of several input and output channels (ResNeXt's), with stride and dilation.
    gradcheck(
        |x| x[0].conv2d(&x[1], [2, 1], [1, 0], [1, 2], 3),
        &[rnd(&[2, 6, 5, 5], 178), rnd(&[9, 2, 2, 2], 179)],
    );
    // Depthwise, with a channel multiplier of two (MobileNet's and EfficientNet's).
    gradcheck(
        |x| x[0].conv2d(&x[1], [2, 2], [1, 1], [1, 1], 3),
        &[rnd(&[1, 3, 5, 4], 184), rnd(&[6, 1, 3, 3], 185)],
    );
}

#[test]
fn grad_max_pool2d() {
    gradcheck(|x| x[0].max_pool2d([2, 2], [2, 2], [0, 0]), &[distinct(&[1, 2, 4, 4], 180)]);
    // Overlapping windows and padding.
    gradcheck(|x| x[0].max_pool2d([2, 2], [1, 1], [1, 1]), &[distinct(&[1, 1, 3, 3], 181)]);
}

#[test]
fn grad_avg_pool2d() {
    gradcheck(|x| x[0].avg_pool2d([2, 2], [2, 2], [0, 0]), &[rnd(&[1, 2, 4, 4], 182)]);
    gradcheck(|x| x[0].avg_pool2d([2, 2], [1, 1], [1, 1]), &[rnd(&[1, 1, 3, 3], 183)]);
}

// ---------------------------------------------------------------------------------------------
// Autograd semantics
// ---------------------------------------------------------------------------------------------

fn leaf(values: &[f64]) -> Tensor {
    let t = c(values, &[values.len() as i64]);
    t.set_requires_grad(true);
    t
}

fn grad_of(t: &Tensor) -> Vec<f64> {
    t.grad().expect("a gradient").to_vec::<f64>().expect("read grad")
}

#[test]
fn gradients_accumulate_over_two_backwards() {
    let x = leaf(&[1.0, -2.0, 3.0]);
    x.mul(&x).unwrap().sum(&[], false).unwrap().backward().unwrap(); // 2x
    assert_eq!(grad_of(&x), vec![2.0, -4.0, 6.0]);
    x.mul_scalar(3.0).unwrap().sum(&[], false).unwrap().backward().unwrap(); // + 3
    assert_eq!(grad_of(&x), vec![5.0, -1.0, 9.0]);
}

#[test]
fn zero_grad_clears() {
    let x = leaf(&[1.0, 2.0]);
    x.mul_scalar(4.0).unwrap().sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![4.0, 4.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
    x.mul(&x).unwrap().sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![2.0, 4.0]);
}

#[test]
fn no_grad_records_no_grad_fn() {
    let x = leaf(&[1.0, 2.0]);
    let y = no_grad(|| x.mul(&x).unwrap().exp().unwrap());
    assert!(!y.requires_grad());
    assert!(!format!("{y:?}").contains("grad_fn"), "{y:?}");
    let s = y.sum(&[], false).unwrap();
    assert!(!s.requires_grad());
    let e = s.backward().unwrap_err();
    assert!(matches!(e, Error::Autograd { .. }), "{e}");
    assert!(e.to_string().contains("does not require grad"), "{e}");
    // Recording is back on after no_grad, and nested no_grad restores the outer state.
    assert!(x.mul(&x).unwrap().requires_grad());
    no_grad(|| {
        no_grad(|| ());
        assert!(!x.mul(&x).unwrap().requires_grad());
    });
    assert!(x.mul(&x).unwrap().requires_grad());
}

#[test]
fn no_grad_is_per_thread() {
    let x = leaf(&[1.0, 2.0]);
    no_grad(|| {
        let x2 = x.clone();
        let recorded =
            std::thread::spawn(move || x2.mul_scalar(2.0).unwrap().requires_grad()).join().unwrap();
        assert!(recorded, "no_grad on one thread turned off recording on another");
    });
}

#[test]
fn no_grad_restores_recording_after_a_panic() {
    let x = leaf(&[1.0, 2.0]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        no_grad(|| -> () { panic!("inside no_grad (expected by this test)") })
    }));
    assert!(r.is_err());
    assert!(
        x.mul_scalar(2.0).unwrap().requires_grad(),
        "a panic inside no_grad left gradient recording off on this thread"
    );
}

#[test]
fn detach_cuts_the_graph() {
    let x = leaf(&[1.0, 2.0, 3.0]);
    let d = x.mul(&x).unwrap().detach();
    assert!(!d.requires_grad());
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![1.0, 4.0, 9.0]);
    // d(x^2.detach() * x)/dx = x^2, not 3x^2.
    d.mul(&x).unwrap().sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![1.0, 4.0, 9.0]);
    // A leaf's detach does not require grad, and nothing flows through it.
    let y = leaf(&[5.0]);
    let e = y.detach().mul_scalar(2.0).unwrap().sum(&[], false).unwrap().backward();
    assert!(e.is_err());
    assert!(y.grad().is_none());
}

#[test]
fn backward_on_a_non_scalar_names_the_shape() {
    let x = c(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    x.set_requires_grad(true);
    let y = x.mul_scalar(2.0).unwrap();
    let e = y.backward().unwrap_err();
    assert!(matches!(e, Error::Autograd { .. }), "{e}");
    assert!(e.to_string().contains("f64[2,3]"), "{e}");
    assert!(e.to_string().contains("core/tests/gradcheck.rs:"), "{e}");
    assert!(x.grad().is_none());
}

#[test]
fn backward_with_a_given_gradient() {
    let x = leaf(&[1.0, -2.0, 3.0]);
    let y = x.mul(&x).unwrap(); // dy/dx = 2x
    let g = c(&[1.0, 0.5, -2.0], &[3]);
    y.backward_with(&g).unwrap();
    assert_eq!(grad_of(&x), vec![2.0, -2.0, -12.0]);
    // A gradient of the wrong shape is an error naming both shapes.
    let z = x.mul_scalar(2.0).unwrap();
    let e = z.backward_with(&c(&[1.0, 1.0], &[2])).unwrap_err();
    assert!(matches!(e, Error::Autograd { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("f64[2]") && text.contains("f64[3]"), "{text}");
}

#[test]
fn a_second_backward_through_a_used_graph_is_an_error() {
    let x = leaf(&[1.0, 2.0]);
    let y = x.mul(&x).unwrap().sum(&[], false).unwrap();
    y.backward().unwrap();
    assert_eq!(grad_of(&x), vec![2.0, 4.0]);
    let e = y.backward().unwrap_err();
    assert!(matches!(e, Error::Autograd { .. }), "{e}");
    assert!(e.to_string().contains("already used"), "{e}");
    assert_eq!(grad_of(&x), vec![2.0, 4.0], "the failed backward changed the gradient");

    // Also through an intermediate of the freed graph, used again in a new graph.
    let z = x.exp().unwrap();
    z.sum(&[], false).unwrap().backward().unwrap();
    let e = z.mul_scalar(2.0).unwrap().sum(&[], false).unwrap().backward();
    assert!(e.is_err(), "backward through a freed intermediate succeeded");
}

#[test]
fn only_leaves_that_require_grad_get_one() {
    let a = leaf(&[1.0, 2.0]);
    let b = c(&[3.0, 4.0], &[2]);
    let h = a.mul(&b).unwrap();
    assert!(h.requires_grad());
    h.exp().unwrap().sum(&[], false).unwrap().backward().unwrap();
    assert!(b.grad().is_none(), "a constant got a gradient");
    assert!(h.grad().is_none(), "an intermediate kept a gradient");
    let ga = grad_of(&a);
    let want = [3.0 * 3f64.exp(), 4.0 * 8f64.exp()];
    for (g, w) in ga.iter().zip(want) {
        assert!((g - w).abs() <= 1e-9 * w.abs(), "{ga:?} vs {want:?}");
    }
}
