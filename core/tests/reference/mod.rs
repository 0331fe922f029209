//! An independent reference evaluator for the engine's ops, in plain Rust.
//!
//! `Arr` is a dense row-major N-d array of `f64` values. Every function here is written from the
//! op's definition (NumPy / PyTorch semantics), never from the engine's lowering, and knows
//! nothing of the engine: the tests in `ops_reference.rs` run an op on both and compare.
//!
//! Conventions: functions return `None` where the op is undefined for the given shapes (the
//! engine must then return an error, never panic). Integer and bool values are carried as exact
//! `f64`s; bool is 0.0 / 1.0. `Ty::convert` gives a value's conversion to an element type.

#![allow(dead_code)]

use half::{bf16, f16};

// ---------------------------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------------------------

/// The element types the tests cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Bool,
    U8,
    S32,
    S64,
    F16,
    BF16,
    F32,
    F64,
}

impl Ty {
    pub const ALL: [Ty; 8] =
        [Ty::Bool, Ty::U8, Ty::S32, Ty::S64, Ty::F16, Ty::BF16, Ty::F32, Ty::F64];
    pub const FLOATS: [Ty; 4] = [Ty::F16, Ty::BF16, Ty::F32, Ty::F64];
    pub const INTS: [Ty; 3] = [Ty::U8, Ty::S32, Ty::S64];

    pub fn is_float(self) -> bool {
        matches!(self, Ty::F16 | Ty::BF16 | Ty::F32 | Ty::F64)
    }

    pub fn is_int(self) -> bool {
        matches!(self, Ty::U8 | Ty::S32 | Ty::S64)
    }

    /// The value `v` converted to this type, as PyTorch's `.to(dtype)` does: floats round to
    /// nearest (ties to even, overflow to infinity); integers truncate toward zero and wrap
    /// modulo 2^bits; bool is `v != 0` (NaN is true).
    pub fn convert(self, v: f64) -> f64 {
        match self {
            Ty::F64 => v,
            Ty::F32 => v as f32 as f64,
            Ty::F16 => f16::from_f64(v).to_f64(),
            Ty::BF16 => bf16::from_f64(v).to_f64(),
            Ty::Bool => (v != 0.0) as u8 as f64,
            Ty::U8 | Ty::S32 | Ty::S64 => self.wrap(v.trunc()),
        }
    }

    /// An exact integer wrapped into this integer type (two's complement).
    pub fn wrap(self, v: f64) -> f64 {
        let i = v as i128;
        match self {
            Ty::U8 => i.rem_euclid(256) as f64,
            Ty::S32 => i as i32 as f64,
            Ty::S64 => i as i64 as f64,
            _ => v,
        }
    }

    /// PyTorch's type promotion of two tensor operands: bool < integers < floats; within a
    /// category the wider wins; u8 with a signed integer gives the signed one (when wider);
    /// bf16 with f16 gives f32.
    pub fn promote(a: Ty, b: Ty) -> Ty {
        use Ty::*;
        if a == b {
            return a;
        }
        let cat = |t: Ty| match t {
            Bool => 0,
            U8 | S32 | S64 => 1,
            _ => 2,
        };
        if cat(a) != cat(b) {
            return if cat(a) > cat(b) { a } else { b };
        }
        let rank = |t: Ty| match t {
            U8 => 1,
            S32 => 2,
            S64 => 3,
            F16 | BF16 => 1,
            F32 => 2,
            F64 => 3,
            Bool => 0,
        };
        match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ if rank(a) >= rank(b) => a,
            _ => b,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The array
// ---------------------------------------------------------------------------------------------

/// A dense, row-major N-d array of f64 values. Rank 0 is a scalar with one value.
#[derive(Clone, Debug, PartialEq)]
pub struct Arr {
    pub dims: Vec<usize>,
    pub data: Vec<f64>,
}

pub fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// Row-major strides of `dims`.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// The multi-index of row-major position `flat` in `dims`.
pub fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        if dims[i] > 0 {
            idx[i] = flat % dims[i];
            flat /= dims[i];
        }
    }
    idx
}

/// A possibly negative axis of a tensor of `rank` dims, normalized (`None` if out of range).
pub fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// Normalized, deduplicated, sorted axes; no axes means all of them (PyTorch's `dim=None`).
pub fn norm_axes(axes: &[i64], rank: usize) -> Option<Vec<usize>> {
    if axes.is_empty() {
        return Some((0..rank).collect());
    }
    let mut out = Vec::new();
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Some(out)
}

impl Arr {
    pub fn new(dims: &[usize], data: Vec<f64>) -> Arr {
        assert_eq!(numel(dims), data.len(), "dims {dims:?}");
        Arr { dims: dims.to_vec(), data }
    }

    pub fn scalar(v: f64) -> Arr {
        Arr::new(&[], vec![v])
    }

