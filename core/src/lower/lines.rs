//! A writer of MLIR lines with fresh names, for lowerings that write regions of their own
//! (`while` loops and reductions): the factorizations' loops and the recursions over time.

use std::fmt::Write;

use super::{literal, Ctx};
use crate::dtype::DType;
use crate::shape::{Dims, Shape};

/// A writer of fresh names for `c`'s node (`%v12_l0`, `%v12_l1`, ...).
pub(super) fn lines<'a>(c: &'a mut Ctx) -> Lines<'a> {
    let prefix = format!("{}_l", &c.name[1..]);
    Lines { out: &mut *c.out, prefix, n: 0 }
}

/// Writes the lines of one region (or of the body of `main`) with fresh names: every value is
/// `%{prefix}{n}`, so regions never reuse a name of the function around them.
pub(super) struct Lines<'a> {
    pub(super) out: &'a mut String,
    prefix: String,
    n: usize,
}

impl Lines<'_> {
    pub(super) fn emit(&mut self, text: &str, ty: &str) -> String {
        let name = format!("%{}{}", self.prefix, self.n);
        self.n += 1;
        let _ = writeln!(self.out, "    {name} = {text} : {ty}");
        name
    }
    pub(super) fn constant(&mut self, dtype: DType, value: f64) -> String {
        let name = format!("%{}{}", self.prefix, self.n);
        self.n += 1;
        let _ = writeln!(self.out, "    {name} = stablehlo.constant {}", literal(dtype, value));
        name
    }
    /// A scalar (0-d) value broadcast to `to`, or an operand broadcast along `dims`.
    pub(super) fn broadcast(
        &mut self,
        x: &str,
        from: &Shape,
        to: &Shape,
        dims: &[usize],
    ) -> String {
        let list: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        let attr = if list.is_empty() {
            "array<i64>".to_string()
        } else {
            format!("array<i64: {}>", list.join(", "))
        };
        self.emit(
            &format!("\"stablehlo.broadcast_in_dim\"({x}) {{broadcast_dimensions = {attr}}}"),
            &format!("({}) -> {}", from.mlir(), to.mlir()),
        )
    }
    pub(super) fn splat(&mut self, shape: &Shape, value: f64) -> String {
        let c = self.constant(shape.dtype, value);
        self.broadcast(&c, &Shape::new(shape.dtype, Vec::<i64>::new()), shape, &[])
    }
    pub(super) fn iota(&mut self, shape: &Shape, axis: usize) -> String {
        self.emit(
            &format!("\"stablehlo.iota\"() {{iota_dimension = {axis} : i64}}"),
            &format!("() -> {}", shape.mlir()),
        )
    }
    /// A predicate over `shape`: true on and below the diagonal (`lower`) or on and above it.
    pub(super) fn triangle(&mut self, shape: &Shape, lower: bool) -> String {
        let idx = shape.with_dtype(DType::S32);
        let r = shape.rank();
        let (i, j) = (self.iota(&idx, r - 2), self.iota(&idx, r - 1));
        self.compare(&i, &j, if lower { "GE" } else { "LE" }, &idx)
    }

    pub(super) fn compare(&mut self, a: &str, b: &str, dir: &str, shape: &Shape) -> String {
        let kind = if shape.dtype.is_float() { "FLOAT" } else { "SIGNED" };
        let ty = shape.mlir();
        self.emit(
            &format!("\"stablehlo.compare\"({a}, {b}) {{comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type {kind}>}}"),
            &format!("({ty}, {ty}) -> {}", shape.with_dtype(DType::Pred).mlir()),
        )
    }
    pub(super) fn binary(&mut self, op: &str, a: &str, b: &str, shape: &Shape) -> String {
        let ty = shape.mlir();
        self.emit(&format!("\"stablehlo.{op}\"({a}, {b})"), &format!("({ty}, {ty}) -> {ty}"))
    }
    pub(super) fn select(&mut self, p: &str, a: &str, b: &str, shape: &Shape) -> String {
        let ty = shape.mlir();
        let pred = shape.with_dtype(DType::Pred).mlir();
        self.emit(
            &format!("\"stablehlo.select\"({p}, {a}, {b})"),
            &format!("({pred}, {ty}, {ty}) -> {ty}"),
        )
    }
    /// Sum (or max, min) of `x` over `axes`.
    pub(super) fn reduce(&mut self, kind: &str, x: &str, shape: &Shape, axes: &[usize]) -> String {
        let kind_of = match kind {
            "maximum" => crate::ir::ReduceKind::Max,
            "minimum" => crate::ir::ReduceKind::Min,
            _ => crate::ir::ReduceKind::Sum,
        };
        let init = self.constant(shape.dtype, kind_of.identity(shape.dtype));
        let out = reduced(shape, axes);
        let t = format!("tensor<{}>", shape.dtype.mlir_name());
        let list: Vec<String> = axes.iter().map(|d| d.to_string()).collect();
        let name = format!("%{}{}", self.prefix, self.n);
        self.n += 1;
        let _ = writeln!(
            self.out,
            "    {name} = \"stablehlo.reduce\"({x}, {init}) ({{\n    ^bb0(%{p}x: {t}, %{p}y: {t}):\n      %{p}r = \"stablehlo.{kind}\"(%{p}x, %{p}y) : ({t}, {t}) -> {t}\n      \"stablehlo.return\"(%{p}r) : ({t}) -> ()\n    }}) {{dimensions = array<i64: {}>}} : ({}, {t}) -> {}",
            list.join(", "),
            shape.mlir(),
            out.mlir(),
            p = self.prefix,
        );
        name
    }

    /// The sum over `axes` of `x` where `mask` holds (zero elsewhere): how an entry chosen per
    /// matrix of a batch is read without gathers.
    pub(super) fn masked_sum(
        &mut self,
        mask: &str,
        x: &str,
        shape: &Shape,
        axes: &[usize],
    ) -> String {
        let zero = self.splat(shape, 0.0);
        let only = self.select(mask, x, &zero, shape);
        self.reduce("add", &only, shape, axes)
    }

    /// `x` (of `shape`) with its entries `k` (a scalar) and `p` (one per matrix of the batch,
    /// the first `nb` dims) along `axis` swapped.
    pub(super) fn swap(
        &mut self,
        x: &str,
        shape: &Shape,
        axis: usize,
        k: &str,
        p: &str,
        nb: usize,
    ) -> String {
        let idx = shape.with_dtype(DType::S32);
        let batch = Shape::new(DType::S32, shape.dims[..nb].to_vec());
        let batch_axes: Vec<usize> = (0..nb).collect();
        let at = self.iota(&idx, axis);
        let kb = self.broadcast(k, &Shape::new(DType::S32, Vec::<i64>::new()), &idx, &[]);
        let pb = self.broadcast(p, &batch, &idx, &batch_axes);
        let is_k = self.compare(&at, &kb, "EQ", &idx);
        let is_p = self.compare(&at, &pb, "EQ", &idx);
        let rest = reduced(shape, &[axis]);
        let others: Vec<usize> = (0..shape.rank()).filter(|&d| d != axis).collect();
        let x_k = self.masked_sum(&is_k, x, shape, &[axis]);
        let x_p = self.masked_sum(&is_p, x, shape, &[axis]);
        let x_k = self.broadcast(&x_k, &rest, shape, &others);
        let x_p = self.broadcast(&x_p, &rest, shape, &others);
        let swapped = self.select(&is_p, &x_k, x, shape);
        self.select(&is_k, &x_p, &swapped, shape)
    }

    /// Opens `{result} = while` over a step counter from 0 (carried first) and `carried`
    /// (initial value and shape each), for `steps` steps, up to its body; returns the body's
    /// names of the counter and the carried values. [`Lines::end_while`] closes it.
    pub(super) fn begin_while(
        &mut self,
        result: &str,
        carried: &[(&str, &Shape)],
        steps: i64,
    ) -> Vec<String> {
        self.open_while(result, carried, Bound::Steps(steps))
    }

    /// [`Lines::begin_while`] for as many steps as a value the loop carries says (`carried[at]`,
    /// a 0-d s32 the data decides).
    pub(super) fn begin_while_below(
        &mut self,
        result: &str,
        carried: &[(&str, &Shape)],
        at: usize,
    ) -> Vec<String> {
        self.open_while(result, carried, Bound::Carried(at))
    }

    fn open_while(
        &mut self,
        result: &str,
        carried: &[(&str, &Shape)],
        bound: Bound,
    ) -> Vec<String> {
        let p = self.prefix.clone();
        let _ = writeln!(self.out, "    %{p}k0 = stablehlo.constant dense<0> : tensor<i32>");
        let mut inits = vec![format!("%{p}k0")];
        inits.extend(carried.iter().map(|(v, _)| v.to_string()));
        let names: Vec<String> = (0..inits.len()).map(|i| format!("%{p}c{i}")).collect();
        let mut types = vec!["tensor<i32>".to_string()];
        types.extend(carried.iter().map(|(_, s)| s.mlir()));
        let block: Vec<String> =
            names.iter().zip(&types).map(|(n, t)| format!("{n}: {t}")).collect();
        let _ = writeln!(
            self.out,
            "  {result}:{} = \"stablehlo.while\"({}) ({{\n  ^bb0({}):",
            inits.len(),
            inits.join(", "),
            block.join(", ")
        );
        let last = match bound {
            Bound::Steps(steps) => self.constant(DType::S32, steps as f64),
            Bound::Carried(at) => names[at + 1].clone(),
        };
        let go = self.compare(&names[0], &last, "LT", &Shape::new(DType::S32, Vec::<i64>::new()));
        let _ = writeln!(self.out, "    \"stablehlo.return\"({go}) : (tensor<i1>) -> ()\n  }}, {{");
        let _ = writeln!(self.out, "  ^bb0({}):", block.join(", "));
        names
    }

    /// Closes [`Lines::begin_while`]: the body returns the counter plus one and `next`.
    pub(super) fn end_while(&mut self, counter: &str, next: &[String], carried: &[&Shape]) {
        let scalar = Shape::new(DType::S32, Vec::<i64>::new());
        let one = self.constant(DType::S32, 1.0);
        let k1 = self.binary("add", counter, &one, &scalar);
        let mut values = vec![k1];
        values.extend(next.iter().cloned());
        let mut types = vec!["tensor<i32>".to_string()];
        types.extend(carried.iter().map(|s| s.mlir()));
        let types = types.join(", ");
        let _ = writeln!(
            self.out,
            "    \"stablehlo.return\"({}) : ({types}) -> ()\n  }}) : ({types}) -> ({types})",
            values.join(", ")
        );
    }
}

/// How many steps a loop runs: a number the program holds, or a value it carries (by index).
enum Bound {
    Steps(i64),
    Carried(usize),
}

/// `shape` without `axes`.
pub(super) fn reduced(shape: &Shape, axes: &[usize]) -> Shape {
    let dims = shape.dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d);
    shape.with_dims(dims.collect::<Dims>())
}
