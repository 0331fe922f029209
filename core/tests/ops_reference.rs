//! Differential tests: every tensor op against the plain-Rust reference in `reference/`, as
//! property tests over random shapes (rank 0 to 4, dims of 1 and sometimes 0), NumPy
//! broadcasting and dtypes (f64, f32, f16, bf16, s64, s32, u8, bool), plus fixed edge cases.
//!
//! Each case records all its ops, computes them with one `sync()` (one XLA compile per case) and
//! compares every result with the reference: dims, dtype, and values (exact for integers and
//! bool; relative with an absolute floor for floats, per dtype). `sync()` computes every live
//! pending tensor of the process, so every test holds `SERIAL` from its first op to its last
//! read. A case that fails lists every op that disagreed; proptest then prints the input.
//!
//! Semantics that are easy to lose (NaN propagation, integer sums in s64, ...) each have their
//! own fixed `#[test]`, named for what it checks, so that a regression there fails that test
//! alone instead of ending every case of a property and hiding the rest.

mod reference;

use std::sync::{Mutex, MutexGuard};

use half::{bf16, f16};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use reference::{self as r, Arr, Cmp, Ty};
use xlaprof_core::{sync, DType, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// `cases` per property, unless `PROPTEST_CASES` asks for more (or fewer) in a longer run.
fn cfg(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None, // never write regression files into the source tree
        max_shrink_iters: 150,
        max_shrink_time: 20_000,
        ..ProptestConfig::default()
    }
}

/// Cases per property; the tests that record twenty-odd ops per case (one larger compile each)
/// run fewer, to keep the file well under a minute on two cores.
const CASES: u32 = 24;
const HEAVY_CASES: u32 = 16;

// ---------------------------------------------------------------------------------------------
// Engine <-> reference
// ---------------------------------------------------------------------------------------------

fn dtype(t: Ty) -> DType {
    match t {
        Ty::Bool => DType::Pred,
        Ty::U8 => DType::U8,
        Ty::S32 => DType::S32,
        Ty::S64 => DType::S64,
        Ty::F16 => DType::F16,
        Ty::BF16 => DType::BF16,
        Ty::F32 => DType::F32,
        Ty::F64 => DType::F64,
    }
}

fn idims(d: &[usize]) -> Vec<i64> {
    d.iter().map(|&x| x as i64).collect()
}

/// The engine tensor holding `a`'s values as `ty` (the values must already be `ty` values).
#[track_caller]
fn tensor(ty: Ty, a: &Arr) -> Tensor {
    debug_assert!(
        a.data.iter().all(|&v| ty.convert(v) == v || v.is_nan() && ty.is_float()),
        "{ty:?} cannot hold {a:?}"
    );
    let d = idims(&a.dims);
    let v = &a.data;
    let t = match ty {
        Ty::F64 => Tensor::from_slice(v, &d),
        Ty::F32 => Tensor::from_slice(&v.iter().map(|&x| x as f32).collect::<Vec<_>>(), &d),
        Ty::F16 => Tensor::from_slice(&v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(), &d),
        Ty::BF16 => {
            Tensor::from_slice(&v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>(), &d)
        }
        Ty::S32 => Tensor::from_slice(&v.iter().map(|&x| x as i32).collect::<Vec<_>>(), &d),
        Ty::S64 => Tensor::from_slice(&v.iter().map(|&x| x as i64).collect::<Vec<_>>(), &d),
        Ty::U8 => Tensor::from_slice(&v.iter().map(|&x| x as u8).collect::<Vec<_>>(), &d),
        Ty::Bool => Tensor::from_slice(&v.iter().map(|&x| x != 0.0).collect::<Vec<_>>(), &d),
    };
    t.expect("from_slice")
}

/// A 1-D integer index tensor.
fn index_tensor(ty: Ty, idx: &[usize]) -> Tensor {
    tensor(ty, &Arr::new(&[idx.len()], idx.iter().map(|&i| i as f64).collect()))
}

#[derive(Clone, Copy, Debug)]
struct Tol {
    rtol: f64,
    atol: f64,
}

const EXACT: Tol = Tol { rtol: 0.0, atol: 0.0 };

fn tol(t: Ty) -> Tol {
    match t {
        Ty::F64 => Tol { rtol: 1e-12, atol: 1e-12 },
        Ty::F32 => Tol { rtol: 1e-5, atol: 1e-6 },
        Ty::F16 => Tol { rtol: 1e-2, atol: 1e-3 },
        Ty::BF16 => Tol { rtol: 2e-2, atol: 1e-2 },
        _ => EXACT,
    }
}

/// `got` is close to `want`: equal NaN-ness and infinities, else
/// `|got - want| <= atol + rtol * max(|want|, scale)`, where `scale` bounds the magnitude of the
/// intermediate values the op rounds (0 for a single correctly rounded op).
fn close(got: f64, want: f64, tol: Tol, scale: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() || got.is_nan() {
        return got == want;
    }
    (got - want).abs() <= tol.atol + tol.rtol * want.abs().max(scale)
}

struct Check {
    label: String,
    got: xlaprof_core::Result<Tensor>,
    /// `None`: the op is undefined for these inputs, and the engine must return an error.
    want: Option<Arr>,
    ty: Ty,
    tol: Tol,
    scale: Option<Arr>,
    check_dtype: bool,
}

impl Check {
    /// Per-element magnitude for the error bound (broadcast to the result).
    fn scale(&mut self, s: Arr) -> &mut Check {
        self.scale = Some(s);
        self
    }

    fn scale_all(&mut self, s: f64) -> &mut Check {
        self.scale = Some(Arr::scalar(s));
        self
    }

    fn tol(&mut self, t: Tol) -> &mut Check {
        self.tol = t;
        self
    }

    fn verify(&self) -> Result<(), String> {
        let label = &self.label;
        let (t, want) = match (&self.got, &self.want) {
            (Err(_), None) => return Ok(()),
            (Ok(t), None) => {
                return Err(format!(
                    "{label}: must be an error (undefined for these inputs), got {t:?}"
                ))
            }
            (Err(e), Some(w)) => {
                return Err(format!(
                    "{label}: returned an error for a valid input (want {:?}[{:?}]): {e}",
                    self.ty, w.dims
                ))
            }
            (Ok(t), Some(w)) => (t, w),
        };
        if t.dims() != idims(&want.dims).as_slice() {
            return Err(format!("{label}: dims {:?}, want {:?}", t.dims(), want.dims));
        }
        let mut problems = Vec::new();
        if self.check_dtype && t.dtype() != dtype(self.ty) {
            problems.push(format!("dtype {}, want {}", t.dtype(), dtype(self.ty)));
        }
        let got = t.to_f64_vec().map_err(|e| format!("{label}: reading the value failed: {e}"))?;
        let want = want.convert(self.ty);
        let scale = match &self.scale {
            Some(s) => r::broadcast_to(s, &want.dims)
                .unwrap_or_else(|| panic!("{label}: bad scale dims {:?}", s.dims)),
            None => Arr::full(&want.dims, 0.0),
        };
        let bad: Vec<usize> = (0..want.numel())
            .filter(|&i| !close(got[i], want.data[i], self.tol, scale.data[i]))
            .collect();
        if bad.is_empty() && problems.is_empty() {
            return Ok(());
        }
        let shown: Vec<String> = bad
            .iter()
            .take(4)
            .map(|&i| {
                format!("at {:?}: want {}, got {}", r::unravel(i, &want.dims), want.data[i], got[i])
            })
            .collect();
        if !bad.is_empty() {
            problems.push(format!(
                "{} of {} values differ ({:?}, scale up to {}): {}",
                bad.len(),
                want.numel(),
                self.tol,
                scale.max_abs(),
                shown.join("; ")
            ));
        }
        Err(format!("{label}: {}", problems.join("; ")))
    }
}

/// The ops of one case: recorded, computed with one sync, then each compared.
#[derive(Default)]
struct Batch {
    checks: Vec<Check>,
}

impl Batch {
    /// Checks `got` against `want` as a `ty` result, with `ty`'s tolerance.
    fn check(
        &mut self,
        label: impl Into<String>,
        got: xlaprof_core::Result<Tensor>,
        want: Option<Arr>,
        ty: Ty,
    ) -> &mut Check {
        self.checks.push(Check {
            label: label.into(),
            got,
            want,
            ty,
            tol: tol(ty),
            scale: None,
            check_dtype: true,
        });
        self.checks.last_mut().expect("just pushed")
    }