    pub fn full(dims: &[usize], v: f64) -> Arr {
        Arr::new(dims, vec![v; numel(dims)])
    }

    /// An array whose value at each multi-index is `f(index)`.
    pub fn from_fn(dims: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Arr {
        let n = numel(dims);
        let data = (0..n).map(|i| f(&unravel(i, dims))).collect();
        Arr::new(dims, data)
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub fn offset(&self, idx: &[usize]) -> usize {
        debug_assert_eq!(idx.len(), self.dims.len());
        idx.iter()
            .zip(strides(&self.dims))
            .map(|(&i, s)| {
                debug_assert!(i < usize::MAX);
                i * s
            })
            .sum()
    }

    pub fn at(&self, idx: &[usize]) -> f64 {
        self.data[self.offset(idx)]
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> Arr {
        Arr::new(&self.dims, self.data.iter().map(|&v| f(v)).collect())
    }

    /// Each value converted to `ty`.
    pub fn convert(&self, ty: Ty) -> Arr {
        self.map(|v| ty.convert(v))
    }

    pub fn max_abs(&self) -> f64 {
        self.data.iter().fold(0.0, |m, v| m.max(v.abs()))
    }
}

// ---------------------------------------------------------------------------------------------
// Broadcasting and elementwise ops
// ---------------------------------------------------------------------------------------------

/// NumPy broadcasting: align right; sizes must be equal or one of them 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let get = |d: &[usize], i: usize| {
        if i + d.len() >= rank {
            d[i + d.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// `a` broadcast to `dims` (`torch.broadcast_to`).
pub fn broadcast_to(a: &Arr, dims: &[usize]) -> Option<Arr> {
    let r = a.rank();
    if r > dims.len() {
        return None;
    }
    let off = dims.len() - r;
    if (0..r).any(|i| a.dims[i] != 1 && a.dims[i] != dims[off + i]) {
        return None;
    }
    Some(Arr::from_fn(dims, |idx| {
        let src: Vec<usize> =
            (0..r).map(|i| if a.dims[i] == 1 { 0 } else { idx[off + i] }).collect();
        a.at(&src)
    }))
}

pub fn unary(a: &Arr, f: impl Fn(f64) -> f64) -> Arr {
    a.map(f)
}

pub fn binary(a: &Arr, b: &Arr, f: impl Fn(f64, f64) -> f64) -> Option<Arr> {
    let dims = broadcast_shapes(&a.dims, &b.dims)?;
    let (a, b) = (broadcast_to(a, &dims)?, broadcast_to(b, &dims)?);
    let data = a.data.iter().zip(&b.data).map(|(&x, &y)| f(x, y)).collect();
    Some(Arr::new(&dims, data))
}

pub fn ternary(c: &Arr, a: &Arr, b: &Arr, f: impl Fn(f64, f64, f64) -> f64) -> Option<Arr> {
    let dims = broadcast_shapes(&c.dims, &broadcast_shapes(&a.dims, &b.dims)?)?;
    let (c, a, b) = (broadcast_to(c, &dims)?, broadcast_to(a, &dims)?, broadcast_to(b, &dims)?);
    let data = (0..c.numel()).map(|i| f(c.data[i], a.data[i], b.data[i])).collect();
    Some(Arr::new(&dims, data))
}

// Scalar definitions (one value in, one out).

/// `max` that propagates NaN, like `torch.maximum`.
pub fn fmax_nan(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x >= y {
        x
    } else {
        y
    }
}

/// `min` that propagates NaN, like `torch.minimum`.
pub fn fmin_nan(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x <= y {
        x
    } else {
        y
    }
}

pub fn sigmoid_s(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_s(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// Python's / `torch.remainder`'s modulus: the result has the sign of the divisor.
pub fn remainder_s(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r + b
    } else {
        r
    }
}

/// `torch.sign`: -1, 0 or 1 (NaN stays NaN).
pub fn sign_s(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

pub fn truth(x: f64) -> bool {
    x != 0.0
}

pub fn b2f(b: bool) -> f64 {
    b as u8 as f64
}

pub fn add(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| x + y)
}
pub fn sub(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| x - y)
}
pub fn mul(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| x * y)
}
/// True division.
pub fn div(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| x / y)
}
pub fn pow(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, f64::powf)
}
pub fn atan2(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, f64::atan2)
}
pub fn maximum(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, fmax_nan)
}
pub fn minimum(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, fmin_nan)
}
pub fn remainder(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, remainder_s)
}

