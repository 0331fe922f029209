//! The engine end to end: lazy ops, one sync, values checked against plain Rust arithmetic.

use std::sync::Mutex;

use xlaprof_core::{events, sync, DType, Tensor};

/// `sync()` computes every live pending tensor of the process: tests here run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn lazy_ops_sync_and_match_rust() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let a = Tensor::from_slice(&[1f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[0.5f32, -1.0, 2.0], &[3]).unwrap();
    let c = a.mul(&b).unwrap().add_scalar(1.0).unwrap();
    assert!(!c.is_materialized());
    let s = c.sum(&[1], false).unwrap();
    let m = a.matmul(&a.transpose(0, 1).unwrap()).unwrap();
    let before = events::counters();
    sync().unwrap();
    let after = events::counters();
    assert_eq!(after.syncs - before.syncs, 1);
    assert!(c.is_materialized());
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.5, -1.0, 7.0, 3.0, -4.0, 13.0]);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![7.5, 12.0]);
    assert_eq!(m.to_vec::<f32>().unwrap(), vec![14.0, 32.0, 32.0, 77.0]);
    let r = Tensor::randn(&[1000], 7, DType::F32).unwrap();
    let v = r.to_vec::<f32>().unwrap();
    let mean = v.iter().sum::<f32>() / 1000.0;
    assert!(mean.abs() < 0.15, "{mean}");
    let am = a.argmax(1, false).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(am, vec![2, 2]);
}

#[test]
fn gradients_of_a_small_expression() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let x = Tensor::from_slice(&[1f64, 2.0, 3.0], &[3]).unwrap();
    x.set_requires_grad(true);
    let y = x.mul(&x).unwrap().sum(&[], false).unwrap(); // sum x^2
    y.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
}

/// The StableHLO of every program lowered while it listens.
struct Programs {
    lowered: std::sync::Arc<ProgramsSeen>,
    id: u64,
}

struct ProgramsSeen(Mutex<Vec<String>>);

impl events::Listener for ProgramsSeen {
    fn on_event(&self, _: u64, e: &events::Event) {
        if let events::Event::Lowered { stablehlo, .. } = e {
            self.0.lock().unwrap().push(stablehlo.to_string());
        }
    }
}

impl Programs {
    fn listen() -> Programs {
        let lowered = std::sync::Arc::new(ProgramsSeen(Mutex::new(Vec::new())));
        let id = events::add_listener(lowered.clone());
        Programs { lowered, id }
    }

    /// Stops listening: the programs lowered meanwhile.
    fn stop(self) -> Vec<String> {
        events::remove_listener(self.id);
        std::mem::take(&mut *self.lowered.0.lock().unwrap())
    }
}