    fn run(self) -> Result<(), TestCaseError> {
        let mut failures = Vec::new();
        if let Err(e) = sync() {
            failures.push(format!("sync() failed (each op is then read alone): {e}"));
        }
        for c in &self.checks {
            if let Err(m) = c.verify() {
                failures.push(m);
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(failures.join("\n")))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

const ALL: &[Ty] = &Ty::ALL;
const FLOATS: &[Ty] = &Ty::FLOATS;
const INTS: &[Ty] = &Ty::INTS;
const NUMERIC: &[Ty] = &[Ty::U8, Ty::S32, Ty::S64, Ty::F16, Ty::BF16, Ty::F32, Ty::F64];
const FLOATS_SIGNED_INTS: &[Ty] = &[Ty::S32, Ty::S64, Ty::F16, Ty::BF16, Ty::F32, Ty::F64];

fn ty_of(tys: &'static [Ty]) -> BoxedStrategy<Ty> {
    prop::sample::select(tys).boxed()
}

/// A dim: mostly 2 to 4, often 1, sometimes 0 (when `zero`).
fn dim(zero: bool) -> BoxedStrategy<usize> {
    if zero {
        prop_oneof![3 => Just(1usize), 6 => 2..=4usize, 1 => Just(0usize)].boxed()
    } else {
        prop_oneof![3 => Just(1usize), 7 => 2..=4usize].boxed()
    }
}

fn dims(min_rank: usize, max_rank: usize, zero: bool) -> BoxedStrategy<Vec<usize>> {
    vec(dim(zero), min_rank..=max_rank).boxed()
}

/// A raw value in [-4, 4]: half the time on a grid of eighths (exact in every float dtype,
/// with ties and zeros), else uniform.
fn raw() -> BoxedStrategy<f64> {
    prop_oneof![(-32i32..=32).prop_map(|i| i as f64 / 8.0), -4.0f64..4.0,].boxed()
}

/// A grid value in [-4, 4] (exact in every float dtype).
fn grid() -> BoxedStrategy<f64> {
    (-32i32..=32).prop_map(|i| i as f64 / 8.0).boxed()
}

/// A raw value made a `ty` value: floats are rounded; integers are `raw * 5` rounded (u8 its
/// absolute value), so in [-20, 20]; bool is `raw > 0`.
fn fit(ty: Ty, v: f64) -> f64 {
    match ty {
        Ty::Bool => r::b2f(v > 0.0),
        Ty::U8 => (v.abs() * 5.0).round(),
        Ty::S32 | Ty::S64 => (v * 5.0).round(),
        _ => ty.convert(v),
    }
}

fn arr(ty: Ty, dims: Vec<usize>) -> BoxedStrategy<Arr> {
    let n = r::numel(&dims);
    vec(raw(), n)
        .prop_map(move |v| Arr::new(&dims, v.into_iter().map(|x| fit(ty, x)).collect()))
        .boxed()
}

/// A dtype from `tys` and an array of it.
fn typed(
    tys: &'static [Ty],
    min_rank: usize,
    max_rank: usize,
    zero: bool,
) -> BoxedStrategy<(Ty, Arr)> {
    (ty_of(tys), dims(min_rank, max_rank, zero))
        .prop_flat_map(|(ty, d)| (Just(ty), arr(ty, d)))
        .boxed()
}

/// Dims that broadcast to `out`: its last `keep` dims, with the dims marked in `ones` set to 1.
fn derive(out: &[usize], keep: usize, ones: &[bool]) -> Vec<usize> {
    let r = out.len();
    (r - keep..r).map(|i| if ones[i] { 1 } else { out[i] }).collect()
}

/// `n` shapes that broadcast together (NumPy rules), of rank up to `max_rank`.
fn bcast(n: usize, max_rank: usize, zero: bool) -> BoxedStrategy<Vec<Vec<usize>>> {
    dims(0, max_rank, zero)
        .prop_flat_map(move |d| {
            let r = d.len();
            let keep = prop_oneof![2 => Just(r), 1 => 0..=r];
            let spec = (keep, vec(prop::bool::weighted(0.3), r));
            (Just(d), vec(spec, n))
        })
        .prop_map(|(d, specs)| specs.iter().map(|(k, m)| derive(&d, *k, m)).collect())
        .boxed()
}

/// A dtype and two arrays of it with broadcast-compatible shapes.
fn typed_pair(tys: &'static [Ty]) -> BoxedStrategy<(Ty, Arr, Arr)> {
    (ty_of(tys), bcast(2, 4, true))
        .prop_flat_map(|(ty, ds)| (Just(ty), arr(ty, ds[0].clone()), arr(ty, ds[1].clone())))
        .boxed()
}

/// Axes given to the engine: each chosen axis, sometimes negative, in random order.
fn axes_of(mask: &[bool], neg: &[bool], rank: usize) -> Vec<i64> {
    let mut axes: Vec<i64> = (0..rank)
        .filter(|&i| mask[i])
        .map(|i| if neg[i] { i as i64 - rank as i64 } else { i as i64 })
        .collect();
    axes.reverse();
    axes
}

fn scalar_arr(v: f64) -> Arr {
    Arr::scalar(v)
}

/// The engine's comparison `op`.
fn compare(op: Cmp, x: &Tensor, y: &Tensor) -> xlaprof_core::Result<Tensor> {
    match op {
        Cmp::Eq => x.eq(y),
        Cmp::Ne => x.ne(y),
        Cmp::Lt => x.lt(y),
        Cmp::Le => x.le(y),
        Cmp::Gt => x.gt(y),
        Cmp::Ge => x.ge(y),
    }
}

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg(HEAVY_CASES))]

    #[test]
    fn unary_float_ops((ty, x) in typed(FLOATS, 0, 4, true), lo in grid(), width in 0u32..24) {
        let _s = serial();
        let xt = tensor(ty, &x);
        let ax = r::abs(&x);
        let hi = lo + width as f64 / 8.0;
        let mut b = Batch::default();
        b.check("neg", xt.neg(), Some(r::neg(&x)), ty);
        b.check("abs", xt.abs(), Some(r::abs(&x)), ty);
        b.check("exp", xt.exp(), Some(r::exp(&x)), ty);
        b.check("log", xt.log(), Some(r::log(&x)), ty);
        b.check("sqrt", xt.sqrt(), Some(r::sqrt(&x)), ty);
        b.check("rsqrt", xt.rsqrt(), Some(r::rsqrt(&x)), ty);
        b.check("sin", xt.sin(), Some(r::sin(&x)), ty);
        b.check("cos", xt.cos(), Some(r::cos(&x)), ty);
        b.check("tanh", xt.tanh(), Some(r::tanh(&x)), ty);
        b.check("sigmoid", xt.sigmoid(), Some(r::sigmoid(&x)), ty);
        b.check("relu", xt.relu(), Some(r::relu(&x)), ty);
        b.check("gelu", xt.gelu(), Some(r::gelu(&x)), ty).scale(ax.clone());
        b.check("silu", xt.silu(), Some(r::silu(&x)), ty).scale(ax.clone());
        b.check("sign", xt.sign(), Some(r::sign(&x)), ty);
        b.check("floor", xt.floor(), Some(r::floor(&x)), ty);
        b.check("round", xt.round(), Some(r::round(&x)), ty);
        b.check(format!("clamp({lo}, {hi})"), xt.clamp(lo, hi), Some(r::clamp(&x, lo, hi)), ty);
        b.check("cast(self)", xt.cast(dtype(ty)), Some(x.clone()), ty);
        b.run()?;
    }

    #[test]
    fn unary_int_ops((ty, x) in typed(INTS, 0, 4, true), lo in -10i32..10, width in 0i32..12) {
        let _s = serial();
        let xt = tensor(ty, &x);
        let (lo, hi) = (lo.max(if ty == Ty::U8 { 0 } else { -10 }) as f64, (lo + width).max(0) as f64);
        let mut b = Batch::default();
        b.check("neg", xt.neg(), Some(r::neg(&x)), ty);
        if ty != Ty::U8 {
            // u8 is checked in abs_and_sign_of_u8 (an engine bug would otherwise end every case).
            b.check("abs", xt.abs(), Some(r::abs(&x)), ty);
            b.check("sign", xt.sign(), Some(r::sign(&x)), ty);
        }
        b.check(format!("clamp({lo}, {hi})"), xt.clamp(lo, hi), Some(r::clamp(&x, lo, hi)), ty);
        b.check("relu", xt.relu(), Some(r::relu(&x)), ty);
        b.run()?;
    }

    #[test]
    fn binary_float_ops((ty, x, y) in typed_pair(FLOATS), s in grid()) {
        let _s = serial();
        let (xt, yt) = (tensor(ty, &x), tensor(ty, &y));
        let sa = scalar_arr(s);
        let mut b = Batch::default();
        b.check("add", xt.add(&yt), r::add(&x, &y), ty);
        b.check("sub", xt.sub(&yt), r::sub(&x, &y), ty);
        b.check("mul", xt.mul(&yt), r::mul(&x, &y), ty);
        b.check("div", xt.div(&yt), r::div(&x, &y), ty);
        b.check("pow", xt.pow(&yt), r::pow(&x, &y), ty);
        b.check("maximum", xt.maximum(&yt), r::maximum(&x, &y), ty);
        b.check("minimum", xt.minimum(&yt), r::minimum(&x, &y), ty);
        b.check("remainder", xt.remainder(&yt), r::remainder(&x, &y), ty);
        b.check("atan2", xt.atan2(&yt), r::atan2(&x, &y), ty);
        for op in Cmp::ALL {
            b.check(format!("{op:?}"), compare(op, &xt, &yt), r::compare(op, &x, &y), Ty::Bool);
        }
        b.check(format!("add_scalar({s})"), xt.add_scalar(s), r::add(&x, &sa), ty);
        b.check(format!("sub_scalar({s})"), xt.sub_scalar(s), r::sub(&x, &sa), ty);
        b.check(format!("mul_scalar({s})"), xt.mul_scalar(s), r::mul(&x, &sa), ty);
        b.check(format!("div_scalar({s})"), xt.div_scalar(s), r::div(&x, &sa), ty);
        b.check(format!("pow_scalar({s})"), xt.pow_scalar(s), r::pow(&x, &sa), ty);
        b.check(format!("maximum_scalar({s})"), xt.maximum_scalar(s), r::maximum(&x, &sa), ty);
        b.check(format!("minimum_scalar({s})"), xt.minimum_scalar(s), r::minimum(&x, &sa), ty);
        b.check(format!("remainder_scalar({s})"), xt.remainder_scalar(s), r::remainder(&x, &sa), ty);
        b.check(format!("gt_scalar({s})"), xt.gt_scalar(s), r::compare(Cmp::Gt, &x, &sa), Ty::Bool);
        b.run()?;
    }