pub fn neg(a: &Arr) -> Arr {
    a.map(|x| -x)
}
pub fn abs(a: &Arr) -> Arr {
    a.map(f64::abs)
}
pub fn exp(a: &Arr) -> Arr {
    a.map(f64::exp)
}
pub fn log(a: &Arr) -> Arr {
    a.map(f64::ln)
}
pub fn sqrt(a: &Arr) -> Arr {
    a.map(f64::sqrt)
}
pub fn rsqrt(a: &Arr) -> Arr {
    a.map(|x| 1.0 / x.sqrt())
}
pub fn sin(a: &Arr) -> Arr {
    a.map(f64::sin)
}
pub fn cos(a: &Arr) -> Arr {
    a.map(f64::cos)
}
pub fn tanh(a: &Arr) -> Arr {
    a.map(f64::tanh)
}
pub fn sigmoid(a: &Arr) -> Arr {
    a.map(sigmoid_s)
}
/// `max(x, 0)`; NaN stays NaN (`torch.relu`).
pub fn relu(a: &Arr) -> Arr {
    a.map(|x| if x > 0.0 || x.is_nan() { x } else { 0.0 })
}
pub fn gelu(a: &Arr) -> Arr {
    a.map(gelu_s)
}
pub fn silu(a: &Arr) -> Arr {
    a.map(|x| x * sigmoid_s(x))
}
pub fn sign(a: &Arr) -> Arr {
    a.map(sign_s)
}
pub fn floor(a: &Arr) -> Arr {
    a.map(f64::floor)
}
/// Half to even, as `torch.round`.
pub fn round(a: &Arr) -> Arr {
    a.map(f64::round_ties_even)
}
/// `torch.clamp(x, lo, hi)` = `min(max(x, lo), hi)` (so `hi` wins when `lo > hi`).
pub fn clamp(a: &Arr, lo: f64, hi: f64) -> Arr {
    a.map(|x| fmin_nan(fmax_nan(x, lo), hi))
}
/// `torch.where(cond, a, b)` with three-way broadcasting.
pub fn where_(c: &Arr, a: &Arr, b: &Arr) -> Option<Arr> {
    ternary(c, a, b, |c, x, y| if truth(c) { x } else { y })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub const ALL: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge];
    pub fn eval(self, x: f64, y: f64) -> bool {
        match self {
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
        }
    }
}

pub fn compare(op: Cmp, a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| b2f(op.eval(x, y)))
}
pub fn logical_and(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| b2f(truth(x) && truth(y)))
}
pub fn logical_or(a: &Arr, b: &Arr) -> Option<Arr> {
    binary(a, b, |x, y| b2f(truth(x) || truth(y)))
}
pub fn logical_not(a: &Arr) -> Arr {
    a.map(|x| b2f(!truth(x)))
}
pub fn cast(a: &Arr, to: Ty) -> Arr {
    a.convert(to)
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

fn kept_dims(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    dims.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect()
}

fn dropped_dims(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
}

fn out_dims(dims: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    if keepdim {
        kept_dims(dims, axes)
    } else {
        dropped_dims(dims, axes)
    }
}

/// Folds `f` over the elements of each reduced group (axes already normalized).
pub fn reduce(
    a: &Arr,
    axes: &[usize],
    keepdim: bool,
    init: f64,
    f: impl Fn(f64, f64) -> f64,
) -> Arr {
    let kept = kept_dims(&a.dims, axes);
    let mut acc = Arr::full(&kept, init);
    for flat in 0..a.numel() {
        let mut idx = unravel(flat, &a.dims);
        for &ax in axes {
            idx[ax] = 0;
        }
        let o = acc.offset(&idx);
        acc.data[o] = f(acc.data[o], a.data[flat]);
    }
    Arr::new(&out_dims(&a.dims, axes, keepdim), acc.data)
}

/// The number of elements each group of a reduction over `axes` has.
pub fn group_size(dims: &[usize], axes: &[usize]) -> usize {
    axes.iter().map(|&a| dims[a]).product()
}

pub fn sum(a: &Arr, axes: &[i64], keepdim: bool) -> Option<Arr> {
    let ax = norm_axes(axes, a.rank())?;
    Some(reduce(a, &ax, keepdim, 0.0, |s, x| s + x))
}

pub fn mean(a: &Arr, axes: &[i64], keepdim: bool) -> Option<Arr> {
    let ax = norm_axes(axes, a.rank())?;
    let n = group_size(&a.dims, &ax) as f64;
    Some(sum(a, axes, keepdim)?.map(|s| s / n))
}

pub fn amax(a: &Arr, axes: &[i64], keepdim: bool) -> Option<Arr> {
    let ax = norm_axes(axes, a.rank())?;
    Some(reduce(a, &ax, keepdim, f64::NEG_INFINITY, fmax_nan))
}

pub fn amin(a: &Arr, axes: &[i64], keepdim: bool) -> Option<Arr> {
    let ax = norm_axes(axes, a.rank())?;
    Some(reduce(a, &ax, keepdim, f64::INFINITY, fmin_nan))
}

/// Index of the first maximum (`max`) or minimum along one axis. NaN counts as the extreme
/// either way, as in `torch.argmax` / `torch.argmin`.
pub fn arg_extreme(a: &Arr, axis: i64, keepdim: bool, max: bool) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())?;
    let n = a.dims[ax];
    if n == 0 {
        return None;
    }
    let kept = kept_dims(&a.dims, &[ax]);
    let out = Arr::from_fn(&kept, |idx| {
        let mut i = idx.to_vec();
        let mut best = 0;
        let mut best_v = a.at(&i);
        for k in 1..n {
            i[ax] = k;
            let v = a.at(&i);
            let better =
                !best_v.is_nan() && (v.is_nan() || if max { v > best_v } else { v < best_v });
            if better {
                best = k;
                best_v = v;
            }
        }
        best as f64
    });
    Some(Arr::new(&out_dims(&a.dims, &[ax], keepdim), out.data))
}