/// The gradient of `x @ w.T` (a linear layer's weight) is computed in `w`'s layout, not as a dot
/// then a transpose: a weight-sized transpose and copy fewer per step.
#[test]
fn a_linear_layers_weight_gradient_is_one_dot_in_the_weights_layout() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let programs = Programs::listen();
    let x = Tensor::from_slice(&[1f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let w = Tensor::from_slice(
        &[0.5f32, -1.0, 2.0, 1.0, 0.0, -0.5, 3.0, 1.5, -2.0, 0.25, 4.0, 1.0],
        &[4, 3],
    )
    .unwrap();
    w.set_requires_grad(true);
    let y = x.matmul(&w.transpose(0, 1).unwrap()).unwrap().sum(&[], false).unwrap();
    y.backward().unwrap();
    let grad = w.grad().unwrap().to_vec::<f32>().unwrap();
    let programs = programs.stop();
    // d sum(x w^T) / dw[j, k] = sum_i x[i, k]: every row is x's column sums.
    assert_eq!(grad, [5.0, 7.0, 9.0].repeat(4));
    let text = programs.last().expect("the gradient's program");
    // The gradient is the last op, a dot whose result has w's shape (no transpose of a dot).
    let last = text.lines().rev().nth(2).unwrap_or_default();
    assert!(
        last.contains("stablehlo.dot_general") && last.ends_with("-> tensor<4x3xf32>"),
        "{text}"
    );
}

/// `x ** c` for the exponents PyTorch's CPU kernel computes without pow are multiplications,
/// roots and reciprocals in the program (XLA would otherwise call `powf` for each element, the
/// exponent being a graph input); values and gradients as `powf`'s, another exponent still `pow`.
#[test]
fn special_exponents_are_computed_without_pow() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let values = [-3.0f64, -0.75, 0.0, 0.5, 2.0, 7.0, f64::NAN, f64::INFINITY];
    for exponent in [1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 2.5] {
        let programs = Programs::listen();
        let x = Tensor::from_slice(&values, &[values.len() as i64]).unwrap();
        x.set_requires_grad(true);
        let y = x.pow_scalar(exponent).unwrap();
        y.sum(&[], false).unwrap().backward().unwrap();
        let (got, grad) = (y.to_f64_vec().unwrap(), x.grad().unwrap().to_f64_vec().unwrap());
        let programs = programs.stop();
        for (i, &v) in values.iter().enumerate() {
            let (want, dwant) = (v.powf(exponent), exponent * v.powf(exponent - 1.0));
            let same = |a: f64, b: f64| {
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * b.abs()
            };
            assert!(same(got[i], want), "{v} ** {exponent} = {}, want {want}", got[i]);
            // Where the slope is finite (at 0 and beyond, the composed forms' 0 * inf may differ).
            if dwant.is_finite() && v.is_finite() && v != 0.0 {
                assert!(same(grad[i], dwant), "d {v} ** {exponent} = {}, want {dwant}", grad[i]);
            }
        }
        let uses_pow = programs.iter().any(|p| p.contains("stablehlo.power"));
        assert_eq!(uses_pow, exponent == 2.5, "exponent {exponent}: {programs:?}");
    }
}

/// XLA's special functions, against values known in closed form, and their gradients.
#[test]
fn lgamma_digamma_polygamma_and_erfinv_match_known_values() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let pi = std::f64::consts::PI;
    let euler = 0.577_215_664_901_532_9;
    let close = |got: Vec<f64>, want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-9 * (1.0 + w.abs()), "{got:?} vs {want:?}");
        }
    };
    let x = Tensor::from_slice(&[0.5f64, 1.0, 2.0, 3.0], &[4]).unwrap();
    x.set_requires_grad(true);
    // lgamma: log sqrt(pi), 0, 0, log 2.
    close(x.lgamma().unwrap().to_f64_vec().unwrap(), &[pi.sqrt().ln(), 0.0, 0.0, 2f64.ln()]);
    // digamma(1) = -gamma, digamma(2) = 1 - gamma, digamma(0.5) = -gamma - 2 log 2.
    let psi = [-euler - 2.0 * 2f64.ln(), -euler, 1.0 - euler, 1.5 - euler];
    close(x.digamma().unwrap().to_f64_vec().unwrap(), &psi);
    // polygamma(1, 1) = pi^2 / 6, polygamma(1, 0.5) = pi^2 / 2.
    let trigamma = [pi * pi / 2.0, pi * pi / 6.0, pi * pi / 6.0 - 1.0, pi * pi / 6.0 - 1.25];
    close(x.polygamma(1).unwrap().to_f64_vec().unwrap(), &trigamma);
    // Below zero, by the recurrence: polygamma(1, -0.5) = polygamma(1, 0.5) + 1 / 0.25, and
    // polygamma(2, -1.5) = polygamma(2, 0.5) - 2 / (-1.5)^3 - 2 / (-0.5)^3 (polygamma(2, 0.5) =
    // -14 zeta(3)).
    let below = Tensor::from_slice(&[-0.5f64, -1.5], &[2]).unwrap();
    let zeta3 = 1.202_056_903_159_594_2;
    close(below.polygamma(1).unwrap().to_f64_vec().unwrap()[..1].to_vec(), &[pi * pi / 2.0 + 4.0]);
    let second = -14.0 * zeta3 - 2.0 / (-1.5f64).powi(3) - 2.0 / (-0.5f64).powi(3);
    close(below.polygamma(2).unwrap().to_f64_vec().unwrap()[1..].to_vec(), &[second]);
    // d/dx sum lgamma(x) = digamma(x).
    x.lgamma().unwrap().sum(&[], false).unwrap().backward().unwrap();
    close(x.grad().unwrap().to_f64_vec().unwrap(), &psi);
    // erfinv(erf(0.5)) = 0.5; erf(0.5) = 0.5204998778130465; d erfinv(y) = sqrt(pi)/2 e^(erfinv(y)^2).
    let y = Tensor::from_slice(&[0.520_499_877_813_046_5f64, 0.0], &[2]).unwrap();
    y.set_requires_grad(true);
    close(y.erfinv().unwrap().to_f64_vec().unwrap(), &[0.5, 0.0]);
    y.erfinv().unwrap().sum(&[], false).unwrap().backward().unwrap();
    close(
        y.grad().unwrap().to_f64_vec().unwrap(),
        &[pi.sqrt() / 2.0 * 0.25f64.exp(), pi.sqrt() / 2.0],
    );
}

