//! Factorizations of the last two dims (the leading ones a batch): Cholesky and triangular solves
//! are StableHLO ops; QR, its Householder product and the symmetric eigen-decomposition are the
//! custom calls XLA expands itself (`Qr`, `ProductOfElementaryHouseholderReflectors`, `Eigh`);
//! LU with partial pivoting, which XLA has no op for, is a `while` loop written here, one column
//! per iteration, in whole-matrix masked updates so every matrix of a batch pivots on its own.

use std::fmt::Write;

use super::{literal, Ctx};
use crate::dtype::DType;
use crate::ir::{qr_taus, LuOutput, Op};
use crate::shape::Shape;

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
            let keep = triangle(c, &node.shape, lower, "_tri");
            let zero = splat(c, &node.shape, 0.0, "_z");
            let pred = node.shape.with_dtype(DType::Pred).mlir();
            let _ = writeln!(
                c.out,
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
            let keep = triangle(c, &in_shape, lower, "_tri");
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

/// `value` broadcast to `shape`, named `{node}{suffix}`.
fn splat(c: &mut Ctx, shape: &Shape, value: f64, suffix: &str) -> String {
    let name = format!("{}{suffix}", c.name);
    let scalar = format!("tensor<{}>", shape.dtype.mlir_name());
    let _ = writeln!(c.out, "  {name}_c = stablehlo.constant {}", literal(shape.dtype, value));
    let _ = writeln!(
        c.out,
        "  {name} = \"stablehlo.broadcast_in_dim\"({name}_c) {{broadcast_dimensions = array<i64>}} : ({scalar}) -> {}",
        shape.mlir()
    );
    name
}

/// A predicate over `shape`: true on and below the diagonal (`lower`) or on and above it.
fn triangle(c: &mut Ctx, shape: &Shape, lower: bool, suffix: &str) -> String {
    let name = format!("{}{suffix}", c.name);
    let r = shape.rank();
    let idx = shape.with_dtype(DType::S32).mlir();
    let pred = shape.with_dtype(DType::Pred).mlir();
    let dir = if lower { "GE" } else { "LE" };
    let _ = writeln!(
        c.out,
        "  {name}_i = \"stablehlo.iota\"() {{iota_dimension = {} : i64}} : () -> {idx}",
        r - 2
    );
    let _ = writeln!(
        c.out,
        "  {name}_j = \"stablehlo.iota\"() {{iota_dimension = {} : i64}} : () -> {idx}",
        r - 1
    );
    let _ = writeln!(
        c.out,
        "  {name} = \"stablehlo.compare\"({name}_i, {name}_j) {{comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type SIGNED>}} : ({idx}, {idx}) -> {pred}"
    );
    name
}

/// Writes the lines of one region (or of the body of `main`) with fresh names: every value is
/// `%{prefix}{n}`, so regions never reuse a name of the function around them.
struct Lines<'a> {
    out: &'a mut String,
    prefix: String,
    n: usize,
}

impl Lines<'_> {
    fn emit(&mut self, text: &str, ty: &str) -> String {
        let name = format!("%{}{}", self.prefix, self.n);
        self.n += 1;
        let _ = writeln!(self.out, "    {name} = {text} : {ty}");
        name
    }
    fn constant(&mut self, dtype: DType, value: f64) -> String {
        let name = format!("%{}{}", self.prefix, self.n);
        self.n += 1;
        let _ = writeln!(self.out, "    {name} = stablehlo.constant {}", literal(dtype, value));
        name
    }
    /// A scalar (0-d) value broadcast to `to`, or an operand broadcast along `dims`.
    fn broadcast(&mut self, x: &str, from: &Shape, to: &Shape, dims: &[usize]) -> String {
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
    fn splat(&mut self, shape: &Shape, value: f64) -> String {
        let c = self.constant(shape.dtype, value);
        self.broadcast(&c, &Shape::new(shape.dtype, Vec::<i64>::new()), shape, &[])
    }
    fn iota(&mut self, shape: &Shape, axis: usize) -> String {
        self.emit(
            &format!("\"stablehlo.iota\"() {{iota_dimension = {axis} : i64}}"),
            &format!("() -> {}", shape.mlir()),
        )
    }
    fn compare(&mut self, a: &str, b: &str, dir: &str, shape: &Shape) -> String {
        let kind = if shape.dtype.is_float() { "FLOAT" } else { "SIGNED" };
        let ty = shape.mlir();
        self.emit(
            &format!("\"stablehlo.compare\"({a}, {b}) {{comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type {kind}>}}"),
            &format!("({ty}, {ty}) -> {}", shape.with_dtype(DType::Pred).mlir()),
        )
    }
    fn binary(&mut self, op: &str, a: &str, b: &str, shape: &Shape) -> String {
        let ty = shape.mlir();
        self.emit(&format!("\"stablehlo.{op}\"({a}, {b})"), &format!("({ty}, {ty}) -> {ty}"))
    }
    fn select(&mut self, p: &str, a: &str, b: &str, shape: &Shape) -> String {
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
}

/// `shape` without `axes`.
fn reduced(shape: &Shape, axes: &[usize]) -> Shape {
    let dims = shape.dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d);
    shape.with_dims(dims.collect())
}

