//! Elementwise ops with NumPy broadcasting and PyTorch type promotion.

use crate::autograd::{grad_enabled, grad_fn};
use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{BinaryOp, CompareOp, Op, Recursion, UnaryOp};
use crate::location::{scoped, SourceLocation};
use crate::shape::{broadcast_dims, promote};
use crate::tensor::Tensor;

use super::{not_differentiable, shape_error};

/// Broadcasts two operands to a common shape and dtype (the first step of every binary op).
pub(crate) fn align(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    location: &SourceLocation,
) -> Result<(Tensor, Tensor)> {
    let dims = broadcast_dims(a.dims(), b.dims()).ok_or_else(|| {
        shape_error(
            op,
            location,
            format!("shapes {} and {} cannot be broadcast together", a.shape(), b.shape()),
        )
    })?;
    let dtype = promote(a.dtype(), b.dtype());
    let a = a.cast_at(dtype, location)?.broadcast_at(&dims, location)?;
    let b = b.cast_at(dtype, location)?.broadcast_at(&dims, location)?;
    Ok((a, b))
}

fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, location: SourceLocation) -> Result<Tensor> {
    let name = Op::Binary(op).name();
    let (a, b) = align(name, a, b, &location)?;
    let complex_ok =
        matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow);
    if a.dtype().is_complex() && !complex_ok {
        return Err(shape_error(
            name,
            &location,
            format!("is not defined for complex numbers ({} and {})", a.shape(), b.shape()),
        ));
    }
    if op == BinaryOp::Complex {
        // The parts are floats (integers count as f32); the result is complex.
        let parts = if a.dtype().is_float() { a.dtype() } else { DType::F32 };
        let (re, im) = (a.cast_at(parts, &location)?, b.cast_at(parts, &location)?);
        let shape = re.shape().with_dtype(parts.complex());
        let grad = grad_fn(name, &[&re, &im], move |g| Ok(vec![Some(g.real()?), Some(g.imag()?)]));
        return Ok(Tensor::op(Op::Binary(op), shape, &[&re, &im], location, grad));
    }
    // True division, like PyTorch: integers divide as floats (as do atan2 and zeta).
    let exact = a.dtype().is_float() || a.dtype().is_complex();
    let (a, b) = if matches!(op, BinaryOp::Div | BinaryOp::Atan2 | BinaryOp::Zeta) && !exact {
        (a.cast_at(DType::F32, &location)?, b.cast_at(DType::F32, &location)?)
    } else {
        (a, b)
    };
    // Logical ops on numbers: nonzero is true (PyTorch's logical_and / logical_or).
    let (a, b) = if matches!(op, BinaryOp::And | BinaryOp::Or) && a.dtype() != DType::Pred {
        scoped(&location, || -> Result<(Tensor, Tensor)> {
            let zero = Tensor::scalar(0.0, a.dtype());
            Ok((a.ne(&zero)?, b.ne(&zero)?))
        })?
    } else {
        (a, b)
    };
    let shape = a.shape().clone();
    let (ac, bc) = (a.clone(), b.clone());
    let grad = grad_fn(name, &[&a, &b], move |g| {
        let (a, b) = (&ac, &bc);
        Ok(match op {
            BinaryOp::Add => vec![Some(g.clone()), Some(g.clone())],
            BinaryOp::Sub => vec![Some(g.clone()), Some(g.neg()?)],
            BinaryOp::Mul => vec![Some(g.mul(b)?), Some(g.mul(a)?)],
            BinaryOp::Div => vec![Some(g.div(b)?), Some(g.mul(a)?.div(&b.mul(b)?)?.neg()?)],
            BinaryOp::Pow => {
                let da = g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                let db = g.mul(&a.pow(b)?)?.mul(&a.log()?)?;
                vec![Some(da), Some(db)]
            }
            BinaryOp::Max | BinaryOp::Min => {
                // The gradient goes to the winner; ties split it evenly, like PyTorch.
                let (win_a, tie) = match op {
                    BinaryOp::Max => (a.gt(b)?, a.eq(b)?),
                    _ => (a.lt(b)?, a.eq(b)?),
                };
                let half = tie.cast(g.dtype())?.mul_scalar(0.5)?;
                let wa = win_a.cast(g.dtype())?.add(&half)?;
                let wb = wa.neg()?.add_scalar(1.0)?;
                vec![Some(g.mul(&wa)?), Some(g.mul(&wb)?)]
            }
            // fmod: a - trunc(a / b) * b, so d/db = -trunc(a / b).
            BinaryOp::Rem => {
                let q = a.div(b)?;
                let trunc = q.abs()?.floor()?.mul(&q.sign()?)?;
                vec![Some(g.clone()), Some(g.mul(&trunc)?.neg()?)]
            }
            BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::NextAfter
            | BinaryOp::Complex => {
                vec![None, None]
            }
            // d/dq zeta(x, q) = -x zeta(x + 1, q); x is not differentiable (as in PyTorch).
            BinaryOp::Zeta => {
                let next =
                    binary(BinaryOp::Zeta, &a.add_scalar(1.0)?, b, SourceLocation::caller())?;
                vec![None, Some(g.mul(&next)?.mul(a)?.neg()?)]
            }
            // d/dx polygamma(n, x) = polygamma(n + 1, x); the order is not differentiable.
            BinaryOp::Polygamma => {
                let next =
                    binary(BinaryOp::Polygamma, &a.add_scalar(1.0)?, b, SourceLocation::caller())?;
                vec![None, Some(g.mul(&next)?)]
            }
            // d atan2(a, b) = (b da - a db) / (a^2 + b^2)
            BinaryOp::Atan2 => {
                let r = a.mul(a)?.add(&b.mul(b)?)?;
                vec![Some(g.mul(b)?.div(&r)?), Some(g.mul(a)?.div(&r)?.neg()?)]
            }
        })
    });
    Ok(Tensor::op(Op::Binary(op), shape, &[&a, &b], location, grad))
}