pub fn argmax(a: &Arr, axis: i64, keepdim: bool) -> Option<Arr> {
    arg_extreme(a, axis, keepdim, true)
}

pub fn argmin(a: &Arr, axis: i64, keepdim: bool) -> Option<Arr> {
    arg_extreme(a, axis, keepdim, false)
}

/// `torch.var(x, dims, correction)`: `sum((x - mean)^2) / max(0, N - correction)`.
pub fn var(a: &Arr, axes: &[i64], correction: i64, keepdim: bool) -> Option<Arr> {
    let ax = norm_axes(axes, a.rank())?;
    let n = group_size(&a.dims, &ax) as i64;
    let m = mean(a, axes, true)?;
    let sq = binary(a, &m, |x, m| (x - m) * (x - m))?;
    let denom = (n - correction).max(0) as f64;
    Some(reduce(&sq, &ax, keepdim, 0.0, |s, x| s + x).map(|s| s / denom))
}

/// `log(sum(exp(x)))` over `axes`.
pub fn logsumexp(a: &Arr, axes: &[i64], keepdim: bool) -> Option<Arr> {
    let ax = norm_axes(axes, a.rank())?;
    let m = amax(a, axes, true)?;
    let s = binary(a, &m, |x, m| if m.is_infinite() { 0.0 } else { (x - m).exp() })?;
    let s = reduce(&s, &ax, true, 0.0, |s, x| s + x);
    let r = binary(&s, &m, |s, m| if m.is_infinite() { m } else { s.ln() + m })?;
    Some(Arr::new(&out_dims(&a.dims, &ax, keepdim), r.data))
}

// ---------------------------------------------------------------------------------------------
// Shape ops
// ---------------------------------------------------------------------------------------------

/// `reshape`; one dim may be -1 (inferred).
pub fn reshape(a: &Arr, dims: &[i64]) -> Option<Arr> {
    let holes = dims.iter().filter(|&&d| d == -1).count();
    if holes > 1 || dims.iter().any(|&d| d < -1) {
        return None;
    }
    let known: i64 = dims.iter().filter(|&&d| d != -1).product();
    let n = a.numel() as i64;
    let out: Vec<usize> = if holes == 1 {
        if known == 0 || n % known != 0 {
            return None;
        }
        dims.iter().map(|&d| if d == -1 { (n / known) as usize } else { d as usize }).collect()
    } else {
        if known != n {
            return None;
        }
        dims.iter().map(|&d| d as usize).collect()
    };
    Some(Arr::new(&out, a.data.clone()))
}

/// Output dim `i` is input dim `perm[i]`.
pub fn permute(a: &Arr, perm: &[usize]) -> Option<Arr> {
    let mut seen = perm.to_vec();
    seen.sort_unstable();
    if seen != (0..a.rank()).collect::<Vec<_>>() {
        return None;
    }
    let dims: Vec<usize> = perm.iter().map(|&p| a.dims[p]).collect();
    Some(Arr::from_fn(&dims, |idx| {
        let mut src = vec![0; a.rank()];
        for (i, &p) in perm.iter().enumerate() {
            src[p] = idx[i];
        }
        a.at(&src)
    }))
}

pub fn transpose(a: &Arr, d0: i64, d1: i64) -> Option<Arr> {
    let (x, y) = (norm_axis(d0, a.rank())?, norm_axis(d1, a.rank())?);
    let mut perm: Vec<usize> = (0..a.rank()).collect();
    perm.swap(x, y);
    permute(a, &perm)
}

pub fn squeeze(a: &Arr, axis: i64) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())?;
    if a.dims[ax] != 1 {
        return None;
    }
    let mut dims = a.dims.clone();
    dims.remove(ax);
    Some(Arr::new(&dims, a.data.clone()))
}

pub fn unsqueeze(a: &Arr, axis: i64) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank() + 1)?;
    let mut dims = a.dims.clone();
    dims.insert(ax, 1);
    Some(Arr::new(&dims, a.data.clone()))
}