    #[test]
    fn binary_int_ops((ty, x, y) in typed_pair(INTS), s in 0i32..6) {
        let _s = serial();
        let s = s as f64;
        let (xt, yt) = (tensor(ty, &x), tensor(ty, &y));
        // Divisors without zeros; small non-negative exponents.
        let ynz = y.map(|v| if v == 0.0 { 3.0 } else { v });
        let yexp = y.map(|v| v.abs() % 4.0);
        let (ynzt, yexpt) = (tensor(ty, &ynz), tensor(ty, &yexp));
        let sa = scalar_arr(s);
        let mut b = Batch::default();
        b.check("add", xt.add(&yt), r::add(&x, &y), ty);
        b.check("sub", xt.sub(&yt), r::sub(&x, &y), ty);
        b.check("mul", xt.mul(&yt), r::mul(&x, &y), ty);
        b.check("maximum", xt.maximum(&yt), r::maximum(&x, &y), ty);
        b.check("minimum", xt.minimum(&yt), r::minimum(&x, &y), ty);
        b.check("remainder (nonzero divisor)", xt.remainder(&ynzt), r::remainder(&x, &ynz), ty);
        b.check("pow (exponent 0..3)", xt.pow(&yexpt), r::pow(&x, &yexp), ty);
        for op in Cmp::ALL {
            b.check(format!("{op:?}"), compare(op, &xt, &yt), r::compare(op, &x, &y), Ty::Bool);
        }
        b.check(format!("add_scalar({s})"), xt.add_scalar(s), r::add(&x, &sa), ty);
        b.check(format!("sub_scalar({s})"), xt.sub_scalar(s), r::sub(&x, &sa), ty);
        b.check(format!("mul_scalar({s})"), xt.mul_scalar(s), r::mul(&x, &sa), ty);
        b.check(format!("maximum_scalar({s})"), xt.maximum_scalar(s), r::maximum(&x, &sa), ty);
        b.check(format!("gt_scalar({s})"), xt.gt_scalar(s), r::compare(Cmp::Gt, &x, &sa), Ty::Bool);
        b.run()?;
    }

}

proptest! {
    #![proptest_config(cfg(CASES))]

    #[test]
    fn logical_ops(ds in bcast(2, 4, true).prop_flat_map(|ds| (arr(Ty::Bool, ds[0].clone()), arr(Ty::Bool, ds[1].clone())))) {
        let _s = serial();
        let (x, y) = ds;
        let (xt, yt) = (tensor(Ty::Bool, &x), tensor(Ty::Bool, &y));
        let mut b = Batch::default();
        b.check("logical_and", xt.logical_and(&yt), r::logical_and(&x, &y), Ty::Bool);
        b.check("logical_or", xt.logical_or(&yt), r::logical_or(&x, &y), Ty::Bool);
        b.check("logical_not", xt.logical_not(), Some(r::logical_not(&x)), Ty::Bool);
        b.check("eq (bool)", xt.eq(&yt), r::compare(Cmp::Eq, &x, &y), Ty::Bool);
        b.check("ne (bool)", xt.ne(&yt), r::compare(Cmp::Ne, &x, &y), Ty::Bool);
        b.check("lt (bool)", xt.lt(&yt), r::compare(Cmp::Lt, &x, &y), Ty::Bool);
        b.run()?;
    }

    #[test]
    fn where_broadcasts_three_ways(
        (ty, c, x, y) in (ty_of(ALL), bcast(3, 4, true)).prop_flat_map(|(ty, ds)| {
            (Just(ty), arr(Ty::Bool, ds[0].clone()), arr(ty, ds[1].clone()), arr(ty, ds[2].clone()))
        })
    ) {
        let _s = serial();
        let (ct, xt, yt) = (tensor(Ty::Bool, &c), tensor(ty, &x), tensor(ty, &y));
        let mut b = Batch::default();
        b.check("where", Tensor::where_(&ct, &xt, &yt), r::where_(&c, &x, &y), ty);
        b.run()?;
    }

    /// Mixed dtypes: the result has PyTorch's promoted dtype, and the values are computed in it.
    #[test]
    fn binary_ops_promote_mixed_dtypes(
        (ta, tb, x, y) in (ty_of(ALL), ty_of(ALL), bcast(2, 3, true)).prop_flat_map(|(ta, tb, ds)| {
            (Just(ta), Just(tb), arr(ta, ds[0].clone()), arr(tb, ds[1].clone()))
        })
    ) {
        let _s = serial();
        let pt = Ty::promote(ta, tb);
        let (xt, yt) = (tensor(ta, &x), tensor(tb, &y));
        let (xp, yp) = (x.convert(pt), y.convert(pt));
        let label = |op: &str| format!("{op}({ta:?}, {tb:?}) -> {pt:?}");
        let mut b = Batch::default();
        if pt != Ty::Bool {
            b.check(label("add"), xt.add(&yt), r::add(&xp, &yp), pt);
            b.check(label("mul"), xt.mul(&yt), r::mul(&xp, &yp), pt);
            b.check(label("maximum"), xt.maximum(&yt), r::maximum(&xp, &yp), pt);
        }
        b.check(label("lt"), xt.lt(&yt), r::compare(Cmp::Lt, &xp, &yp), Ty::Bool);
        b.check(label("eq"), xt.eq(&yt), r::compare(Cmp::Eq, &xp, &yp), Ty::Bool);
        let c = x.map(|v| r::b2f(v != 0.0));
        let ct = tensor(Ty::Bool, &c);
        b.check(label("where"), Tensor::where_(&ct, &xt, &yt), r::where_(&c, &xp, &yp), pt);
        b.run()?;
    }

    /// Every dtype to every dtype: floats round to nearest even, floats to integers truncate
    /// toward zero, anything to bool is `!= 0`.
    #[test]
    fn cast_between_all_dtypes(
        (from, to, raw_values) in (ty_of(ALL), ty_of(ALL), dims(0, 3, true)).prop_flat_map(|(from, to, d)| {
            (Just(from), Just(to), vec(-20.0f64..20.0, r::numel(&d)).prop_map(move |v| Arr::new(&d, v)))
        })
    ) {
        let _s = serial();
        // Negative values have no defined conversion to u8; keep them out when u8 is involved.
        let v = if from == Ty::U8 || to == Ty::U8 { raw_values.map(f64::abs) } else { raw_values };
        let x = v.map(|v| match from {
            Ty::Bool => r::b2f(v > 0.0),
            _ => from.convert(v),
        });
        let xt = tensor(from, &x);
        let mut b = Batch::default();
        b.check(format!("cast {from:?} -> {to:?}"), xt.cast(dtype(to)), Some(r::cast(&x, to)), to).tol(EXACT);
        b.run()?;
    }
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg(HEAVY_CASES))]

    #[test]
    fn reductions(
        (ty, x, mask, neg, arg_axis, keepdim, correction) in typed(NUMERIC, 0, 4, true).prop_flat_map(|(ty, x)| {
            let r = x.rank();
            (Just(ty), Just(x), vec(any::<bool>(), r), vec(any::<bool>(), r), 0..r.max(1), any::<bool>(), 0i64..=1)
        })
    ) {
        let _s = serial();
        let rank = x.rank();
        let xt = tensor(ty, &x);
        let axes = axes_of(&mask, &neg, rank);
        let ax = r::norm_axes(&axes, rank).expect("valid axes");
        let n = r::group_size(&x.dims, &ax);
        let abs_sum = r::sum(&r::abs(&x), &axes, keepdim).expect("sum");
        let m = x.max_abs();
        let mut b = Batch::default();
        let k = format!("axes {axes:?} keepdim {keepdim}");
        if ty != Ty::U8 {
            // u8 sums overflow; PyTorch sums integers in s64 (see integer_sums_are_s64).
            let c = b.check(format!("sum {k}"), xt.sum(&axes, keepdim), r::sum(&x, &axes, keepdim), ty);
            c.scale(abs_sum.clone());
            c.check_dtype = !ty.is_int();
        }
        if n > 0 {
            // PyTorch refuses max/min over no elements.
            b.check(format!("amax {k}"), xt.amax(&axes, keepdim), r::amax(&x, &axes, keepdim), ty);
            b.check(format!("amin {k}"), xt.amin(&axes, keepdim), r::amin(&x, &axes, keepdim), ty);
        }
        if rank > 0 && x.dims[arg_axis] > 0 {
            let a = if neg[arg_axis] { arg_axis as i64 - rank as i64 } else { arg_axis as i64 };
            b.check(format!("argmax axis {a} keepdim {keepdim}"), xt.argmax(a, keepdim), r::argmax(&x, a, keepdim), Ty::S64);
            b.check(format!("argmin axis {a} keepdim {keepdim}"), xt.argmin(a, keepdim), r::argmin(&x, a, keepdim), Ty::S64);
        }
        if ty.is_float() {
            b.check(format!("mean {k}"), xt.mean(&axes, keepdim), r::mean(&x, &axes, keepdim), ty).scale_all(m);
            b.check(format!("logsumexp {k}"), xt.logsumexp(&axes, keepdim), r::logsumexp(&x, &axes, keepdim), ty)
                .scale_all(m + 1.0 + (n.max(1) as f64).ln());
            if n as i64 > correction {
                b.check(format!("var {k} correction {correction}"), xt.var(&axes, correction, keepdim),
                    r::var(&x, &axes, correction, keepdim), ty).scale_all(m * m);
            }
        }
        b.run()?;
    }
}

// ---------------------------------------------------------------------------------------------
// Shape ops
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct ShapeParams {
    perm: Vec<usize>,
    t0: i64,
    t1: i64,
    flip: Vec<bool>,
    squeeze: i64,
    unsqueeze: i64,
    slice: (i64, i64, i64, i64),
    extra: Vec<usize>,
    expand: Vec<usize>,
    hole: usize,
}

fn shape_params(rank: usize) -> BoxedStrategy<ShapeParams> {
    let r = rank as i64;
    let lo = -r.max(1);
    let hi = r.max(1);
    (
        Just((0..rank).collect::<Vec<_>>()).prop_shuffle(),
        lo..hi,
        lo..hi,
        vec(any::<bool>(), rank),
        lo..hi,
        -(r + 1)..=r,
        (lo..hi, -6i64..6, -6i64..7, 1i64..4),
        vec(1usize..4, 0..=2),
        vec(1usize..4, rank),
        0..rank.max(1),
    )
        .prop_map(|(perm, t0, t1, flip, squeeze, unsqueeze, slice, extra, expand, hole)| {
            ShapeParams { perm, t0, t1, flip, squeeze, unsqueeze, slice, extra, expand, hole }
        })
        .boxed()
}