/// The dtype of a host scalar combined with `t`: the tensor's own, unless a fractional value
/// meets an integer tensor, which then computes in f32 (PyTorch's Python-float promotion).
pub(crate) fn scalar_dtype(t: &Tensor, value: f64) -> DType {
    if !t.dtype().is_float() && !t.dtype().is_complex() && value.fract() != 0.0 {
        DType::F32
    } else {
        t.dtype()
    }
}

fn unary(op: UnaryOp, x: &Tensor, location: SourceLocation) -> Result<Tensor> {
    let name = Op::Unary(op).name();
    let needs_float = !matches!(
        op,
        UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Not
            | UnaryOp::Sign
            | UnaryOp::Floor
            | UnaryOp::Round
    );
    if x.dtype().is_complex() {
        return complex_unary(op, x, name, location);
    }
    if matches!(op, UnaryOp::Real | UnaryOp::Imag) {
        // A real number is its own real part; its imaginary part is zero.
        return scoped(&location, || match op {
            UnaryOp::Real => Ok(x.clone()),
            _ => Ok(x.zeros_like()),
        });
    }
    if needs_float && !x.dtype().is_float() {
        // exp, log, sin, ... of integers compute in f32, like PyTorch.
        let x = x.cast_at(DType::F32, &location)?;
        return unary(op, &x, location);
    }
    // Integers are already whole.
    if !x.dtype().is_float() && matches!(op, UnaryOp::Floor | UnaryOp::Round) {
        return Ok(x.clone());
    }
    // Logical not of numbers: true where zero (PyTorch's logical_not).
    if op == UnaryOp::Not && x.dtype() != DType::Pred {
        return scoped(&location, || x.eq(&Tensor::scalar(0.0, x.dtype())));
    }
    // Unsigned values are their own magnitude; their sign is 0 or 1.
    if x.dtype() == DType::U8 && op == UnaryOp::Abs {
        return Ok(x.clone());
    }
    if x.dtype() == DType::U8 && op == UnaryOp::Sign {
        return scoped(&location, || x.ne(&Tensor::scalar(0.0, DType::U8))?.cast(DType::U8));
    }
    let xc = x.clone();
    let grad = grad_fn(name, &[x], move |g| {
        let x = &xc;
        let dx = match op {
            UnaryOp::Neg => g.neg()?,
            UnaryOp::Abs => g.mul(&x.sign()?)?,
            UnaryOp::Exp => g.mul(&x.exp()?)?,
            UnaryOp::Log => g.div(x)?,
            UnaryOp::Sqrt => g.div(&x.sqrt()?.mul_scalar(2.0)?)?,
            UnaryOp::Rsqrt => g.mul(&x.rsqrt()?.pow_scalar(3.0)?.mul_scalar(-0.5)?)?,
            UnaryOp::Sin => g.mul(&x.cos()?)?,
            UnaryOp::Cos => g.mul(&x.sin()?.neg()?)?,
            UnaryOp::Tanh => {
                let t = x.tanh()?;
                g.mul(&t.mul(&t)?.neg()?.add_scalar(1.0)?)?
            }
            UnaryOp::Logistic => {
                let s = x.sigmoid()?;
                g.mul(&s.mul(&s.neg()?.add_scalar(1.0)?)?)?
            }
            UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Round => g.zeros_like(),
            UnaryOp::Lgamma => g.mul(&x.digamma()?)?,
            UnaryOp::Digamma => g.mul(&x.polygamma(1)?)?,
            // d erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x)^2)
            UnaryOp::ErfInv => {
                let y = x.erfinv()?;
                g.mul(&y.mul(&y)?.exp()?.mul_scalar(std::f64::consts::PI.sqrt() / 2.0)?)?
            }
            // d erf(x) = 2 / sqrt(pi) exp(-x^2), erfc the opposite.
            UnaryOp::Erf | UnaryOp::Erfc => {
                let sign = if op == UnaryOp::Erf { 1.0 } else { -1.0 };
                let e = x.mul(x)?.neg()?.exp()?;
                g.mul(&e.mul_scalar(sign * 2.0 / std::f64::consts::PI.sqrt())?)?
            }
            UnaryOp::Log1p => g.div(&x.add_scalar(1.0)?)?,
            UnaryOp::Expm1 => g.mul(&x.exp()?)?,
            UnaryOp::Not | UnaryOp::Real | UnaryOp::Imag => return Ok(vec![None]),
        };
        Ok(vec![Some(dx)])
    });
    Ok(Tensor::op(Op::Unary(op), x.shape().clone(), &[x], location, grad))
}