/// `x[start:end:step]` along `axis`, with Python's clamping of negative and out-of-range bounds.
pub fn slice(a: &Arr, axis: i64, start: i64, end: i64, step: i64) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())?;
    if step <= 0 {
        return None;
    }
    let n = a.dims[ax] as i64;
    let fix = |i: i64| if i < 0 { (i + n).max(0) } else { i.min(n) };
    let (s, e) = (fix(start), fix(end));
    let picked: Vec<usize> = (s..e.max(s)).step_by(step as usize).map(|i| i as usize).collect();
    let mut dims = a.dims.clone();
    dims[ax] = picked.len();
    Some(Arr::from_fn(&dims, |idx| {
        let mut src = idx.to_vec();
        src[ax] = picked[idx[ax]];
        a.at(&src)
    }))
}

pub fn concat(parts: &[&Arr], axis: i64) -> Option<Arr> {
    let first = parts.first()?;
    let ax = norm_axis(axis, first.rank())?;
    for p in parts {
        if p.rank() != first.rank()
            || (0..first.rank()).any(|i| i != ax && p.dims[i] != first.dims[i])
        {
            return None;
        }
    }
    let mut dims = first.dims.clone();
    dims[ax] = parts.iter().map(|p| p.dims[ax]).sum();
    Some(Arr::from_fn(&dims, |idx| {
        let mut k = idx[ax];
        for p in parts {
            if k < p.dims[ax] {
                let mut src = idx.to_vec();
                src[ax] = k;
                return p.at(&src);
            }
            k -= p.dims[ax];
        }
        unreachable!()
    }))
}

pub fn stack(parts: &[&Arr], axis: i64) -> Option<Arr> {
    let first = parts.first()?;
    if parts.iter().any(|p| p.dims != first.dims) {
        return None;
    }
    let ex: Vec<Arr> = parts.iter().map(|p| unsqueeze(p, axis)).collect::<Option<_>>()?;
    let refs: Vec<&Arr> = ex.iter().collect();
    concat(&refs, axis)
}

/// Constant padding: `pads[i] = (before, after)` for dim `i`.
pub fn pad(a: &Arr, pads: &[(usize, usize)], value: f64) -> Option<Arr> {
    if pads.len() != a.rank() {
        return None;
    }
    let dims: Vec<usize> = (0..a.rank()).map(|i| pads[i].0 + a.dims[i] + pads[i].1).collect();
    Some(Arr::from_fn(&dims, |idx| {
        let mut src = Vec::with_capacity(idx.len());
        for (i, &x) in idx.iter().enumerate() {
            if x < pads[i].0 || x >= pads[i].0 + a.dims[i] {
                return value;
            }
            src.push(x - pads[i].0);
        }
        a.at(&src)
    }))
}

/// Reverses the order along `axes` (each at most once, as `torch.flip` requires).
pub fn flip(a: &Arr, axes: &[i64]) -> Option<Arr> {
    let ax: Vec<usize> = axes.iter().map(|&x| norm_axis(x, a.rank())).collect::<Option<_>>()?;
    if (1..ax.len()).any(|i| ax[..i].contains(&ax[i])) {
        return None;
    }
    Some(Arr::from_fn(&a.dims, |idx| {
        let mut src = idx.to_vec();
        for &x in &ax {
            src[x] = a.dims[x] - 1 - idx[x];
        }
        a.at(&src)
    }))
}

/// `torch.index_select(a, axis, indices)`.
pub fn index_select(a: &Arr, axis: i64, indices: &[usize]) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())?;
    if indices.iter().any(|&i| i >= a.dims[ax]) {
        return None;
    }
    let mut dims = a.dims.clone();
    dims[ax] = indices.len();
    Some(Arr::from_fn(&dims, |idx| {
        let mut src = idx.to_vec();
        src[ax] = indices[idx[ax]];
        a.at(&src)
    }))
}

/// `a.index_add(axis, indices, source)`: slice `k` of `source` is added at `indices[k]`
/// (duplicates accumulate).
pub fn index_add(a: &Arr, axis: i64, indices: &[usize], source: &Arr) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())?;
    let mut want = a.dims.clone();
    want[ax] = indices.len();
    if source.dims != want || indices.iter().any(|&i| i >= a.dims[ax]) {
        return None;
    }
    let mut out = a.clone();
    for flat in 0..source.numel() {
        let mut idx = unravel(flat, &source.dims);
        idx[ax] = indices[idx[ax]];
        let o = out.offset(&idx);
        out.data[o] += source.data[flat];
    }
    Some(out)
}

/// `one_hot(labels, classes)`: `[..] -> [.., classes]`, 1 where the class is the label.
pub fn one_hot(labels: &Arr, classes: usize) -> Arr {
    let mut dims = labels.dims.clone();
    dims.push(classes);
    Arr::from_fn(&dims, |idx| {
        let (c, rest) = idx.split_last().expect("rank >= 1");
        b2f(labels.at(rest) == *c as f64)
    })
}

// ---------------------------------------------------------------------------------------------
// Linear algebra
// ---------------------------------------------------------------------------------------------