proptest! {
    #![proptest_config(cfg(CASES))]

    #[test]
    fn shape_ops(
        (ty, x, p) in typed(ALL, 0, 4, true).prop_flat_map(|(ty, x)| {
            let r = x.rank();
            (Just(ty), Just(x), shape_params(r))
        })
    ) {
        let _s = serial();
        let rank = x.rank();
        let xt = tensor(ty, &x);
        let mut b = Batch::default();
        // reshape: flatten, reversed dims, a 1 inserted, and one dim inferred (-1)
        b.check("flatten", xt.flatten(), r::reshape(&x, &[-1]), ty);
        let rev: Vec<i64> = x.dims.iter().rev().map(|&d| d as i64).collect();
        b.check(format!("reshape {rev:?}"), xt.reshape(&rev), r::reshape(&x, &rev), ty);
        let mut ins = idims(&x.dims);
        ins.insert(ins.len() / 2, 1);
        b.check(format!("reshape {ins:?}"), xt.reshape(&ins), r::reshape(&x, &ins), ty);
        if rank > 0 {
            let mut hole = idims(&x.dims);
            hole[p.hole] = -1;
            b.check(format!("reshape {hole:?}"), xt.reshape(&hole), r::reshape(&x, &hole), ty);
        }
        b.check(format!("permute {:?}", p.perm), xt.permute(&p.perm), r::permute(&x, &p.perm), ty);
        if rank > 0 {
            b.check(format!("transpose({}, {})", p.t0, p.t1), xt.transpose(p.t0, p.t1), r::transpose(&x, p.t0, p.t1), ty);
            let fl = axes_of(&p.flip, &vec![false; rank], rank);
            b.check(format!("flip {fl:?}"), xt.flip(&fl), r::flip(&x, &fl), ty);
            b.check(format!("squeeze({})", p.squeeze), xt.squeeze(p.squeeze), r::squeeze(&x, p.squeeze), ty);
            let (a, s, e, st) = p.slice;
            b.check(format!("slice(axis {a}, {s}:{e}:{st})"), xt.slice(a, s, e, st), r::slice(&x, a, s, e, st), ty);
        }
        b.check(format!("unsqueeze({})", p.unsqueeze), xt.unsqueeze(p.unsqueeze), r::unsqueeze(&x, p.unsqueeze), ty);
        // broadcast_to: extra leading dims, and each dim of size 1 expanded
        let mut target = p.extra.clone();
        target.extend(x.dims.iter().zip(&p.expand).map(|(&d, &e)| if d == 1 { e } else { d }));
        b.check(format!("broadcast_to {target:?}"), xt.broadcast_to(&idims(&target)), r::broadcast_to(&x, &target), ty);
        b.run()?;
    }

    #[test]
    fn concat_stack_pad(
        (ty, base, axis, neg, sizes, pads, pad_value) in (ty_of(ALL), dims(1, 4, true)).prop_flat_map(|(ty, d)| {
            let r = d.len();
            (Just(ty), Just(d), 0..r, any::<bool>(), vec(0usize..4, 1..=3), vec((0usize..3, 0usize..3), r), raw())
        }).prop_flat_map(|(ty, d, axis, neg, sizes, pads, pv)| {
            let parts: Vec<BoxedStrategy<Arr>> = sizes.iter().map(|&s| {
                let mut dd = d.clone();
                dd[axis] = s;
                arr(ty, dd)
            }).collect();
            let stacked = vec(arr(ty, d.clone()), 1..=3);
            (Just(ty), Just(d), Just(axis), Just(neg), (parts, stacked), Just(pads), Just(pv))
        })
    ) {
        let _s = serial();
        let (parts, same) = sizes;
        let rank = base.len();
        let a = if neg { axis as i64 - rank as i64 } else { axis as i64 };
        let pt: Vec<Tensor> = parts.iter().map(|p| tensor(ty, p)).collect();
        let st: Vec<Tensor> = same.iter().map(|p| tensor(ty, p)).collect();
        let (pr, sr): (Vec<&Arr>, Vec<&Arr>) = (parts.iter().collect(), same.iter().collect());
        let (ptr, str_): (Vec<&Tensor>, Vec<&Tensor>) = (pt.iter().collect(), st.iter().collect());
        let mut b = Batch::default();
        b.check(format!("concat axis {a}"), Tensor::concat(&ptr, a), r::concat(&pr, a), ty);
        // stack takes a new axis in -(rank + 1)..=rank
        let sa = if neg { axis as i64 - rank as i64 - 1 } else { axis as i64 };
        b.check(format!("stack axis {sa}"), Tensor::stack(&str_, sa), r::stack(&sr, sa), ty);
        let x = &same[0];
        let v = fit(ty, pad_value);
        let ipads: Vec<(i64, i64)> = pads.iter().map(|&(l, h)| (l as i64, h as i64)).collect();
        b.check(format!("pad {pads:?} with {v}"), st[0].pad(&ipads, v), r::pad(x, &pads, v), ty);
        b.run()?;
    }
}

// ---------------------------------------------------------------------------------------------
// Indexing
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg(CASES))]

    #[test]
    fn index_select_and_index_add(
        (ty, x, axis, idx, idx_ty, src) in (ty_of(FLOATS_SIGNED_INTS), dims(1, 3, false)).prop_flat_map(|(ty, d)| {
            let r = d.len();
            (Just(ty), arr(ty, d.clone()), 0..r).prop_flat_map(move |(ty, x, axis)| {
                let n = x.dims[axis];
                let d2 = x.dims.clone();
                (Just(ty), Just(x), Just(axis), vec(0..n, 0..=5), prop::sample::select(vec![Ty::S32, Ty::S64]))
                    .prop_flat_map(move |(ty, x, axis, idx, it)| {
                        let mut sd = d2.clone();
                        sd[axis] = idx.len();
                        (Just(ty), Just(x), Just(axis), Just(idx), Just(it), arr(ty, sd))
                    })
            })
        })
    ) {
        let _s = serial();
        let xt = tensor(ty, &x);
        let it = index_tensor(idx_ty, &idx);
        let a = axis as i64;
        let mut b = Batch::default();
        b.check(format!("index_select axis {a} {idx:?} ({idx_ty:?})"), xt.index_select(a, &it), r::index_select(&x, a, &idx), ty);
        let srct = tensor(ty, &src);
        let scale = r::index_add(&r::abs(&x), a, &idx, &r::abs(&src)).expect("valid");
        b.check(format!("index_add axis {a} {idx:?} ({idx_ty:?})"), xt.index_add(a, &it, &srct), r::index_add(&x, a, &idx, &src), ty)
            .scale(scale);
        // the same along a negative axis
        let na = a - x.rank() as i64;
        b.check(format!("index_select axis {na}"), xt.index_select(na, &it), r::index_select(&x, na, &idx), ty);
        b.run()?;
    }

    #[test]
    fn one_hot_and_embedding(
        (label_ty, out_ty, classes, labels, table, emb_idx) in (
            prop::sample::select(vec![Ty::U8, Ty::S32, Ty::S64]), ty_of(ALL), 1usize..=5, dims(0, 2, true),
            ty_of(FLOATS), 1usize..=5, 1usize..=4, dims(0, 2, true),
        ).prop_flat_map(|(lt, ot, classes, ld, tt, v, d, ed)| {
            let labels = vec(0..classes, r::numel(&ld)).prop_map(move |l| Arr::new(&ld, l.into_iter().map(|i| i as f64).collect()));
            let emb = vec(0..v, r::numel(&ed)).prop_map(move |l| Arr::new(&ed, l.into_iter().map(|i| i as f64).collect()));
            (Just(lt), Just(ot), Just(classes), labels, (Just(tt), arr(tt, vec![v, d])), emb)
        })
    ) {
        let _s = serial();
        let (tt, table) = table;
        let lt = tensor(label_ty, &labels);
        let mut b = Batch::default();
        b.check(format!("one_hot {classes} classes {label_ty:?} -> {out_ty:?}"), lt.one_hot(classes as i64, dtype(out_ty)),
            Some(r::one_hot(&labels, classes)), out_ty);
        let tab = tensor(tt, &table);
        for ity in [Ty::S32, Ty::S64] {
            let et = tensor(ity, &emb_idx);
            b.check(format!("embedding ({ity:?} indices)"), tab.embedding(&et), r::embedding(&table, &emb_idx), tt);
        }
        b.run()?;
    }
}