/// A unary op of complex numbers: those StableHLO defines for them; `abs`, `real` and `imag`
/// have real results. The engine's autograd differentiates real and imag only (torch computes
/// its own complex gradients).
fn complex_unary(
    op: UnaryOp,
    x: &Tensor,
    name: &'static str,
    location: SourceLocation,
) -> Result<Tensor> {
    use UnaryOp::*;
    let dtype = match op {
        Abs | Real | Imag => x.dtype().real(),
        Neg | Exp | Log | Sqrt | Rsqrt | Sin | Cos | Tanh | Logistic | Sign | Log1p | Expm1 => {
            x.dtype()
        }
        _ => {
            return Err(shape_error(
                name,
                &location,
                format!("is not defined for complex numbers ({})", x.shape()),
            ))
        }
    };
    let grad = match op {
        Real | Imag => grad_fn(name, &[x], move |g| {
            let zero = g.zeros_like();
            let (re, im) = if op == Real { (g, &zero) } else { (&zero, g) };
            Ok(vec![Some(re.complex(im)?)])
        }),
        _ => None,
    };
    Ok(Tensor::op(Op::Unary(op), x.shape().with_dtype(dtype), &[x], location, grad))
}

fn compare(op: CompareOp, a: &Tensor, b: &Tensor, location: SourceLocation) -> Result<Tensor> {
    let (a, b) = align("compare", a, b, &location)?;
    if a.dtype().is_complex() && !matches!(op, CompareOp::Eq | CompareOp::Ne) {
        return Err(shape_error(
            "compare",
            &location,
            format!("complex numbers are not ordered ({} and {})", a.shape(), b.shape()),
        ));
    }
    let shape = a.shape().with_dtype(DType::Pred);
    Ok(Tensor::op(Op::Compare(op), shape, &[&a, &b], location, None))
}

