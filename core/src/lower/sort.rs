//! `sort`: StableHLO's sort of the values together with their positions, with a comparator
//! region that orders NaN as PyTorch does.

use std::fmt::Write;

use super::Ctx;
use crate::dtype::DType;
use crate::ir::Op;

pub(super) fn lower(c: &mut Ctx) {
    let Op::Sort { axis, descending, indices } = c.node.op else {
        unreachable!("not a sort: {:?}", c.node.op)
    };
    let name = c.name.clone();
    let in_ty = c.in_ty(0);
    let dt = c.node.inputs[0].shape.dtype;
    let idx_ty = c.node.inputs[0].shape.with_dtype(DType::S64).mlir();
    let t = format!("tensor<{}>", dt.mlir_name());
    // TOTALORDER puts NaN after +inf, as PyTorch's ascending sort; descending reverses it.
    let (kind, dir) = match (dt.is_float(), descending) {
        (true, false) => ("TOTALORDER", "LT"),
        (true, true) => ("TOTALORDER", "GT"),
        (false, d) => (
            if matches!(dt, DType::U8 | DType::Pred) { "UNSIGNED" } else { "SIGNED" },
            if d { "GT" } else { "LT" },
        ),
    };
    let _ = writeln!(
        c.out,
        "  {name}_iota = \"stablehlo.iota\"() {{iota_dimension = {axis} : i64}} : () -> {idx_ty}"
    );
    let _ = writeln!(
        c.out,
        "  {name}_s:2 = \"stablehlo.sort\"({}, {name}_iota) ({{\n  ^bb0(%a: {t}, %b: {t}, %ia: tensor<i64>, %ib: tensor<i64>):\n    %c = \"stablehlo.compare\"(%a, %b) {{comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type {kind}>}} : ({t}, {t}) -> tensor<i1>\n    \"stablehlo.return\"(%c) : (tensor<i1>) -> ()\n  }}) {{dimension = {axis} : i64, is_stable = true}} : ({in_ty}, {idx_ty}) -> ({in_ty}, {idx_ty})",
        c.args[0]
    );
    // The node is one of the two results; a reshape to the same type names it.
    let (which, ty) = if indices { (1, idx_ty) } else { (0, in_ty) };
    let _ = writeln!(c.out, "  {name} = \"stablehlo.reshape\"({name}_s#{which}) : ({ty}) -> {ty}");
}