// ---------------------------------------------------------------------------------------------
// Linear algebra
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg(CASES))]

    /// `matmul` with NumPy semantics: ranks 1 to 4 on each side, broadcast batch dims.
    #[test]
    fn matmul_shapes(
        (ty, a, bb) in (ty_of(FLOATS_SIGNED_INTS), 1usize..=4, 1usize..=4, dim(true), dim(true), dim(true), bcast(2, 2, false))
            .prop_flat_map(|(ty, ra, rb, m, k, n, batch)| {
                let da = if ra == 1 { vec![k] } else {
                    let mut d: Vec<usize> = batch[0].iter().rev().take(ra - 2).rev().copied().collect();
                    d.extend([m, k]);
                    d
                };
                let db = if rb == 1 { vec![k] } else {
                    let mut d: Vec<usize> = batch[1].iter().rev().take(rb - 2).rev().copied().collect();
                    d.extend([k, n]);
                    d
                };
                (Just(ty), arr(ty, da), arr(ty, db))
            })
    ) {
        let _s = serial();
        let (at, bt) = (tensor(ty, &a), tensor(ty, &bb));
        let scale = r::matmul(&r::abs(&a), &r::abs(&bb));
        let mut b = Batch::default();
        let c = b.check(format!("matmul {:?} @ {:?}", a.dims, bb.dims), at.matmul(&bt), r::matmul(&a, &bb), ty);
        if let Some(s) = scale {
            c.scale(s);
        }
        b.run()?;
    }

    /// XLA's `dot_general` with batch and contracting dims anywhere in either operand.
    #[test]
    fn dot_general_dims(
        (ty, a, bb, lb, rbat, lc, rc) in (
            ty_of(FLOATS), vec(1usize..=3, 0..=2), vec(0usize..=3, 0..=2), vec(1usize..=3, 0..=2), vec(1usize..=3, 0..=2),
        )
            .prop_flat_map(|(ty, batch, contract, fa, fb)| {
                let la = batch.len() + contract.len() + fa.len();
                let lb = batch.len() + contract.len() + fb.len();
                (Just(ty), Just((batch, contract, fa, fb)),
                 Just((0..la).collect::<Vec<_>>()).prop_shuffle(), Just((0..lb).collect::<Vec<_>>()).prop_shuffle())
            })
            .prop_flat_map(|(ty, (batch, contract, fa, fb), pa, pb)| {
                // Logical dims [batch.., contract.., free..]; operand dim i holds logical dim p[i].
                let (nb, nc) = (batch.len(), contract.len());
                let logical = |free: &[usize]| -> Vec<usize> { batch.iter().chain(&contract).chain(free).copied().collect() };
                let (la, lb) = (logical(&fa), logical(&fb));
                let da: Vec<usize> = pa.iter().map(|&p| la[p]).collect();
                let db: Vec<usize> = pb.iter().map(|&p| lb[p]).collect();
                let pos = |p: &[usize], l: usize| p.iter().position(|&x| x == l).expect("a permutation");
                let lbatch: Vec<usize> = (0..nb).map(|l| pos(&pa, l)).collect();
                let rbatch: Vec<usize> = (0..nb).map(|l| pos(&pb, l)).collect();
                let lcon: Vec<usize> = (nb..nb + nc).map(|l| pos(&pa, l)).collect();
                let rcon: Vec<usize> = (nb..nb + nc).map(|l| pos(&pb, l)).collect();
                (Just(ty), arr(ty, da), arr(ty, db), Just(lbatch), Just(rbatch), Just(lcon), Just(rcon))
            })
    ) {
        let _s = serial();
        let (at, bt) = (tensor(ty, &a), tensor(ty, &bb));
        let scale = r::dot_general(&r::abs(&a), &r::abs(&bb), &lb, &rbat, &lc, &rc).expect("valid");
        let mut b = Batch::default();
        b.check(format!("dot_general {:?} {:?} batch {lb:?}/{rbat:?} contract {lc:?}/{rc:?}", a.dims, bb.dims),
            at.dot_general(&bt, &lb, &rbat, &lc, &rc), r::dot_general(&a, &bb, &lb, &rbat, &lc, &rc), ty).scale(scale);
        b.run()?;
    }
}

// ---------------------------------------------------------------------------------------------
// Neural-network ops
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg(CASES))]

    #[test]
    fn softmax_family(
        (ty, x, axis, logits, labels, label_ty) in (typed(FLOATS, 1, 4, true), 1usize..=4, 1usize..=5).prop_flat_map(|((ty, x), n, c)| {
            let r = x.rank() as i64;
            (Just(ty), Just(x), -r..r, arr(ty, vec![n, c]), vec(0..c, n), prop::sample::select(vec![Ty::S32, Ty::S64, Ty::U8]))
        })
    ) {
        let _s = serial();
        let xt = tensor(ty, &x);
        let m = x.max_abs();
        let n = x.dims[r::norm_axis(axis, x.rank()).expect("valid")].max(1) as f64;
        let mut b = Batch::default();
        b.check(format!("softmax axis {axis}"), xt.softmax(axis), r::softmax(&x, axis), ty);
        b.check(format!("log_softmax axis {axis}"), xt.log_softmax(axis), r::log_softmax(&x, axis), ty)
            .scale_all(2.0 * m + n.ln() + 1.0);
        let lt = tensor(label_ty, &Arr::new(&[labels.len()], labels.iter().map(|&l| l as f64).collect()));
        let c = logits.dims[1] as f64;
        b.check(format!("cross_entropy labels {labels:?} ({label_ty:?})"), tensor(ty, &logits).cross_entropy(&lt),
            r::cross_entropy(&logits, &labels), ty).scale_all(2.0 * logits.max_abs() + c.ln() + 1.0);
        b.run()?;
    }

    #[test]
    fn layer_norm_op(
        (ty, x, k, w, bias) in typed(FLOATS, 1, 3, false).prop_flat_map(|(ty, x)| {
            let r = x.rank();
            (Just(ty), Just(x), 1..=r)
        }).prop_flat_map(|(ty, x, k)| {
            let nd = x.dims[x.rank() - k..].to_vec();
            (Just(ty), Just(x), Just(k), prop::option::of(arr(ty, nd.clone())), prop::option::of(arr(ty, nd)))
        })
    ) {
        let _s = serial();
        let xt = tensor(ty, &x);
        let (wt, bt) = (w.as_ref().map(|w| tensor(ty, w)), bias.as_ref().map(|b| tensor(ty, b)));
        let eps = 1e-5;
        let normalized: Vec<i64> = idims(&x.dims[x.rank() - k..]);
        let axes: Vec<i64> = (x.rank() - k..x.rank()).map(|a| a as i64).collect();
        // Rounding errors of the mean are amplified by 1 / std: scale = max|x| / std * |w| + |b|.
        let spread = r::binary(
            &r::amax(&r::abs(&x), &axes, true).expect("amax"),
            &r::var(&x, &axes, 0, true).expect("var"),
            |m, v| m / (v + eps).sqrt(),
        ).expect("same dims");
        let spread = match &w { Some(w) => r::mul(&spread, &r::abs(w)).expect("bcast"), None => spread };
        let spread = match &bias { Some(b) => r::add(&spread, &r::abs(b)).expect("bcast"), None => spread };
        let mut b = Batch::default();
        b.check(format!("layer_norm {normalized:?} weight {} bias {}", w.is_some(), bias.is_some()),
            xt.layer_norm(&normalized, wt.as_ref(), bt.as_ref(), eps),
            r::layer_norm(&x, k, w.as_ref(), bias.as_ref(), eps), ty).scale(spread);
        b.run()?;
    }

    #[test]
    fn conv2d_op(
        (ty, x, w, stride, padding, dilation, groups) in (
            ty_of(FLOATS), 1usize..=2, 1usize..=2, 1usize..=2, 1usize..=2, (1usize..=6, 1usize..=6), (1usize..=3, 1usize..=3),
            (1usize..=2, 1usize..=2), (0usize..=1, 0usize..=1), (1usize..=2, 1usize..=2),
        ).prop_flat_map(|(ty, n, groups, cg, og, (h, wd), (kh, kw), s, p, d)| {
            (Just(ty), arr(ty, vec![n, cg * groups, h, wd]), arr(ty, vec![og * groups, cg, kh, kw]),
             Just([s.0, s.1]), Just([p.0, p.1]), Just([d.0, d.1]), Just(groups))
        })
    ) {
        let _s = serial();
        let (xt, wt) = (tensor(ty, &x), tensor(ty, &w));
        let want = r::conv2d(&x, &w, stride, padding, dilation, groups);
        let scale = r::conv2d(&r::abs(&x), &r::abs(&w), stride, padding, dilation, groups);
        let i2 = |a: [usize; 2]| [a[0] as i64, a[1] as i64];
        let mut b = Batch::default();
        let label = format!(
            "conv2d x {:?} w {:?} stride {stride:?} padding {padding:?} dilation {dilation:?} groups {groups}",
            x.dims, w.dims
        );
        let c = b.check(label,
            xt.conv2d(&wt, i2(stride), i2(padding), i2(dilation), groups as i64), want, ty);
        if let Some(s) = scale {
            c.scale(s);
        }
        b.run()?;
    }

    #[test]
    fn pooling(
        (ty, x, kernel, stride, padding) in (
            ty_of(FLOATS), 1usize..=2, 1usize..=2, (1usize..=6, 1usize..=6), (1usize..=3, 1usize..=3), (1usize..=3, 1usize..=3),
        ).prop_flat_map(|(ty, n, c, (h, w), (kh, kw), (sh, sw))| {
            // PyTorch allows padding up to half the kernel.
            (Just(ty), arr(ty, vec![n, c, h, w]), Just([kh, kw]), Just([sh, sw]), (0..=kh / 2, 0..=kw / 2))
        })
    ) {
        let _s = serial();
        let padding = [padding.0, padding.1];
        let xt = tensor(ty, &x);
        let i2 = |a: [usize; 2]| [a[0] as i64, a[1] as i64];
        let k = format!("x {:?} kernel {kernel:?} stride {stride:?} padding {padding:?}", x.dims);
        let mut b = Batch::default();
        b.check(format!("max_pool2d {k}"), xt.max_pool2d(i2(kernel), i2(stride), i2(padding)),
            r::max_pool2d(&x, kernel, stride, padding), ty);
        b.check(format!("avg_pool2d {k}"), xt.avg_pool2d(i2(kernel), i2(stride), i2(padding)),
            r::avg_pool2d(&x, kernel, stride, padding), ty).scale_all(x.max_abs());
        b.run()?;
    }
}

// ---------------------------------------------------------------------------------------------
// Fixed edge cases
// ---------------------------------------------------------------------------------------------

fn a(dims: &[usize], data: &[f64]) -> Arr {
    Arr::new(dims, data.to_vec())
}

fn run(b: Batch) {
    if let Err(e) = b.run() {
        panic!("{e}");
    }
}

#[test]
fn reference_self_check() {
    r::self_check();
}