/// `op(x, value)` for a host scalar `value`.
fn binary_scalar(op: BinaryOp, x: &Tensor, value: f64, location: SourceLocation) -> Result<Tensor> {
    if op == BinaryOp::Pow && x.dtype().is_float() {
        if let Some(power) = scoped(&location, || special_power(x, value)).transpose()? {
            return Ok(power);
        }
    }
    if let Some(half) = x.half_dtype() {
        if matches!(op, BinaryOp::Mul | BinaryOp::Div) {
            // torch multiplies and divides a half-precision tensor by a host scalar in float32
            // with the scalar unrounded (its opmath type) and rounds once; with the scalar
            // rounded to bf16 first, `x * 1.1284` differed from torch's in 56 % of the elements.
            // (An added scalar torch rounds to the tensor's dtype, on the CPU and on CUDA.)
            // Whatever the value: a graph that changed with it would recompile when a learning
            // rate reached one the dtype holds.
            let wide = scoped(&location, || x.cast(DType::F32))?;
            let wide = binary_scalar(op, &wide, value, location.clone())?;
            return scoped(&location, || wide.cast(half));
        }
    }
    let dtype = scalar_dtype(x, value);
    if dtype != x.dtype() || x.rank() == 0 {
        let s = scoped(&location, || Tensor::scalar(value, dtype));
        return binary(op, x, &s, location);
    }
    // The common case: the scalar is already the tensor's dtype and only needs broadcasting,
    // which `align` would do one op at a time.
    if dtype.is_float() && op != BinaryOp::Complex && !(x.requires_grad() && grad_enabled()) {
        // Nothing for `binary` to cast or differentiate either: one record.
        return Ok(x.scalar_op(Op::Binary(op), value, location));
    }
    let s = Tensor::scalar_operand(value, x.shape().clone(), location.clone());
    binary(op, x, &s, location)
}

/// `x ** exponent` without `pow` for the exponents PyTorch's own CPU kernel special-cases:
/// `x*x`, `x*x*x`, `sqrt`, `rsqrt`, `1/x`, `1/(x*x)`, and a copy for 1 (the backward of
/// `x ** 2`). A host scalar is a graph input, so XLA cannot see that GELU's `x ** 3` is a cube
/// and calls the C library's `powf` for every element (over a quarter of a small GPT-2 step's
/// execution). These exponents are part of the graph's structure instead, like the op itself;
/// any other exponent stays an input.
fn special_power(x: &Tensor, exponent: f64) -> Option<Result<Tensor>> {
    let reciprocal = |t: Result<Tensor>| t.and_then(|t| Tensor::scalar(1.0, t.dtype()).div(&t));
    Some(match exponent {
        1.0 => x.mul_scalar(1.0),
        2.0 => x.mul(x),
        3.0 => x.mul(x).and_then(|square| square.mul(x)),
        0.5 => x.sqrt(),
        -0.5 => x.rsqrt(),
        -1.0 => reciprocal(Ok(x.clone())),
        -2.0 => reciprocal(x.mul(x)),
        _ => return None,
    })
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident, $scalar:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    binary(BinaryOp::$op, self, other, SourceLocation::caller())
                }
                /// The same op with a host scalar (passed as a graph input: no recompiles).
                #[track_caller]
                pub fn $scalar(&self, value: f64) -> Result<Tensor> {
                    binary_scalar(BinaryOp::$op, self, value, SourceLocation::caller())
                }
            )*
        }
    };
}