/// `np.matmul`: 1-D operands are vectors (a 1 is prepended to the left one, appended to the
/// right one, and removed from the result); leading dims broadcast as batch dims.
pub fn matmul(a: &Arr, b: &Arr) -> Option<Arr> {
    if a.rank() == 0 || b.rank() == 0 {
        return None;
    }
    let a2 = if a.rank() == 1 { Arr::new(&[1, a.dims[0]], a.data.clone()) } else { a.clone() };
    let b2 = if b.rank() == 1 { Arr::new(&[b.dims[0], 1], b.data.clone()) } else { b.clone() };
    let (ra, rb) = (a2.rank(), b2.rank());
    let (m, k) = (a2.dims[ra - 2], a2.dims[ra - 1]);
    let (k2, n) = (b2.dims[rb - 2], b2.dims[rb - 1]);
    if k != k2 {
        return None;
    }
    let batch = broadcast_shapes(&a2.dims[..ra - 2], &b2.dims[..rb - 2])?;
    let mut da = batch.clone();
    da.extend([m, k]);
    let mut db = batch.clone();
    db.extend([k, n]);
    let (a3, b3) = (broadcast_to(&a2, &da)?, broadcast_to(&b2, &db)?);
    let mut full = batch.clone();
    full.extend([m, n]);
    let nb = batch.len();
    let out = Arr::from_fn(&full, |idx| {
        let mut ia = idx[..nb].to_vec();
        ia.extend([idx[nb], 0]);
        let mut ib = idx[..nb].to_vec();
        ib.extend([0, idx[nb + 1]]);
        let mut s = 0.0;
        for kk in 0..k {
            ia[nb + 1] = kk;
            ib[nb] = kk;
            s += a3.at(&ia) * b3.at(&ib);
        }
        s
    });
    let mut dims = batch;
    if a.rank() > 1 {
        dims.push(m);
    }
    if b.rank() > 1 {
        dims.push(n);
    }
    Some(Arr::new(&dims, out.data))
}

/// XLA's `dot_general`: output dims are the batch dims, then the left operand's free dims, then
/// the right operand's free dims (each in their original order).
pub fn dot_general(
    a: &Arr,
    b: &Arr,
    lhs_batch: &[usize],
    rhs_batch: &[usize],
    lhs_contract: &[usize],
    rhs_contract: &[usize],
) -> Option<Arr> {
    if lhs_batch.len() != rhs_batch.len() || lhs_contract.len() != rhs_contract.len() {
        return None;
    }
    let pairs = |l: &[usize], r: &[usize]| {
        l.iter().zip(r).all(|(&x, &y)| x < a.rank() && y < b.rank() && a.dims[x] == b.dims[y])
    };
    if !pairs(lhs_batch, rhs_batch) || !pairs(lhs_contract, rhs_contract) {
        return None;
    }
    let free = |r: usize, batch: &[usize], con: &[usize]| -> Vec<usize> {
        (0..r).filter(|d| !batch.contains(d) && !con.contains(d)).collect()
    };
    let fa = free(a.rank(), lhs_batch, lhs_contract);
    let fb = free(b.rank(), rhs_batch, rhs_contract);
    let mut dims: Vec<usize> = lhs_batch.iter().map(|&d| a.dims[d]).collect();
    dims.extend(fa.iter().map(|&d| a.dims[d]));
    dims.extend(fb.iter().map(|&d| b.dims[d]));
    let cdims: Vec<usize> = lhs_contract.iter().map(|&d| a.dims[d]).collect();
    let (nb, nfa) = (lhs_batch.len(), fa.len());
    Some(Arr::from_fn(&dims, |idx| {
        let mut ia = vec![0; a.rank()];
        let mut ib = vec![0; b.rank()];
        for i in 0..nb {
            ia[lhs_batch[i]] = idx[i];
            ib[rhs_batch[i]] = idx[i];
        }
        for (j, &d) in fa.iter().enumerate() {
            ia[d] = idx[nb + j];
        }
        for (j, &d) in fb.iter().enumerate() {
            ib[d] = idx[nb + nfa + j];
        }
        let mut s = 0.0;
        for flat in 0..numel(&cdims) {
            let c = unravel(flat, &cdims);
            for (i, &ci) in c.iter().enumerate() {
                ia[lhs_contract[i]] = ci;
                ib[rhs_contract[i]] = ci;
            }
            s += a.at(&ia) * b.at(&ib);
        }
        s
    }))
}

// ---------------------------------------------------------------------------------------------
// Neural-network ops
// ---------------------------------------------------------------------------------------------

/// `exp(x) / sum(exp(x))` along `axis`.
pub fn softmax(a: &Arr, axis: i64) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())? as i64;
    let m = amax(a, &[ax], true)?;
    let e = binary(a, &m, |x, m| (x - m).exp())?;
    let s = sum(&e, &[ax], true)?;
    div(&e, &s)
}

