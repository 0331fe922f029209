//! Elementwise ops: unary, binary, compare, select, convert.

use std::fmt::Write;

use super::Ctx;
use crate::dtype::DType;
use crate::ir::{BinaryOp, CompareOp, Op, UnaryOp};

pub(super) fn lower(c: &mut Ctx) {
    let node = c.node;
    let ty = c.ty();
    let name = c.name.clone();
    match &node.op {
        Op::Binary(BinaryOp::Max | BinaryOp::Min) if node.shape.dtype.is_float() => {
            // XLA's CPU maximum returns the other operand for a NaN; PyTorch propagates NaN.
            let (a, b_arg) = (c.args[0].clone(), c.args[1].clone());
            let pred = node.shape.with_dtype(DType::Pred).mlir();
            let _ = writeln!(
                c.out,
                "  {name}_m = \"stablehlo.{}\"({a}, {b_arg}) : ({ty}, {ty}) -> {ty}",
                node.op.name()
            );
            for (suffix, x) in [("na", &a), ("nb", &b_arg)] {
                let _ = writeln!(
                    c.out,
                    "  {name}_{suffix} = \"stablehlo.compare\"({x}, {x}) {{comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>}} : ({ty}, {ty}) -> {pred}"
                );
            }
            let _ = writeln!(c.out, "  {name}_t = \"stablehlo.select\"({name}_nb, {b_arg}, {name}_m) : ({pred}, {ty}, {ty}) -> {ty}");
            let _ = writeln!(c.out, "  {name} = \"stablehlo.select\"({name}_na, {a}, {name}_t) : ({pred}, {ty}, {ty}) -> {ty}");
        }
        // ψ(0) is -inf in PyTorch (XLA's is NaN, as at the other poles).
        Op::Unary(UnaryOp::Digamma) => {
            let x = c.args[0].clone();
            let pred = node.shape.with_dtype(DType::Pred).mlir();
            let dt = node.shape.dtype;
            let scalar = format!("tensor<{}>", dt.mlir_name());
            let _ = writeln!(c.out, "  {name}_psi = \"chlo.digamma\"({x}) : ({ty}) -> {ty}");
            let _ = writeln!(c.out, "  {name}_z1 = stablehlo.constant {}", super::literal(dt, 0.0));
            let _ = writeln!(c.out, "  {name}_z = \"stablehlo.broadcast_in_dim\"({name}_z1) {{broadcast_dimensions = array<i64>}} : ({scalar}) -> {ty}");
            let _ = writeln!(c.out, "  {name}_at0 = \"stablehlo.compare\"({x}, {name}_z) {{comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>}} : ({ty}, {ty}) -> {pred}");
            let _ = writeln!(
                c.out,
                "  {name}_i1 = stablehlo.constant {}",
                super::literal(dt, f64::NEG_INFINITY)
            );
            let _ = writeln!(c.out, "  {name}_i = \"stablehlo.broadcast_in_dim\"({name}_i1) {{broadcast_dimensions = array<i64>}} : ({scalar}) -> {ty}");
            let _ = writeln!(c.out, "  {name} = \"stablehlo.select\"({name}_at0, {name}_i, {name}_psi) : ({pred}, {ty}, {ty}) -> {ty}");
        }
        // Special functions are CHLO ops, which XLA expands into polynomial approximations.
        Op::Unary(UnaryOp::Lgamma | UnaryOp::ErfInv | UnaryOp::Erf | UnaryOp::Erfc)
        | Op::Binary(BinaryOp::Polygamma | BinaryOp::Zeta | BinaryOp::NextAfter) => {
            c.generic_in("chlo", node.op.name(), "")
        }
        Op::Compare(cmp) => compare(c, *cmp),
        Op::Select => c.generic("select", ""),
        Op::Convert => c.generic("convert", ""),
        _ => c.generic(node.op.name(), ""), // unary and binary ops: by their StableHLO name
    }
}

fn compare(c: &mut Ctx, cmp: CompareOp) {
    let node = c.node;
    let dir = cmp.direction();
    let in_dt = node.inputs[0].shape.dtype;
    let kind = if in_dt.is_float() || in_dt.is_complex() {
        "FLOAT"
    } else if matches!(in_dt, DType::U8 | DType::Pred) {
        "UNSIGNED"
    } else {
        "SIGNED"
    };
    c.generic(
        "compare",
        &format!(
            "comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type {kind}>"
        ),
    );
}