binary_methods! {
    add, add_scalar => Add;
    sub, sub_scalar => Sub;
    mul, mul_scalar => Mul;
    div, div_scalar => Div;
    pow, pow_scalar => Pow;
    maximum, maximum_scalar => Max;
    minimum, minimum_scalar => Min;
    fmod, fmod_scalar => Rem;
    atan2, atan2_scalar => Atan2;
    zeta, zeta_scalar => Zeta;
    nextafter, nextafter_scalar => NextAfter;
    complex, complex_scalar => Complex;
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[track_caller]
                pub fn $name(&self) -> Result<Tensor> {
                    unary(UnaryOp::$op, self, SourceLocation::caller())
                }
            )*
        }
    };
}

unary_methods! {
    neg => Neg, abs => Abs, exp => Exp, log => Log, sqrt => Sqrt, rsqrt => Rsqrt, sin => Sin,
    cos => Cos, tanh => Tanh, sigmoid => Logistic, logical_not => Not, sign => Sign, floor => Floor,
    round => Round, lgamma => Lgamma, digamma => Digamma, erfinv => ErfInv, erf => Erf,
    erfc => Erfc, log1p => Log1p, expm1 => Expm1, real => Real, imag => Imag,
}

impl Tensor {
    /// `polygamma(n, x)`: the n-th derivative of the digamma function at each value (n >= 0).
    ///
    /// XLA's polygamma is a Hurwitz zeta, right for x > 0 only; below, the recurrence
    /// `ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x + k) - (-1)ⁿ n! Σ_{j<k} (x + j)^-(n+1)` moves x up by k = 16 first (PyTorch's
    /// values for x > -16; digamma itself, n = 0, is XLA's own, right everywhere).
    #[track_caller]
    pub fn polygamma(&self, n: u32) -> Result<Tensor> {
        const SHIFT: u32 = 16;
        let location = SourceLocation::caller();
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.cast_at(DType::F32, &location)?
        };
        if n == 0 {
            return unary(UnaryOp::Digamma, &x, location);
        }
        scoped(&location, || {
            let order = Tensor::scalar(n as f64, x.dtype());
            let negative = x.lt(&Tensor::scalar(0.0, x.dtype()))?;
            let shifted = Tensor::where_(&negative, &x.add_scalar(SHIFT as f64)?, &x)?;
            let base = binary(BinaryOp::Polygamma, &order, &shifted, location.clone())?;
            let power = -(n as f64 + 1.0);
            let mut sum = x.pow_scalar(power)?;
            for j in 1..SHIFT {
                sum = sum.add(&x.add_scalar(j as f64)?.pow_scalar(power)?)?;
            }
            let factorial: f64 = (1..=n).map(f64::from).product();
            let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
            let below = base.sub(&sum.mul_scalar(sign * factorial)?)?;
            Tensor::where_(&negative, &below, &base)
        })
    }
}

macro_rules! compare_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    compare(CompareOp::$op, self, other, SourceLocation::caller())
                }
            )*
        }
    };
}

compare_methods! { eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge }

/// `and`, `or` or `xor` of each bit of integers, or of bools (PyTorch's `&`, `|`, `^`): the
/// operands promoted to one dtype and broadcast. Not differentiable.
fn bitwise(
    op: BinaryOp,
    name: &'static str,
    a: &Tensor,
    b: &Tensor,
    location: SourceLocation,
) -> Result<Tensor> {
    let (x, y) = align(name, a, b, &location)?;
    check_bits(name, x.dtype(), || format!("{} and {}", a.shape(), b.shape()), &location)?;
    let shape = x.shape().clone();
    Ok(Tensor::op(Op::Binary(op), shape, &[&x, &y], location, None))
}

/// A bitwise op's operands must be integers or bools (`operands` describes them for the error).
fn check_bits(
    name: &'static str,
    dtype: DType,
    operands: impl FnOnce() -> String,
    location: &SourceLocation,
) -> Result<()> {
    if dtype == DType::Pred || !(dtype.is_float() || dtype.is_complex()) {
        return Ok(());
    }
    Err(shape_error(name, location, format!("needs integers or bools, not {}", operands())))
}