/// `x - logsumexp(x)` along `axis`.
pub fn log_softmax(a: &Arr, axis: i64) -> Option<Arr> {
    let ax = norm_axis(axis, a.rank())? as i64;
    sub(a, &logsumexp(a, &[ax], true)?)
}

/// Mean over the batch of `-log_softmax(logits)[label]`, for `[N, C]` logits and `N` labels.
pub fn cross_entropy(logits: &Arr, labels: &[usize]) -> Option<Arr> {
    if logits.rank() != 2 || labels.len() != logits.dims[0] {
        return None;
    }
    let lp = log_softmax(logits, 1)?;
    let n = labels.len();
    let total: f64 = (0..n).map(|i| lp.at(&[i, labels[i]])).sum();
    Some(Arr::scalar(-total / n as f64))
}

/// Layer normalization over the last `k` dims (biased variance), then `* weight + bias`.
pub fn layer_norm(
    a: &Arr,
    k: usize,
    weight: Option<&Arr>,
    bias: Option<&Arr>,
    eps: f64,
) -> Option<Arr> {
    if k > a.rank() {
        return None;
    }
    let axes: Vec<i64> = (a.rank() - k..a.rank()).map(|x| x as i64).collect();
    let m = mean(a, &axes, true)?;
    let v = var(a, &axes, 0, true)?;
    let centered = sub(a, &m)?;
    let mut y = binary(&centered, &v, |c, v| c / (v + eps).sqrt())?;
    if let Some(w) = weight {
        y = mul(&y, w)?;
    }
    if let Some(b) = bias {
        y = add(&y, b)?;
    }
    Some(y)
}

/// Rows of a `[V, D]` table at integer indices of any shape: `[.., D]`.
pub fn embedding(table: &Arr, indices: &Arr) -> Option<Arr> {
    if table.rank() != 2 {
        return None;
    }
    let d = table.dims[1];
    let mut dims = indices.dims.clone();
    dims.push(d);
    if indices.data.iter().any(|&i| i < 0.0 || i as usize >= table.dims[0]) {
        return None;
    }
    Some(Arr::from_fn(&dims, |idx| {
        let (j, rest) = idx.split_last().expect("rank >= 1");
        table.at(&[indices.at(rest) as usize, *j])
    }))
}

/// The output size of a window of `k` with `stride`, `padding` (each side) and `dilation`.
pub fn window_out(
    size: usize,
    k: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    let eff = dilation * (k - 1) + 1;
    let padded = size + 2 * padding;
    (padded >= eff && k > 0 && stride > 0).then(|| (padded - eff) / stride + 1)
}