#[test]
fn zero_size_dims() {
    let _s = serial();
    let x = Arr::full(&[0, 3], 0.0);
    let xt = tensor(Ty::F32, &x);
    let mut b = Batch::default();
    b.check("sum over the empty axis", xt.sum(&[0], false), r::sum(&x, &[0], false), Ty::F32);
    b.check("sum over all of an empty tensor", xt.sum(&[], false), r::sum(&x, &[], false), Ty::F32);
    b.check(
        "mean over the empty axis is NaN",
        xt.mean(&[0], false),
        r::mean(&x, &[0], false),
        Ty::F32,
    );
    b.check("amax over the non-empty axis", xt.amax(&[1], true), r::amax(&x, &[1], true), Ty::F32);
    b.check(
        "logsumexp over the empty axis is -inf",
        xt.logsumexp(&[0], false),
        r::logsumexp(&x, &[0], false),
        Ty::F32,
    );
    b.check("reshape [3, 0]", xt.reshape(&[3, 0]), r::reshape(&x, &[3, 0]), Ty::F32);
    b.check("reshape [-1]", xt.reshape(&[-1]), r::reshape(&x, &[-1]), Ty::F32);
    b.check("exp", xt.exp(), Some(r::exp(&x)), Ty::F32);
    let k0 = tensor(Ty::F32, &Arr::full(&[2, 0], 0.0));
    let m0 = tensor(Ty::F32, &Arr::full(&[0, 3], 0.0));
    b.check(
        "matmul [2,0] @ [0,3] is zeros",
        k0.matmul(&m0),
        r::matmul(&Arr::full(&[2, 0], 0.0), &x),
        Ty::F32,
    );
    let y = a(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let yt = tensor(Ty::F32, &y);
    b.check(
        "concat with an empty part",
        Tensor::concat(&[&xt, &yt], 0),
        r::concat(&[&x, &y], 0),
        Ty::F32,
    );
    b.check("slice to nothing", yt.slice(1, 2, 1, 1), r::slice(&y, 1, 2, 1, 1), Ty::F32);
    b.check(
        "broadcast [1,3] to [0,3]",
        tensor(Ty::F32, &a(&[1, 3], &[1.0, 2.0, 3.0])).broadcast_to(&[0, 3]),
        r::broadcast_to(&a(&[1, 3], &[1.0, 2.0, 3.0]), &[0, 3]),
        Ty::F32,
    );
    let none = index_tensor(Ty::S64, &[]);
    b.check(
        "index_select no indices",
        yt.index_select(1, &none),
        r::index_select(&y, 1, &[]),
        Ty::F32,
    );
    run(b);
}

#[test]
fn scalars() {
    let _s = serial();
    let x = Arr::scalar(-1.5);
    let y = a(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let (xt, yt) = (tensor(Ty::F64, &x), tensor(Ty::F64, &y));
    let mut b = Batch::default();
    b.check("scalar + matrix", xt.add(&yt), r::add(&x, &y), Ty::F64);
    b.check("matrix * scalar", yt.mul(&xt), r::mul(&y, &x), Ty::F64);
    b.check("abs of a scalar", xt.abs(), Some(r::abs(&x)), Ty::F64);
    b.check("sum of a scalar", xt.sum(&[], false), r::sum(&x, &[], false), Ty::F64);
    b.check("sum to a scalar", yt.sum(&[], false), r::sum(&y, &[], false), Ty::F64);
    b.check("sum to a scalar, keepdim", yt.sum(&[], true), r::sum(&y, &[], true), Ty::F64);
    b.check("unsqueeze a scalar", xt.unsqueeze(0), r::unsqueeze(&x, 0), Ty::F64);
    b.check("reshape a scalar to [1, 1]", xt.reshape(&[1, 1]), r::reshape(&x, &[1, 1]), Ty::F64);
    b.check("broadcast a scalar", xt.broadcast_to(&[2, 3]), r::broadcast_to(&x, &[2, 3]), Ty::F64);
    b.check("permute a scalar", xt.permute(&[]), r::permute(&x, &[]), Ty::F64);
    let v = a(&[3], &[1.0, 2.0, 3.0]);
    let vt = tensor(Ty::F64, &v);
    b.check("vector @ vector is a scalar", vt.matmul(&vt), r::matmul(&v, &v), Ty::F64);
    b.check("matmul with a scalar is an error", xt.matmul(&vt), None, Ty::F64);
    b.check(
        "one_hot of a scalar label",
        tensor(Ty::S64, &Arr::scalar(2.0)).one_hot(4, DType::F32),
        Some(r::one_hot(&Arr::scalar(2.0), 4)),
        Ty::F32,
    );
    run(b);
}

/// PyTorch reduces a 0-d tensor over dim 0 or -1 (a scalar acts as one element there).
#[test]
fn scalar_reductions_accept_dim_0_and_minus_1() {
    let _s = serial();
    let x = Arr::scalar(2.5);
    let xt = tensor(Ty::F32, &x);
    let mut b = Batch::default();
    b.check("sum(dim=0) of a scalar", xt.sum(&[0], false), Some(x.clone()), Ty::F32);
    b.check("amax(dim=-1) of a scalar", xt.amax(&[-1], false), Some(x.clone()), Ty::F32);
    b.check("argmax(dim=0) of a scalar", xt.argmax(0, false), Some(Arr::scalar(0.0)), Ty::S64);
    b.check("softmax(dim=-1) of a scalar", xt.softmax(-1), Some(Arr::scalar(1.0)), Ty::F32);
    run(b);
}

#[test]
fn negative_axes() {
    let _s = serial();
    let x = Arr::from_fn(&[2, 3, 4], |i| (i[0] * 12 + i[1] * 4 + i[2]) as f64 * 0.25 - 2.0);
    let xt = tensor(Ty::F64, &x);
    let mut b = Batch::default();
    b.check("sum [-1]", xt.sum(&[-1], false), r::sum(&x, &[-1], false), Ty::F64);
    b.check("sum [-1, 0] keepdim", xt.sum(&[-1, 0], true), r::sum(&x, &[-1, 0], true), Ty::F64);
    b.check("amin [-3]", xt.amin(&[-3], false), r::amin(&x, &[-3], false), Ty::F64);
    b.check("argmax -2", xt.argmax(-2, false), r::argmax(&x, -2, false), Ty::S64);
    b.check("transpose(-1, -3)", xt.transpose(-1, -3), r::transpose(&x, -1, -3), Ty::F64);
    b.check("unsqueeze(-1)", xt.unsqueeze(-1), r::unsqueeze(&x, -1), Ty::F64);
    b.check("unsqueeze(-4)", xt.unsqueeze(-4), r::unsqueeze(&x, -4), Ty::F64);
    b.check("softmax(-1)", xt.softmax(-1), r::softmax(&x, -1), Ty::F64);
    b.check("log_softmax(-2)", xt.log_softmax(-2), r::log_softmax(&x, -2), Ty::F64).scale_all(10.0);
    b.check("flip [-1, -3]", xt.flip(&[-1, -3]), r::flip(&x, &[-1, -3]), Ty::F64);
    b.check("slice(-1, -3, -1, 1)", xt.slice(-1, -3, -1, 1), r::slice(&x, -1, -3, -1, 1), Ty::F64);
    b.check(
        "slice(-1, -100, 100, 3)",
        xt.slice(-1, -100, 100, 3),
        r::slice(&x, -1, -100, 100, 3),
        Ty::F64,
    );
    b.check("concat axis -1", Tensor::concat(&[&xt, &xt], -1), r::concat(&[&x, &x], -1), Ty::F64);
    b.check("stack axis -1", Tensor::stack(&[&xt, &xt], -1), r::stack(&[&x, &x], -1), Ty::F64);
    b.check(
        "index_select axis -1",
        xt.index_select(-1, &index_tensor(Ty::S32, &[3, 0, 3])),
        r::index_select(&x, -1, &[3, 0, 3]),
        Ty::F64,
    );
    b.check("axis 3 of a rank-3 tensor is an error", xt.sum(&[3], false), None, Ty::F64);
    b.check("axis -4 of a rank-3 tensor is an error", xt.softmax(-4), None, Ty::F64);
    b.check("squeeze of a dim that is not 1 is an error", xt.squeeze(-1), None, Ty::F64);
    b.check("slice step 0 is an error", xt.slice(0, 0, 1, 0), None, Ty::F64);
    b.check("broadcast [2,3,4] to [3,4] is an error", xt.broadcast_to(&[3, 4]), None, Ty::F64);
    b.check("reshape to the wrong count is an error", xt.reshape(&[5, 5]), None, Ty::F64);
    b.check("permute that is not a permutation is an error", xt.permute(&[0, 0, 1]), None, Ty::F64);
    run(b);
}

#[test]
fn argmax_and_argmin_take_the_first_of_ties() {
    let _s = serial();
    let x = a(&[2, 4], &[1.0, 3.0, 3.0, -1.0, -2.0, -2.0, 0.0, -2.0]);
    let mut b = Batch::default();
    for ty in [Ty::F32, Ty::BF16, Ty::S32, Ty::U8] {
        let xx = x.map(|v| fit(ty, v / 5.0).max(if ty == Ty::U8 { 0.0 } else { f64::MIN }));
        let xt = tensor(ty, &xx);
        b.check(format!("argmax {ty:?}"), xt.argmax(1, false), r::argmax(&xx, 1, false), Ty::S64);
        b.check(format!("argmin {ty:?}"), xt.argmin(1, true), r::argmin(&xx, 1, true), Ty::S64);
        b.check(
            format!("argmax over all rows {ty:?}"),
            xt.argmax(0, false),
            r::argmax(&xx, 0, false),
            Ty::S64,
        );
    }
    run(b);
}

/// NaN propagates through maximum, minimum, clamp, relu and amax, and argmax/argmin pick the
/// first NaN (PyTorch treats NaN as greater and as smaller than everything there).
#[test]
fn nan_semantics() {
    let _s = serial();
    let nan = f64::NAN;
    let x = a(&[2, 3], &[1.0, nan, 3.0, -1.0, 0.5, nan]);
    let y = a(&[3], &[nan, 0.0, 2.0]);
    let mut b = Batch::default();
    for ty in [Ty::F32, Ty::F64, Ty::BF16] {
        let (xt, yt) = (tensor(ty, &x), tensor(ty, &y));
        b.check(format!("maximum {ty:?}"), xt.maximum(&yt), r::maximum(&x, &y), ty);
        b.check(format!("minimum {ty:?}"), xt.minimum(&yt), r::minimum(&x, &y), ty);
        b.check(format!("clamp {ty:?}"), xt.clamp(-0.5, 0.5), Some(r::clamp(&x, -0.5, 0.5)), ty);
        b.check(format!("relu {ty:?}"), xt.relu(), Some(r::relu(&x)), ty);
        b.check(format!("amax {ty:?}"), xt.amax(&[1], false), r::amax(&x, &[1], false), ty);
        b.check(format!("amin {ty:?}"), xt.amin(&[1], false), r::amin(&x, &[1], false), ty);
        b.check(format!("argmax {ty:?}"), xt.argmax(1, false), r::argmax(&x, 1, false), Ty::S64);
        b.check(format!("argmin {ty:?}"), xt.argmin(1, false), r::argmin(&x, 1, false), Ty::S64);
        b.check(format!("eq {ty:?}"), xt.eq(&xt), r::compare(Cmp::Eq, &x, &x), Ty::Bool);
        b.check(format!("ne {ty:?}"), xt.ne(&xt), r::compare(Cmp::Ne, &x, &x), Ty::Bool);
    }
    run(b);
}

/// `logsumexp` of rows whose maximum is infinite is that infinity (PyTorch masks the infinite
/// max before subtracting it), and `log_softmax` of -inf entries is -inf.
#[test]
fn logsumexp_of_infinities() {
    let _s = serial();
    let (inf, ninf) = (f64::INFINITY, f64::NEG_INFINITY);
    let x = a(&[3, 2], &[ninf, ninf, inf, 1.0, ninf, 0.0]);
    let xt = tensor(Ty::F32, &x);
    let mut b = Batch::default();
    b.check(
        "logsumexp over rows [-inf, -inf], [inf, 1], [-inf, 0]",
        xt.logsumexp(&[1], false),
        r::logsumexp(&x, &[1], false),
        Ty::F32,
    );
    let z = a(&[2], &[ninf, 0.0]);
    let zt = tensor(Ty::F32, &z);
    b.check("softmax [-inf, 0]", zt.softmax(0), r::softmax(&z, 0), Ty::F32);
    b.check("log_softmax [-inf, 0]", zt.log_softmax(0), r::log_softmax(&z, 0), Ty::F32);
    run(b);
}

/// Conversions at the edges: truncation toward zero, NaN and -0.0 to bool, overflow to
/// infinity, ties to even, and integer narrowing that wraps.
#[test]
fn cast_edge_values() {
    let _s = serial();
    let mut b = Batch::default();
    let f = a(&[6], &[2.5, -2.5, 2.999, -0.9, 1e9, -7.0]);
    for (from, to) in [(Ty::F32, Ty::S32), (Ty::F64, Ty::S64), (Ty::F32, Ty::S64)] {
        let x = f.convert(from);
        b.check(
            format!("{from:?} -> {to:?}"),
            tensor(from, &x).cast(dtype(to)),
            Some(r::cast(&x, to)),
            to,
        );
    }
    let bools = a(&[5], &[f64::NAN, -0.0, 0.0, f64::INFINITY, 0.5]);
    for from in [Ty::F32, Ty::F64, Ty::BF16] {
        b.check(
            format!("{from:?} -> Bool"),
            tensor(from, &bools).cast(DType::Pred),
            Some(r::cast(&bools, Ty::Bool)),
            Ty::Bool,
        );
    }
    let big = a(&[4], &[70000.0, 65519.0, 65520.0, -1e6]);
    b.check(
        "F64 -> F16 overflow",
        tensor(Ty::F64, &big).cast(DType::F16),
        Some(r::cast(&big, Ty::F16)),
        Ty::F16,
    )
    .tol(EXACT);
    let ties = a(
        &[4],
        &[
            1.0 + 2f64.powi(-8),
            1.0 + 3.0 * 2f64.powi(-8),
            -(1.0 + 2f64.powi(-8)),
            1.0 + 2f64.powi(-8) + 2f64.powi(-20),
        ],
    );
    b.check(
        "F32 -> BF16 ties to even",
        tensor(Ty::F32, &ties).cast(DType::BF16),
        Some(r::cast(&ties, Ty::BF16)),
        Ty::BF16,
    )
    .tol(EXACT);
    b.check(
        "F64 -> BF16 ties to even",
        tensor(Ty::F64, &ties).cast(DType::BF16),
        Some(r::cast(&ties, Ty::BF16)),
        Ty::BF16,
    )
    .tol(EXACT);
    let ints = a(&[4], &[300.0, -1.0, 255.0, -256.0]);
    b.check(
        "S32 -> U8 wraps",
        tensor(Ty::S32, &ints).cast(DType::U8),
        Some(r::cast(&ints, Ty::U8)),
        Ty::U8,
    );
    let wide = a(&[3], &[4294967301.0, -2147483649.0, 2147483647.0]);
    b.check(
        "S64 -> S32 wraps",
        tensor(Ty::S64, &wide).cast(DType::S32),
        Some(r::cast(&wide, Ty::S32)),
        Ty::S32,
    );
    run(b);
}

/// Integer arithmetic wraps around (two's complement), as in PyTorch.
#[test]
fn integer_overflow_wraps() {
    let _s = serial();
    let mut b = Batch::default();
    let x = a(&[3], &[2147483647.0, -2147483648.0, 65536.0]);
    let y = a(&[3], &[1.0, -1.0, 65536.0]);
    let (xt, yt) = (tensor(Ty::S32, &x), tensor(Ty::S32, &y));
    let wrap = |v: Option<Arr>| v.map(|v| v.map(|e| Ty::S32.wrap(e)));
    b.check("s32 add", xt.add(&yt), wrap(r::add(&x, &y)), Ty::S32);
    b.check("s32 sub", xt.sub(&yt), wrap(r::sub(&x, &y)), Ty::S32);
    b.check("s32 mul", xt.mul(&yt), wrap(r::mul(&x, &y)), Ty::S32);
    b.check("s32 neg", xt.neg(), wrap(Some(r::neg(&x))), Ty::S32);
    b.check("s32 abs", xt.abs(), wrap(Some(r::abs(&x))), Ty::S32);
    let u = a(&[3], &[250.0, 3.0, 128.0]);
    let v = a(&[3], &[10.0, 5.0, 2.0]);
    let (ut, vt) = (tensor(Ty::U8, &u), tensor(Ty::U8, &v));
    let wrap8 = |v: Option<Arr>| v.map(|v| v.map(|e| Ty::U8.wrap(e)));
    b.check("u8 add", ut.add(&vt), wrap8(r::add(&u, &v)), Ty::U8);
    b.check("u8 sub", ut.sub(&vt), wrap8(r::sub(&u, &v)), Ty::U8);
    b.check("u8 mul", ut.mul(&vt), wrap8(r::mul(&u, &v)), Ty::U8);
    b.check("u8 neg", ut.neg(), wrap8(Some(r::neg(&u))), Ty::U8);
    run(b);
}

/// `torch.flip` refuses an axis given twice; the engine must say so when the op is recorded,
/// not fail the compile of a later sync.
#[test]
fn flip_of_a_repeated_axis_is_an_error() {
    let _s = serial();
    let x = Arr::from_fn(&[2, 3], |i| (i[0] * 3 + i[1]) as f64);
    let xt = tensor(Ty::F32, &x);
    let mut b = Batch::default();
    b.check("flip [0, -2] of a rank-2 tensor", xt.flip(&[0, -2]), r::flip(&x, &[0, -2]), Ty::F32);
    run(b);
}

/// Bool tensors in arithmetic, as PyTorch defines it: `+` and `maximum` are `or`, `*` and
/// `minimum` are `and`.
#[test]
fn bool_arithmetic() {
    let _s = serial();
    let x = a(&[4], &[0.0, 0.0, 1.0, 1.0]);
    let y = a(&[4], &[0.0, 1.0, 0.0, 1.0]);
    let (xt, yt) = (tensor(Ty::Bool, &x), tensor(Ty::Bool, &y));
    let mut b = Batch::default();
    b.check("bool add", xt.add(&yt), r::logical_or(&x, &y), Ty::Bool);
    b.check("bool mul", xt.mul(&yt), r::logical_and(&x, &y), Ty::Bool);
    b.check("bool maximum", xt.maximum(&yt), r::logical_or(&x, &y), Ty::Bool);
    b.check("bool minimum", xt.minimum(&yt), r::logical_and(&x, &y), Ty::Bool);
    run(b);
}

/// In PyTorch (and NumPy) `/` of integer tensors is true division with a float result, and an
/// integer tensor with a fractional Python scalar promotes to the default float dtype (f32).
#[test]
fn integer_division_and_float_scalars_promote() {
    let _s = serial();
    let x = a(&[4], &[7.0, -7.0, 1.0, 6.0]);
    let y = a(&[4], &[2.0, 2.0, 3.0, -4.0]);
    let mut b = Batch::default();
    for ty in [Ty::S32, Ty::S64] {
        let (xt, yt) = (tensor(ty, &x), tensor(ty, &y));
        b.check(format!("{ty:?} div"), xt.div(&yt), r::div(&x, &y), Ty::F32);
        b.check(
            format!("{ty:?} div_scalar(2)"),
            xt.div_scalar(2.0),
            r::div(&x, &Arr::scalar(2.0)),
            Ty::F32,
        );
        b.check(
            format!("{ty:?} mul_scalar(0.5)"),
            xt.mul_scalar(0.5),
            r::mul(&x, &Arr::scalar(0.5)),
            Ty::F32,
        );
        b.check(
            format!("{ty:?} add_scalar(2.5)"),
            xt.add_scalar(2.5),
            r::add(&x, &Arr::scalar(2.5)),
            Ty::F32,
        );
    }
    run(b);
}

/// `abs` and `sign` of unsigned integers (the identity, and 0 or 1).
#[test]
fn abs_and_sign_of_u8() {
    let _s = serial();
    let x = a(&[4], &[0.0, 1.0, 7.0, 255.0]);
    let xt = tensor(Ty::U8, &x);
    let mut b = Batch::default();
    b.check("abs u8", xt.abs(), Some(r::abs(&x)), Ty::U8);
    b.check("sign u8", xt.sign(), Some(r::sign(&x)), Ty::U8);
    run(b);
}

/// `torch.var` divides by `max(0, N - correction)`: one element with correction 1 is NaN (0/0),
/// and non-equal elements with N <= correction are inf.
#[test]
fn var_with_no_degrees_of_freedom() {
    let _s = serial();
    let x = a(&[2, 1], &[1.0, 3.0]);
    let xt = tensor(Ty::F32, &x);
    let mut b = Batch::default();
    b.check(
        "var over a dim of 1, correction 1",
        xt.var(&[1], 1, false),
        r::var(&x, &[1], 1, false),
        Ty::F32,
    );
    b.check(
        "var over 2 elements, correction 2",
        xt.var(&[], 2, false),
        r::var(&x, &[], 2, false),
        Ty::F32,
    );
    b.check(
        "var over 2 elements, correction 0",
        xt.var(&[], 0, false),
        r::var(&x, &[], 0, false),
        Ty::F32,
    );
    run(b);
}

/// A batch norm's channel mean adds 8,192 values along dimensions that are not the innermost: an
/// f32 accumulator added to element after element (XLA's CPU loop) is off by about 1e-6; torch's
/// cascade sum by 5e-8, and the engine's, accumulated in f64 on the CPU, rounds once.
#[test]
fn long_f32_sums_round_once() {
    let _s = serial();
    let dims = [8i64, 16, 32, 32];
    let mut state = 12345u64;
    let values: Vec<f32> = (0..8 * 16 * 32 * 32)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            0.5 + (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let x = Tensor::from_slice(&values, &dims).unwrap();
    let got = x.mean(&[0, 2, 3], false).unwrap().to_vec::<f32>().unwrap();
    for (c, &g) in got.iter().enumerate() {
        let mut exact = 0f64;
        for n in 0..8 {
            let start = (n * 16 + c) * 1024;
            exact += values[start..start + 1024].iter().map(|&v| v as f64).sum::<f64>();
        }
        exact /= 8192.0;
        let error = (g as f64 - exact).abs() / exact;
        assert!(error < 1e-7, "channel {c}: mean {g}, exactly {exact}: relative error {error:.1e}");
    }
}

/// Half-precision sums accumulate in f32 and round once, as torch's kernels and JAX sum them: in
/// bf16, whose 8 bits of mantissa make 256 + 1 round to 256, a running sum of ones stalls.
#[test]
fn half_precision_sums_accumulate_in_f32() {
    let _s = serial();
    let ones = vec![bf16::from_f32(1.0); 4096];
    let x = Tensor::from_slice(&ones, &[4, 1024]).unwrap();
    for (axes, want) in [(vec![1i64], vec![1024.0f32; 4]), (vec![0, 1], vec![4096.0])] {
        let got = x.sum(&axes, false).unwrap();
        assert_eq!(got.dtype(), DType::BF16);
        let got: Vec<f32> = got.to_vec::<bf16>().unwrap().iter().map(|v| v.to_f32()).collect();
        assert_eq!(got, want, "sum over {axes:?}");
    }
    let tenths = vec![f16::from_f32(0.1); 2048];
    let total = Tensor::from_slice(&tenths, &[2048]).unwrap().sum(&[], false).unwrap();
    let total = total.to_vec::<f16>().unwrap()[0].to_f64();
    let exact = f16::from_f32(0.1).to_f64() * 2048.0;
    assert!((total - exact).abs() <= exact * 1e-3, "f16 sum {total}, exactly {exact}");
}

/// PyTorch sums bool and integer tensors in s64 (`torch.sum(uint8)` is int64), so they do not
/// overflow.
#[test]
fn integer_sums_are_s64() {
    let _s = serial();
    let x = Arr::full(&[3, 100], 7.0);
    let mut b = Batch::default();
    for ty in [Ty::U8, Ty::S32, Ty::Bool] {
        let xx = x.convert(ty);
        let xt = tensor(ty, &xx);
        b.check(format!("sum of {ty:?}"), xt.sum(&[], false), r::sum(&xx, &[], false), Ty::S64);
        b.check(
            format!("sum of {ty:?} over axis 1"),
            xt.sum(&[1], false),
            r::sum(&xx, &[1], false),
            Ty::S64,
        );
    }
    run(b);
}

#[test]
fn creation_ops() {
    let _s = serial();
    let mut b = Batch::default();
    for ty in [Ty::F32, Ty::F64, Ty::BF16, Ty::S32, Ty::S64] {
        let d = dtype(ty);
        b.check(
            format!("arange(2, 11, 3) {ty:?}"),
            Tensor::arange(2.0, 11.0, 3.0, d),
            r::arange(2.0, 11.0, 3.0),
            ty,
        );
        b.check(
            format!("arange(5, -1, -2) {ty:?}"),
            Tensor::arange(5.0, -1.0, -2.0, d),
            r::arange(5.0, -1.0, -2.0),
            ty,
        );
        b.check(
            format!("arange(0, 0, 1) {ty:?}"),
            Tensor::arange(0.0, 0.0, 1.0, d),
            r::arange(0.0, 0.0, 1.0),
            ty,
        );
        b.check(format!("eye(3) {ty:?}"), Tensor::eye(3, d), Some(r::eye(3)), ty);
        b.check(
            format!("full {ty:?}"),
            Ok(Tensor::full(&[2, 3], 7.0, d)),
            Some(Arr::full(&[2, 3], 7.0)),
            ty,
        );
        b.check(
            format!("zeros {ty:?}"),
            Ok(Tensor::zeros(&[3, 0, 2], d)),
            Some(Arr::full(&[3, 0, 2], 0.0)),
            ty,
        );
        b.check(format!("ones {ty:?}"), Ok(Tensor::ones(&[], d)), Some(Arr::scalar(1.0)), ty);
    }
    for ty in [Ty::F32, Ty::F64] {
        let d = dtype(ty);
        b.check(
            format!("arange(0, 1, 0.25) {ty:?}"),
            Tensor::arange(0.0, 1.0, 0.25, d),
            r::arange(0.0, 1.0, 0.25),
            ty,
        );
        b.check(
            format!("arange(-1, 1.1, 0.5) {ty:?}"),
            Tensor::arange(-1.0, 1.1, 0.5, d),
            r::arange(-1.0, 1.1, 0.5),
            ty,
        );
    }
    b.check("arange step 0 is an error", Tensor::arange(0.0, 1.0, 0.0, DType::F32), None, Ty::F32);
    let x = tensor(Ty::S32, &a(&[2], &[4.0, 5.0]));
    b.check("zeros_like", Ok(x.zeros_like()), Some(Arr::full(&[2], 0.0)), Ty::S32);
    run(b);
}

/// Random tensors: the right shape and dtype, values in range, reproducible by seed.
#[test]
fn random_ops_and_dropout() {
    let _s = serial();
    let u = Tensor::rand(&[64, 8], 3, DType::F32).unwrap();
    let u2 = Tensor::rand(&[64, 8], 3, DType::F32).unwrap();
    let n = Tensor::randn(&[512], 5, DType::F64).unwrap();
    let x = Arr::from_fn(&[16, 16], |i| (i[0] * 16 + i[1]) as f64 + 1.0);
    let xt = tensor(Ty::F32, &x);
    let dropped = xt.dropout(0.25, 11, true).unwrap();
    let eval = xt.dropout(0.25, 11, false).unwrap();
    sync().unwrap();
    assert_eq!((u.dims(), u.dtype(), n.dtype()), (&[64i64, 8][..], DType::F32, DType::F64));
    let uv = u.to_f64_vec().unwrap();
    assert!(uv.iter().all(|v| (0.0..1.0).contains(v)), "rand outside [0, 1)");
    assert_eq!(uv, u2.to_f64_vec().unwrap(), "rand with the same seed differs");
    let nv = n.to_f64_vec().unwrap();
    assert!(nv.iter().all(|v| v.is_finite()));
    let mean = nv.iter().sum::<f64>() / nv.len() as f64;
    assert!(mean.abs() < 0.2, "randn mean {mean}");
    let dv = dropped.to_f64_vec().unwrap();
    for (i, (&g, &v)) in dv.iter().zip(&x.data).enumerate() {
        let kept = ((g - v / 0.75).abs() <= 1e-5 * v / 0.75) as u8;
        assert!(g == 0.0 || kept == 1, "dropout at {i}: {g} is neither 0 nor {v}/0.75");
    }
    let zeros = dv.iter().filter(|&&g| g == 0.0).count();
    assert!((20..=110).contains(&zeros), "dropout zeroed {zeros} of 256 with p = 0.25");
    assert_eq!(eval.to_f64_vec().unwrap(), x.data, "dropout in eval mode is the identity");
}

/// Shapes that conv2d and pooling are undefined for are errors, not panics.
#[test]
fn pooling_and_conv_shape_errors() {
    let _s = serial();
    let x = tensor(Ty::F32, &Arr::full(&[1, 2, 3, 3], 1.0));
    let w = tensor(Ty::F32, &Arr::full(&[2, 2, 4, 4], 1.0));
    let mut b = Batch::default();
    b.check("kernel larger than input", x.conv2d(&w, [1, 1], [0, 0], [1, 1], 1), None, Ty::F32);
    b.check(
        "channels that do not divide into groups",
        x.conv2d(&w, [1, 1], [2, 2], [1, 1], 3),
        None,
        Ty::F32,
    );
    b.check("window larger than input", x.max_pool2d([4, 4], [1, 1], [0, 0]), None, Ty::F32);
    b.check(
        "rank-3 pooling input",
        tensor(Ty::F32, &Arr::full(&[2, 3, 3], 1.0)).avg_pool2d([2, 2], [1, 1], [0, 0]),
        None,
        Ty::F32,
    );
    run(b);
}