impl Tensor {
    #[track_caller]
    pub fn bitwise_and(&self, other: &Tensor) -> Result<Tensor> {
        bitwise(BinaryOp::And, "bitwise_and", self, other, SourceLocation::caller())
    }

    #[track_caller]
    pub fn bitwise_or(&self, other: &Tensor) -> Result<Tensor> {
        bitwise(BinaryOp::Or, "bitwise_or", self, other, SourceLocation::caller())
    }

    #[track_caller]
    pub fn bitwise_xor(&self, other: &Tensor) -> Result<Tensor> {
        bitwise(BinaryOp::Xor, "bitwise_xor", self, other, SourceLocation::caller())
    }

    /// Each bit flipped (PyTorch's `~`): `-x - 1` for signed integers, `not` for bools.
    #[track_caller]
    pub fn bitwise_not(&self) -> Result<Tensor> {
        let location = SourceLocation::caller();
        check_bits("bitwise_not", self.dtype(), || self.shape().to_string(), &location)?;
        Ok(Tensor::op(Op::Unary(UnaryOp::Not), self.shape().clone(), &[self], location, None))
    }

    #[track_caller]
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        binary(BinaryOp::And, self, other, SourceLocation::caller())
    }

    #[track_caller]
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        binary(BinaryOp::Or, self, other, SourceLocation::caller())
    }

    /// Compares with a host scalar (of this tensor's dtype).
    #[track_caller]
    pub fn gt_scalar(&self, value: f64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let s = scoped(&location, || Tensor::scalar(value, self.dtype()));
        compare(CompareOp::Gt, self, &s, location)
    }

    /// `cond ? on_true : on_false`, elementwise, with broadcasting.
    #[track_caller]
    pub fn where_(cond: &Tensor, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            if cond.dtype() != DType::Pred {
                return Err(shape_error(
                    "where",
                    &location,
                    format!("the condition must be bool, not {}", cond.shape()),
                ));
            }
            let (a, b) = align("where", on_true, on_false, &location)?;
            let dims = broadcast_dims(cond.dims(), a.dims()).ok_or_else(|| {
                shape_error(
                    "where",
                    &location,
                    format!("condition {} does not broadcast with {}", cond.shape(), a.shape()),
                )
            })?;
            let (c, a, b) = (
                cond.broadcast_at(&dims, &location)?,
                a.broadcast_at(&dims, &location)?,
                b.broadcast_at(&dims, &location)?,
            );
            let cc = c.clone();
            let grad = grad_fn("select", &[&c, &a, &b], move |g| {
                let zero = g.zeros_like();
                Ok(vec![
                    None,
                    Some(Tensor::where_(&cc, g, &zero)?),
                    Some(Tensor::where_(&cc, &zero, g)?),
                ])
            });
            Ok(Tensor::op(Op::Select, a.shape().clone(), &[&c, &a, &b], location.clone(), grad))
        })
    }

    /// Converts to `dtype`.
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        self.cast_at(dtype, &SourceLocation::caller())
    }

    pub(crate) fn cast_at(&self, dtype: DType, location: &SourceLocation) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        let from = self.dtype();
        if from.is_complex() && !dtype.is_complex() {
            // XLA converts complex numbers only to complex types: the real part, then that.
            let re = unary(UnaryOp::Real, self, location.clone())?;
            return re.cast_at(dtype, location);
        }
        let grad = grad_fn("convert", &[self], move |g| {
            Ok(vec![from.is_float().then(|| g.cast(from)).transpose()?])
        });
        Ok(Tensor::op(Op::Convert, self.shape().with_dtype(dtype), &[self], location.clone(), grad))
    }

    /// Python's (and PyTorch's) remainder: the result has the sign of the divisor.
    /// [`Tensor::fmod`] is C's, with the sign of the dividend.
    #[track_caller]
    pub fn remainder(&self, other: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let r = self.fmod(other)?;
            let zero = Tensor::scalar(0.0, r.dtype());
            let nonzero = r.ne(&zero)?;
            let differ = r.lt(&zero)?.ne(&other.lt(&zero)?)?;
            let fix = nonzero.logical_and(&differ)?;
            Tensor::where_(&fix, &r.add(other)?, &r)
        })
    }

    #[track_caller]
    pub fn remainder_scalar(&self, value: f64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || self.remainder(&Tensor::scalar(value, self.dtype())))
    }

    #[track_caller]
    pub fn relu(&self) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            // `x <= 0 ? 0 : x` keeps NaN (NaN <= 0 is false) and has gradient 0 at 0, as PyTorch.
            let zero = Tensor::scalar(0.0, self.dtype());
            Tensor::where_(&self.le(&zero)?, &zero, self)
        })
    }

    /// GELU with the tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    #[track_caller]
    pub fn gelu(&self) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            if let Some(half) = self.half_dtype() {
                return self.cast(DType::F32)?.gelu()?.cast(half);
            }
            let inner = self
                .add(&self.pow_scalar(3.0)?.mul_scalar(0.044715)?)?
                .mul_scalar((2.0 / std::f64::consts::PI).sqrt())?;
            self.mul(&inner.tanh()?.add_scalar(1.0)?)?.mul_scalar(0.5)
        })
    }

    #[track_caller]
    pub fn silu(&self) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            if let Some(half) = self.half_dtype() {
                return self.cast(DType::F32)?.silu()?.cast(half);
            }
            self.mul(&self.sigmoid()?)
        })
    }

    /// The dtype of a half-precision tensor (bf16, f16), whose activations made of several ops
    /// compute in f32 and round once, as torch's CPU and CUDA kernels do: `x * sigmoid(x)` in
    /// bf16 rounds twice, and a SiLU was off by 1.5x torch's error.
    fn half_dtype(&self) -> Option<DType> {
        self.dtype().is_half().then(|| self.dtype())
    }

    #[track_caller]
    pub fn clamp(&self, min: f64, max: f64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || self.maximum_scalar(min)?.minimum_scalar(max))
    }
}