/// `torch.nn.functional.conv2d` (cross-correlation): input `[N, C, H, W]`, weight
/// `[O, C / groups, KH, KW]`, zero padding.
pub fn conv2d(
    x: &Arr,
    w: &Arr,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Option<Arr> {
    if x.rank() != 4 || w.rank() != 4 || groups == 0 {
        return None;
    }
    let (n, c, h, wd) = (x.dims[0], x.dims[1], x.dims[2], x.dims[3]);
    let (o, cg, kh, kw) = (w.dims[0], w.dims[1], w.dims[2], w.dims[3]);
    if c != cg * groups || o % groups != 0 {
        return None;
    }
    let oh = window_out(h, kh, stride[0], padding[0], dilation[0])?;
    let ow = window_out(wd, kw, stride[1], padding[1], dilation[1])?;
    let og = o / groups;
    Some(Arr::from_fn(&[n, o, oh, ow], |idx| {
        let (b, oc, i, j) = (idx[0], idx[1], idx[2], idx[3]);
        let g = oc / og;
        let mut s = 0.0;
        for ci in 0..cg {
            for p in 0..kh {
                for q in 0..kw {
                    let y = (i * stride[0] + p * dilation[0]) as i64 - padding[0] as i64;
                    let z = (j * stride[1] + q * dilation[1]) as i64 - padding[1] as i64;
                    if y < 0 || z < 0 || y >= h as i64 || z >= wd as i64 {
                        continue;
                    }
                    s += x.at(&[b, g * cg + ci, y as usize, z as usize]) * w.at(&[oc, ci, p, q]);
                }
            }
        }
        s
    }))
}

fn pool2d(
    x: &Arr,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    max: bool,
) -> Option<Arr> {
    if x.rank() != 4 {
        return None;
    }
    let (n, c, h, w) = (x.dims[0], x.dims[1], x.dims[2], x.dims[3]);
    let oh = window_out(h, kernel[0], stride[0], padding[0], 1)?;
    let ow = window_out(w, kernel[1], stride[1], padding[1], 1)?;
    Some(Arr::from_fn(&[n, c, oh, ow], |idx| {
        let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
        for p in 0..kernel[0] {
            for q in 0..kernel[1] {
                let y = (idx[2] * stride[0] + p) as i64 - padding[0] as i64;
                let z = (idx[3] * stride[1] + q) as i64 - padding[1] as i64;
                if y < 0 || z < 0 || y >= h as i64 || z >= w as i64 {
                    continue; // padding: -inf for max, 0 for the sum
                }
                let v = x.at(&[idx[0], idx[1], y as usize, z as usize]);
                acc = if max { fmax_nan(acc, v) } else { acc + v };
            }
        }
        if max {
            acc
        } else {
            acc / (kernel[0] * kernel[1]) as f64
        }
    }))
}

/// `torch.nn.functional.max_pool2d` (padding never wins).
pub fn max_pool2d(
    x: &Arr,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Option<Arr> {
    pool2d(x, kernel, stride, padding, true)
}

/// `torch.nn.functional.avg_pool2d` with `count_include_pad=True` (padding counts as zeros,
/// the divisor is always `kh * kw`).
pub fn avg_pool2d(
    x: &Arr,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Option<Arr> {
    pool2d(x, kernel, stride, padding, false)
}

// ---------------------------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------------------------

/// `torch.arange(start, end, step)`: `ceil((end - start) / step)` values `start + i * step`.
pub fn arange(start: f64, end: f64, step: f64) -> Option<Arr> {
    if step == 0.0 {
        return None;
    }
    let n = ((end - start) / step).ceil().max(0.0) as usize;
    Some(Arr::new(&[n], (0..n).map(|i| start + i as f64 * step).collect()))
}

pub fn eye(n: usize) -> Arr {
    Arr::from_fn(&[n, n], |idx| b2f(idx[0] == idx[1]))
}

// ---------------------------------------------------------------------------------------------
// Self-checks of the reference itself (on hand-computed values)
// ---------------------------------------------------------------------------------------------

pub fn self_check() {
    let a = Arr::new(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(transpose(&a, 0, 1).unwrap().data, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(sum(&a, &[1], false).unwrap().data, vec![6.0, 15.0]);
    assert_eq!(sum(&a, &[-2], true).unwrap().dims, vec![1, 3]);
    let b = Arr::new(&[3], vec![10.0, 20.0, 30.0]);
    assert_eq!(add(&a, &b).unwrap().data, vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    let mm = matmul(&a, &Arr::new(&[3, 1], vec![1.0, 0.0, -1.0])).unwrap();
    assert_eq!((mm.dims.clone(), mm.data.clone()), (vec![2, 1], vec![-2.0, -2.0]));
    let v = matmul(&b, &b).unwrap();
    assert_eq!((v.dims.clone(), v.data.clone()), (vec![], vec![1400.0]));
    assert_eq!(slice(&b, 0, -2, 100, 1).unwrap().data, vec![20.0, 30.0]);
    assert_eq!(slice(&b, 0, 0, 3, 2).unwrap().data, vec![10.0, 30.0]);
    assert_eq!(
        argmax(&Arr::new(&[4], vec![1.0, 3.0, 3.0, 0.0]), 0, false).unwrap().data,
        vec![1.0]
    );
    assert_eq!(remainder_s(-7.0, 3.0), 2.0);
    assert_eq!(remainder_s(7.0, -3.0), -2.0);
    assert_eq!(Ty::S32.convert(-2.7), -2.0);
    assert_eq!(Ty::U8.convert(300.0), 44.0);
    assert!(var(&Arr::scalar(1.0), &[], 1, false).unwrap().data[0].is_nan());
    assert_eq!(var(&b, &[], 1, false).unwrap().data, vec![100.0]);
    let x = Arr::new(&[1, 1, 3, 3], (1..=9).map(|v| v as f64).collect());
    let k = Arr::new(&[1, 1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]);
    assert_eq!(conv2d(&x, &k, [1, 1], [0, 0], [1, 1], 1).unwrap().data, vec![6.0, 8.0, 12.0, 14.0]);
    assert_eq!(max_pool2d(&x, [2, 2], [2, 2], [1, 1]).unwrap().data, vec![1.0, 3.0, 7.0, 9.0]);
    assert_eq!(avg_pool2d(&x, [2, 2], [1, 1], [0, 0]).unwrap().data, vec![3.0, 4.0, 6.0, 7.0]);
    assert_eq!(pad(&b, &[(1, 2)], 0.5).unwrap().data, vec![0.5, 10.0, 20.0, 30.0, 0.5, 0.5]);
    let ia = index_add(&b, 0, &[2, 2, 0], &Arr::new(&[3], vec![1.0, 1.0, 5.0])).unwrap();
    assert_eq!(ia.data, vec![15.0, 20.0, 32.0]);
    assert_eq!(Ty::promote(Ty::U8, Ty::S32), Ty::S32);
    assert_eq!(Ty::promote(Ty::BF16, Ty::F16), Ty::F32);
    assert_eq!(Ty::promote(Ty::S64, Ty::F16), Ty::F16);
}
