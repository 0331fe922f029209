//! Factorizations of the last two dims (the leading ones a batch): Cholesky and triangular solves
//! are StableHLO ops; QR, its Householder product and the symmetric eigen-decomposition are the
//! custom calls XLA expands itself (`Qr`, `ProductOfElementaryHouseholderReflectors`, `Eigh`);
//! LU with partial pivoting, which XLA has no op for, is a `while` loop written here, one column
//! per iteration, in whole-matrix masked updates so every matrix of a batch pivots on its own.

use std::fmt::Write;

use super::{literal, Ctx};
use crate::dtype::DType;
use crate::ir::{qr_taus, LuOutput, Op};
use crate::shape::{Dims, Shape};

pub(super) fn lower(c: &mut Ctx) {
    let node = c.node;
    let name = c.name.clone();
    let ty = c.ty();
    match node.op {
        Op::Cholesky { lower } => {
            // XLA leaves the other triangle unspecified; PyTorch's is zero.
            let a = c.args[0].clone();
            let _ = writeln!(
                c.out,
                "  {name}_f = \"stablehlo.cholesky\"({a}) {{lower = {lower}}} : ({ty}) -> {ty}"
            );
            let mut l = lines(c);
            let keep = l.triangle(&node.shape, lower);
            let zero = l.splat(&node.shape, 0.0);
            let pred = node.shape.with_dtype(DType::Pred).mlir();
            let _ = writeln!(
                l.out,
                "  {name} = \"stablehlo.select\"({keep}, {name}_f, {zero}) : ({pred}, {ty}, {ty}) -> {ty}"
            );
        }
        Op::TriangularSolve { left_side, lower, unit_diagonal, transpose } => {
            let t = if transpose { "TRANSPOSE" } else { "NO_TRANSPOSE" };
            c.generic(
                "triangular_solve",
                &format!(
                    "left_side = {left_side}, lower = {lower}, unit_diagonal = {unit_diagonal}, transpose_a = #stablehlo<transpose {t}>"
                ),
            );
        }
        Op::Qr { taus } => {
            let a = c.args[0].clone();
            let in_ty = c.in_ty(0);
            let tau_ty = qr_taus(&node.inputs[0].shape).mlir();
            let _ = writeln!(
                c.out,
                "  {name}_qr:2 = \"stablehlo.custom_call\"({a}) {{call_target_name = \"Qr\"}} : ({in_ty}) -> ({in_ty}, {tau_ty})"
            );
            pick(c, &format!("{name}_qr#{}", taus as u8));
        }
        Op::HouseholderProduct => c.generic(
            "custom_call",
            "call_target_name = \"ProductOfElementaryHouseholderReflectors\"",
        ),
        Op::Eigh { lower, vectors } => {
            let a = c.args[0].clone();
            let in_shape = node.inputs[0].shape.clone();
            let in_ty = in_shape.mlir();
            let r = in_shape.rank();
            let dims = &in_shape.dims;
            let w_ty = in_shape.with_dims(dims[..r - 1].to_vec()).mlir();
            // The matrix made whole from the triangle it is read from (XLA's expander reads
            // every entry).
            let keep = lines(c).triangle(&in_shape, lower);
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            let perm: Vec<String> = perm.iter().map(|d| d.to_string()).collect();
            let pred = in_shape.with_dtype(DType::Pred).mlir();
            let _ = writeln!(
                c.out,
                "  {name}_t = \"stablehlo.transpose\"({a}) {{permutation = array<i64: {}>}} : ({in_ty}) -> {in_ty}",
                perm.join(", ")
            );
            let _ = writeln!(
                c.out,
                "  {name}_sym = \"stablehlo.select\"({keep}, {a}, {name}_t) : ({pred}, {in_ty}, {in_ty}) -> {in_ty}"
            );
            // XLA's Jacobi eigen-solver: eigenvalues sorted, at most 100 sweeps, stopping once
            // the off-diagonal part is 1e-6 of the whole.
            let _ = writeln!(
                c.out,
                "  {name}_eig:2 = \"stablehlo.custom_call\"({name}_sym) {{call_target_name = \"Eigh\", backend_config = \"1,1,100,1.0e-6\"}} : ({in_ty}) -> ({in_ty}, {w_ty})"
            );
            pick(c, &format!("{name}_eig#{}", if vectors { 0 } else { 1 }));
        }
        Op::Lu { output } => {
            lu(c);
            let which = match output {
                LuOutput::Factors => 1,
                LuOutput::Permutation => 2,
                LuOutput::Pivots => 3,
            };
            pick(c, &format!("{name}_lu#{which}"));
        }
        Op::PivotsToPermutation { rows } => {
            pivots_to_permutation(c, rows);
            pick(c, &format!("{name}_pp#1"));
        }
        _ => unreachable!("not a factorization: {:?}", node.op),
    }
}