/// `index_reduce` with max and min keeps the extreme of each row and the rows sent to it; the
/// gradient goes to every value equal to the result, split among ties.
#[test]
fn index_reduce_keeps_the_extremes_and_splits_the_gradient_among_ties() {
    use xlaprof_core::ir::ReduceKind;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let x = Tensor::from_slice(&[1f64, 5.0, 3.0], &[3]).unwrap();
    let src = Tensor::from_slice(&[4f64, 2.0, 5.0, 9.0], &[4]).unwrap();
    let idx = Tensor::from_slice(&[0i64, 1, 1, 0], &[4]).unwrap();
    x.set_requires_grad(true);
    src.set_requires_grad(true);
    let max = x.index_reduce(0, &idx, &src, ReduceKind::Max).unwrap();
    let min = x.index_reduce(0, &idx, &src, ReduceKind::Min).unwrap();
    assert_eq!(max.to_vec::<f64>().unwrap(), [9.0, 5.0, 3.0]);
    assert_eq!(min.to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0]);
    max.sum(&[], false).unwrap().backward().unwrap();
    // Row 0: src[3] = 9 wins. Row 1: x[1] = 5 and src[2] = 5 tie, half each. Row 2: x[2] alone.
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [0.0, 0.5, 1.0]);
    assert_eq!(src.grad().unwrap().to_vec::<f64>().unwrap(), [0.0, 0.0, 0.5, 1.0]);
}

/// A value read computes what the read needs, and makes device data of every live tensor whose
/// value it computed on the way; the others stay pending. A loop that updates a tensor in place
/// and reads a value of it between updates (an optimizer's line search) then runs one graph
/// again and again, not a longer one each time that computes the whole history anew.
#[test]
fn a_value_read_keeps_the_live_tensors_its_graph_computed() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let w = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    w.set_value(&w.add_scalar(1.0).unwrap()).unwrap();
    let loss = w.mul(&w).unwrap().sum(&[0], false).unwrap();
    let elsewhere = w.add_scalar(5.0).unwrap();
    assert!(!w.is_materialized());
    let before = events::counters();
    assert_eq!(loss.item().unwrap(), 29.0);
    assert_eq!(events::counters().syncs - before.syncs, 1);
    assert!(w.is_materialized(), "the read computed the update: it is kept");
    assert!(!elsewhere.is_materialized(), "the read did not compute it: it stays pending");
    assert_eq!(elsewhere.to_vec::<f32>().unwrap(), vec![7.0, 8.0, 9.0]);
    drop(elsewhere);

    let before = events::counters();
    for step in 1..=6 {
        w.set_value(&w.add_scalar(1.0).unwrap()).unwrap();
        let total = w.sum(&[0], false).unwrap().item().unwrap();
        assert_eq!(total, 9.0 + 3.0 * step as f64);
    }
    let after = events::counters();
    assert_eq!(after.syncs - before.syncs, 6);
    assert!(
        after.compiles - before.compiles <= 1,
        "{} compiles for one graph",
        after.compiles - before.compiles
    );
}