/// `%{node}_lu:4 = while`: (step, factors, permutation, pivots).
fn lu(c: &mut Ctx) {
    let a_shape = c.node.inputs[0].shape.clone();
    let r = a_shape.rank();
    let (m, n) = (a_shape.dims[r - 2], a_shape.dims[r - 1]);
    let k = m.min(n);
    let batch: Vec<i64> = a_shape.dims[..r - 2].to_vec();
    let nb = batch.len();
    let dt = a_shape.dtype;
    let sh = |d: DType, extra: &[i64]| Shape::new(d, [batch.as_slice(), extra].concat());
    let (at, ai) = (a_shape.clone(), a_shape.with_dtype(DType::S32));
    let perm = sh(DType::S32, &[m]);
    let piv = sh(DType::S32, &[k]);
    let bat_i = sh(DType::S32, &[]);
    let bat_t = sh(dt, &[]);
    let row_t = sh(dt, &[n]);
    let col_t = sh(dt, &[m]);
    let scalar_i = Shape::new(DType::S32, Vec::<i64>::new());
    let batch_axes: Vec<usize> = (0..nb).collect();
    let with = |extra: &[usize]| -> Vec<usize> { [batch_axes.as_slice(), extra].concat() };
    let name = c.name.clone();
    let a = c.args[0].clone();
    let types = format!("tensor<i32>, {}, {}, {}", at.mlir(), perm.mlir(), piv.mlir());

    let mut l = Lines { out: &mut *c.out, prefix: format!("{}_l", &name[1..]), n: 0 };
    let _ = writeln!(l.out, "  {name}_k0 = stablehlo.constant dense<0> : tensor<i32>");
    let p0 = l.iota(&perm, nb);
    let v0 = l.splat(&piv, 0.0);
    let _ = writeln!(
        l.out,
        "  {name}_lu:4 = \"stablehlo.while\"({name}_k0, {a}, {p0}, {v0}) ({{\n  ^bb0(%{p}k: tensor<i32>, %{p}a: {}, %{p}p: {}, %{p}v: {}):",
        at.mlir(),
        perm.mlir(),
        piv.mlir(),
        p = l.prefix
    );
    let steps = l.constant(DType::S32, k as f64);
    let go = l.compare(&format!("%{}k", l.prefix), &steps, "LT", &scalar_i);
    let _ = writeln!(l.out, "    \"stablehlo.return\"({go}) : (tensor<i1>) -> ()\n  }}, {{");
    let _ = writeln!(
        l.out,
        "  ^bb0(%{p}k: tensor<i32>, %{p}a: {}, %{p}p: {}, %{p}v: {}):",
        at.mlir(),
        perm.mlir(),
        piv.mlir(),
        p = l.prefix
    );
    let (kv, av, pv, vv) = (
        format!("%{}k", l.prefix),
        format!("%{}a", l.prefix),
        format!("%{}p", l.prefix),
        format!("%{}v", l.prefix),
    );
    let i = l.iota(&ai, r - 2);
    let j = l.iota(&ai, r - 1);
    let ki = l.broadcast(&kv, &scalar_i, &ai, &[]);
    let zero_a = l.splat(&at, 0.0);
    // The pivot: the first row at or below k with the largest magnitude in column k.
    let at_col = l.compare(&j, &ki, "EQ", &ai);
    let col_only = l.select(&at_col, &av, &zero_a, &at);
    let col = l.reduce("add", &col_only, &at, &[r - 1]); // [batch, m]
    let mag = l.emit(
        &format!("\"stablehlo.abs\"({col})"),
        &format!("({}) -> {}", col_t.mlir(), col_t.mlir()),
    );
    let rows_m = l.iota(&sh(DType::S32, &[m]), nb);
    let km = l.broadcast(&kv, &scalar_i, &sh(DType::S32, &[m]), &[]);
    let below = l.compare(&rows_m, &km, "GE", &sh(DType::S32, &[m]));
    let minus = l.splat(&col_t, -1.0);
    let cand = l.select(&below, &mag, &minus, &col_t);
    let best = l.reduce("maximum", &cand, &col_t, &[nb]); // [batch]
    let best_m = l.broadcast(&best, &bat_t, &col_t, &batch_axes);
    let is_best = l.compare(&cand, &best_m, "EQ", &col_t);
    let past = l.splat(&sh(DType::S32, &[m]), m as f64);
    let idx = l.select(&is_best, &rows_m, &past, &sh(DType::S32, &[m]));
    let p = l.reduce("minimum", &idx, &sh(DType::S32, &[m]), &[nb]); // [batch]
                                                                     // A column of NaN has no best row: row k stays.
    let stay = l.broadcast(&kv, &scalar_i, &bat_i, &[]);
    let none = l.splat(&bat_i, m as f64);
    let found = l.compare(&p, &none, "LT", &bat_i);
    let p = l.select(&found, &p, &stay, &bat_i);
    // Rows k and p swapped.
    let pi = l.broadcast(&p, &bat_i, &ai, &batch_axes);
    let is_k = l.compare(&i, &ki, "EQ", &ai);
    let is_p = l.compare(&i, &pi, "EQ", &ai);
    let row_k_only = l.select(&is_k, &av, &zero_a, &at);
    let row_k = l.reduce("add", &row_k_only, &at, &[r - 2]); // [batch, n]
    let row_p_only = l.select(&is_p, &av, &zero_a, &at);
    let row_p = l.reduce("add", &row_p_only, &at, &[r - 2]);
    let row_k_b = l.broadcast(&row_k, &row_t, &at, &with(&[r - 1]));
    let row_p_b = l.broadcast(&row_p, &row_t, &at, &with(&[r - 1]));
    let swapped_p = l.select(&is_p, &row_k_b, &av, &at);
    let a1 = l.select(&is_k, &row_p_b, &swapped_p, &at);
    // The permutation's entries k and p swapped; pivot k is p, 1-based.
    let prow = l.iota(&perm, nb);
    let kp = l.broadcast(&kv, &scalar_i, &perm, &[]);
    let pp = l.broadcast(&p, &bat_i, &perm, &batch_axes);
    let pk_is = l.compare(&prow, &kp, "EQ", &perm);
    let pp_is = l.compare(&prow, &pp, "EQ", &perm);
    let zero_p = l.splat(&perm, 0.0);
    let perm_k_only = l.select(&pk_is, &pv, &zero_p, &perm);
    let perm_k = l.reduce("add", &perm_k_only, &perm, &[nb]);
    let perm_p_only = l.select(&pp_is, &pv, &zero_p, &perm);
    let perm_p = l.reduce("add", &perm_p_only, &perm, &[nb]);
    let perm_k_b = l.broadcast(&perm_k, &bat_i, &perm, &batch_axes);
    let perm_p_b = l.broadcast(&perm_p, &bat_i, &perm, &batch_axes);
    let perm_sw = l.select(&pp_is, &perm_k_b, &pv, &perm);
    let perm1 = l.select(&pk_is, &perm_p_b, &perm_sw, &perm);
    let vrow = l.iota(&piv, nb);
    let kv_b = l.broadcast(&kv, &scalar_i, &piv, &[]);
    let v_is = l.compare(&vrow, &kv_b, "EQ", &piv);
    let one = l.splat(&bat_i, 1.0);
    let p1 = l.binary("add", &p, &one, &bat_i);
    let p1_b = l.broadcast(&p1, &bat_i, &piv, &batch_axes);
    let piv1 = l.select(&v_is, &p1_b, &vv, &piv);
    // Eliminate below the pivot: the multipliers stored in column k, the rest updated.
    let col1_only = l.select(&at_col, &a1, &zero_a, &at);
    let col1 = l.reduce("add", &col1_only, &at, &[r - 1]); // [batch, m]
    let row1_only = l.select(&is_k, &a1, &zero_a, &at);
    let row1 = l.reduce("add", &row1_only, &at, &[r - 2]); // [batch, n]
    let diag_only = l.select(&is_k, &col1_only, &zero_a, &at);
    let d = l.reduce("add", &diag_only, &at, &[r - 2, r - 1]); // [batch]
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
    let one_s = l.constant(DType::S32, 1.0);
    let k1 = l.binary("add", &kv, &one_s, &scalar_i);
    let _ = writeln!(
        l.out,
        "    \"stablehlo.return\"({k1}, {a2}, {perm1}, {piv1}) : ({types}) -> ()\n  }}) : ({types}) -> ({types})"
    );
}