/// The node as one result of a multi-result op: a reshape to its own type names it.
fn pick(c: &mut Ctx, value: &str) {
    let ty = c.ty();
    let _ = writeln!(c.out, "  {} = \"stablehlo.reshape\"({value}) : ({ty}) -> {ty}", c.name);
}

/// A writer of fresh names for `c`'s node (`%v12_l0`, `%v12_l1`, ...).
pub(super) fn lines<'a>(c: &'a mut Ctx) -> Lines<'a> {
    let prefix = format!("{}_l", &c.name[1..]);
    Lines { out: &mut *c.out, prefix, n: 0 }
}

/// Writes the lines of one region (or of the body of `main`) with fresh names: every value is
/// `%{prefix}{n}`, so regions never reuse a name of the function around them.
pub(super) struct Lines<'a> {
    out: &'a mut String,
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
    fn triangle(&mut self, shape: &Shape, lower: bool) -> String {
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
    fn reduce(&mut self, kind: &str, x: &str, shape: &Shape, axes: &[usize]) -> String {
        let init = match kind {
            "maximum" => f64::NEG_INFINITY,
            "minimum" => f64::INFINITY,
            _ => 0.0,
        };
        let init = self.constant(shape.dtype, init);
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
    fn masked_sum(&mut self, mask: &str, x: &str, shape: &Shape, axes: &[usize]) -> String {
        let zero = self.splat(shape, 0.0);
        let only = self.select(mask, x, &zero, shape);
        self.reduce("add", &only, shape, axes)
    }

    /// `x` (of `shape`) with its entries `k` (a scalar) and `p` (one per matrix of the batch,
    /// the first `nb` dims) along `axis` swapped.
    fn swap(&mut self, x: &str, shape: &Shape, axis: usize, k: &str, p: &str, nb: usize) -> String {
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
        let last = self.constant(DType::S32, steps as f64);
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

/// `shape` without `axes`.
fn reduced(shape: &Shape, axes: &[usize]) -> Shape {
    let dims = shape.dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d);
    shape.with_dims(dims.collect::<Dims>())
}

/// `%{node}_lu:4 = while`: (step, factors, permutation, pivots).
fn lu(c: &mut Ctx) {
    let at = c.node.inputs[0].shape.clone();
    let r = at.rank();
    let (m, n) = (at.dims[r - 2], at.dims[r - 1]);
    let batch: Vec<i64> = at.dims[..r - 2].to_vec();
    let nb = batch.len();
    let sh = |d: DType, extra: &[i64]| Shape::new(d, [batch.as_slice(), extra].concat());
    let ai = at.with_dtype(DType::S32);
    let (perm, piv) = (sh(DType::S32, &[m]), sh(DType::S32, &[m.min(n)]));
    let (bat_i, bat_t) = (sh(DType::S32, &[]), sh(at.dtype, &[]));
    let (row_t, col_t, rows_i) = (sh(at.dtype, &[n]), sh(at.dtype, &[m]), sh(DType::S32, &[m]));
    let scalar_i = Shape::new(DType::S32, Vec::<i64>::new());
    let batch_axes: Vec<usize> = (0..nb).collect();
    let with = |extra: &[usize]| -> Vec<usize> { [batch_axes.as_slice(), extra].concat() };
    let (name, a) = (c.name.clone(), c.args[0].clone());

    let mut l = lines(c);
    let p0 = l.iota(&perm, nb);
    let v0 = l.splat(&piv, 0.0);
    let carried = [(a.as_str(), &at), (p0.as_str(), &perm), (v0.as_str(), &piv)];
    let args = l.begin_while(&format!("{name}_lu"), &carried, m.min(n));
    let (kv, av, pv, vv) = (&args[0], &args[1], &args[2], &args[3]);
    let i = l.iota(&ai, r - 2);
    let j = l.iota(&ai, r - 1);
    let ki = l.broadcast(kv, &scalar_i, &ai, &[]);
    // The pivot: the first row at or below k with the largest magnitude in column k.
    let at_col = l.compare(&j, &ki, "EQ", &ai);
    let col = l.masked_sum(&at_col, av, &at, &[r - 1]); // [batch, m]
    let ty = col_t.mlir();
    let mag = l.emit(&format!("\"stablehlo.abs\"({col})"), &format!("({ty}) -> {ty}"));
    let rows_m = l.iota(&rows_i, nb);
    let km = l.broadcast(kv, &scalar_i, &rows_i, &[]);
    let below = l.compare(&rows_m, &km, "GE", &rows_i);
    let minus = l.splat(&col_t, -1.0);
    let cand = l.select(&below, &mag, &minus, &col_t);
    let best = l.reduce("maximum", &cand, &col_t, &[nb]); // [batch]
    let best_m = l.broadcast(&best, &bat_t, &col_t, &batch_axes);
    let is_best = l.compare(&cand, &best_m, "EQ", &col_t);
    let past = l.splat(&rows_i, m as f64);
    let idx = l.select(&is_best, &rows_m, &past, &rows_i);
    let p = l.reduce("minimum", &idx, &rows_i, &[nb]); // [batch]
                                                       // A column of NaN has no best row: row k stays.
    let stay = l.broadcast(kv, &scalar_i, &bat_i, &[]);
    let none = l.splat(&bat_i, m as f64);
    let found = l.compare(&p, &none, "LT", &bat_i);
    let p = l.select(&found, &p, &stay, &bat_i);
    // Rows k and p swapped, in the matrix and in the permutation; pivot k is p, 1-based.
    let a1 = l.swap(av, &at, r - 2, kv, &p, nb);
    let perm1 = l.swap(pv, &perm, nb, kv, &p, nb);
    let vrow = l.iota(&piv, nb);
    let kv_b = l.broadcast(kv, &scalar_i, &piv, &[]);
    let v_is = l.compare(&vrow, &kv_b, "EQ", &piv);
    let one = l.splat(&bat_i, 1.0);
    let p1 = l.binary("add", &p, &one, &bat_i);
    let p1_b = l.broadcast(&p1, &bat_i, &piv, &batch_axes);
    let piv1 = l.select(&v_is, &p1_b, vv, &piv);
    // Eliminate below the pivot: the multipliers stored in column k, the rest updated.
    let is_k = l.compare(&i, &ki, "EQ", &ai);
    let zero_a = l.splat(&at, 0.0);
    let col1_only = l.select(&at_col, &a1, &zero_a, &at);
    let col1 = l.reduce("add", &col1_only, &at, &[r - 1]); // [batch, m]
    let row1 = l.masked_sum(&is_k, &a1, &at, &[r - 2]); // [batch, n]
    let d = l.masked_sum(&is_k, &col1_only, &at, &[r - 2, r - 1]); // [batch]
    let col1_b = l.broadcast(&col1, &col_t, &at, &with(&[r - 2]));
    let row1_b = l.broadcast(&row1, &row_t, &at, &with(&[r - 1]));
    let d_b = l.broadcast(&d, &bat_t, &at, &batch_axes);
    let scaled = l.binary("divide", &col1_b, &d_b, &at);
    let nonzero = l.compare(&d_b, &zero_a, "NE", &at);
    let mult = l.select(&nonzero, &scaled, &col1_b, &at);
    let under = l.compare(&i, &ki, "GT", &ai);
    let right = l.compare(&j, &ki, "GT", &ai);
    let mult_under = l.select(&under, &mult, &zero_a, &at);
    let row_right = l.select(&right, &row1_b, &zero_a, &at);
    let outer = l.binary("multiply", &mult_under, &row_right, &at);
    let updated = l.binary("subtract", &a1, &outer, &at);
    let store = l.emit(
        &format!("\"stablehlo.and\"({under}, {at_col})"),
        &format!("({0}, {0}) -> {0}", ai.with_dtype(DType::Pred).mlir()),
    );
    let a2 = l.select(&store, &mult, &updated, &at);
    l.end_while(kv, &[a2, perm1, piv1], &[&at, &perm, &piv]);
}

/// `%{node}_pp:3 = while`: (step, permutation, pivots), LAPACK's row swaps applied in order.
fn pivots_to_permutation(c: &mut Ctx, rows: usize) {
    let piv = c.node.inputs[0].shape.clone();
    let r = piv.rank();
    let batch: Vec<i64> = piv.dims[..r - 1].to_vec();
    let nb = batch.len();
    let perm = Shape::new(DType::S32, [batch.as_slice(), &[rows as i64]].concat());
    let bat_i = Shape::new(DType::S32, batch);
    let scalar_i = Shape::new(DType::S32, Vec::<i64>::new());
    let (name, v_in) = (c.name.clone(), c.args[0].clone());
    let mut l = lines(c);
    let p0 = l.iota(&perm, nb);
    // The pivots ride along unchanged: a region reads only what the loop carries.
    let carried = [(p0.as_str(), &perm), (v_in.as_str(), &piv)];
    let args = l.begin_while(&format!("{name}_pp"), &carried, piv.dims[r - 1]);
    let (kv, pv, v) = (&args[0], &args[1], &args[2]);
    // Pivot k (1-based), read by a masked sum.
    let vcol = l.iota(&piv, nb);
    let kb = l.broadcast(kv, &scalar_i, &piv, &[]);
    let at_k = l.compare(&vcol, &kb, "EQ", &piv);
    let p1 = l.masked_sum(&at_k, v, &piv, &[nb]);
    let one = l.splat(&bat_i, 1.0);
    let p = l.binary("subtract", &p1, &one, &bat_i);
    let perm1 = l.swap(pv, &perm, nb, kv, &p, nb);
    l.end_while(kv, &[perm1, v.clone()], &[&perm, &piv]);
}
