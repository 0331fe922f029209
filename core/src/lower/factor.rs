//! Factorizations of the last two dims (the leading ones a batch): Cholesky and triangular solves
//! are StableHLO ops; QR, its Householder product and the symmetric eigen-decomposition are the
//! custom calls XLA expands itself (`Qr`, `ProductOfElementaryHouseholderReflectors`, `Eigh`);
//! LU with partial pivoting, which XLA has no op for, is a `while` loop written here, one column
//! per iteration, in whole-matrix masked updates so every matrix of a batch pivots on its own.

use std::fmt::Write;

use super::lines::lines;
use super::Ctx;
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