impl Tensor {
    /// A three-term recurrence per element, in one loop ([`Recursion::ThreeTerm`]): from
    /// `P_0 = 1` and `p1`, `P_m = ((a1 m + a0) x + (b1 m + b0)) P_{m-1} - (c1 m + c0) P_{m-2}`
    /// over `d1 m + d0` for `m = 2 ..= n`, `x` being `self` (float), `n` each element's degree
    /// (integer, of `self`'s shape), `coefficients` `[a1, a0, b1, b0, c1, c0, d1, d0]`: the
    /// orthogonal polynomials (Chebyshev, Hermite, Laguerre, Legendre). `P_1` where `n <= 1`.
    /// Not differentiable here.
    #[track_caller]
    pub fn three_term_recurrence(
        &self,
        n: &Tensor,
        p1: &Tensor,
        coefficients: [i8; 8],
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let fits = matches!(self.dtype(), DType::F32 | DType::F64)
            && p1.shape() == self.shape()
            && matches!(n.dtype(), DType::S32 | DType::S64)
            && n.dims() == self.dims();
        if !fits {
            return Err(shape_error(
                "three_term_recurrence",
                &location,
                format!(
                    "needs float x, integer degrees and a float first polynomial of one shape, got {}, {} and {}",
                    self.shape(),
                    n.shape(),
                    p1.shape()
                ),
            ));
        }
        not_differentiable("three_term_recurrence", &[self, p1], &location)?;
        let n = scoped(&location, || n.cast(DType::S32))?;
        let op = Op::Recursion(Recursion::ThreeTerm { coefficients });
        Ok(Tensor::op(op, self.shape().clone(), &[self, &n, p1], location, None))
    }
}