/// `%{node}_pp:2 = while`: (step, permutation), LAPACK's row swaps applied in order.
fn pivots_to_permutation(c: &mut Ctx, rows: usize) {
    let piv = c.node.inputs[0].shape.clone();
    let r = piv.rank();
    let k = piv.dims[r - 1];
    let batch: Vec<i64> = piv.dims[..r - 1].to_vec();
    let nb = batch.len();
    let perm = Shape::new(DType::S32, [batch.as_slice(), &[rows as i64]].concat());
    let bat_i = Shape::new(DType::S32, batch.clone());
    let scalar_i = Shape::new(DType::S32, Vec::<i64>::new());
    let batch_axes: Vec<usize> = (0..nb).collect();
    let name = c.name.clone();
    let v_in = c.args[0].clone();
    // The pivots ride along unchanged: a region reads only what the loop carries.
    let types = format!("tensor<i32>, {}, {}", perm.mlir(), piv.mlir());
    let mut l = Lines { out: &mut *c.out, prefix: format!("{}_l", &name[1..]), n: 0 };
    let _ = writeln!(l.out, "  {name}_k0 = stablehlo.constant dense<0> : tensor<i32>");
    let p0 = l.iota(&perm, nb);
    let _ = writeln!(
        l.out,
        "  {name}_pp:3 = \"stablehlo.while\"({name}_k0, {p0}, {v_in}) ({{\n  ^bb0(%{p}k: tensor<i32>, %{p}p: {}, %{p}v: {}):",
        perm.mlir(),
        piv.mlir(),
        p = l.prefix
    );
    let steps = l.constant(DType::S32, k as f64);
    let go = l.compare(&format!("%{}k", l.prefix), &steps, "LT", &scalar_i);
    let _ = writeln!(l.out, "    \"stablehlo.return\"({go}) : (tensor<i1>) -> ()\n  }}, {{");
    let _ = writeln!(
        l.out,
        "  ^bb0(%{p}k: tensor<i32>, %{p}p: {}, %{p}v: {}):",
        perm.mlir(),
        piv.mlir(),
        p = l.prefix
    );
    let (kv, pv, v) =
        (format!("%{}k", l.prefix), format!("%{}p", l.prefix), format!("%{}v", l.prefix));
    // Pivot k (1-based), read from the captured pivots by a masked sum.
    let vcol = l.iota(&piv, nb);
    let kb = l.broadcast(&kv, &scalar_i, &piv, &[]);
    let at_k = l.compare(&vcol, &kb, "EQ", &piv);
    let zero_v = l.splat(&piv, 0.0);
    let only = l.select(&at_k, &v, &zero_v, &piv);
    let p1 = l.reduce("add", &only, &piv, &[nb]);
    let one = l.splat(&bat_i, 1.0);
    let p = l.binary("subtract", &p1, &one, &bat_i);
    let prow = l.iota(&perm, nb);
    let kp = l.broadcast(&kv, &scalar_i, &perm, &[]);
    let pp = l.broadcast(&p, &bat_i, &perm, &batch_axes);
    let pk_is = l.compare(&prow, &kp, "EQ", &perm);
    let pp_is = l.compare(&prow, &pp, "EQ", &perm);
    let zero_p = l.splat(&perm, 0.0);
    let perm_k_only = l.select(&pk_is, &pv, &zero_p, &perm);
    let perm_k = l.reduce("add", &perm_k_only, &perm, &[nb]);
    let perm_p_only = l.select(&pp_is, &pv, &zero_p, &perm);
    let perm_p = l.reduce("add", &perm_p_only, &perm, &[nb]);
    let perm_k_b = l.broadcast(&perm_k, &bat_i, &perm, &batch_axes);
    let perm_p_b = l.broadcast(&perm_p, &bat_i, &perm, &batch_axes);
    let sw = l.select(&pp_is, &perm_k_b, &pv, &perm);
    let perm1 = l.select(&pk_is, &perm_p_b, &sw, &perm);
    let one_s = l.constant(DType::S32, 1.0);
    let k1 = l.binary("add", &kv, &one_s, &scalar_i);
    let _ = writeln!(
        l.out,
        "    \"stablehlo.return\"({k1}, {perm1}, {v}) : ({types}) -> ()\n  }}) : ({types}) -> ({types})"
    );
}
