//! Index ops: `index_select` as a gather, `index_add` (and its max and min kin) as a scatter.

use std::fmt::Write;

use super::{array, list, Ctx};
use crate::ir::{Op, ReduceKind};
use crate::shape::Shape;

pub(super) fn lower(c: &mut Ctx) {
    match c.node.op {
        Op::IndexSelect { axis } => index_select(c, axis),
        Op::IndexAdd { axis } => scatter(c, axis, ReduceKind::Sum),
        Op::IndexReduce { axis, kind } => scatter(c, axis, kind),
        _ => unreachable!("not an index op: {:?}", c.node.op),
    }
}

fn index_select(c: &mut Ctx, axis: usize) {
    let operand = &c.node.inputs[0].shape;
    let indices = &c.node.inputs[1].shape;
    let rank = operand.rank();
    let offset_dims: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
    let mut slice_sizes = operand.dims.clone();
    slice_sizes[axis] = 1;
    let name = c.name.clone();
    let idx_ty = Shape::new(indices.dtype, [indices.dims[0], 1]).mlir();
    let _ = writeln!(
        c.out,
        "  {name}_i = \"stablehlo.reshape\"({}) : ({}) -> {idx_ty}",
        c.args[1],
        indices.mlir()
    );
    let sig = format!("({}, {idx_ty}) -> {}", operand.mlir(), c.ty());
    let _ = writeln!(
        c.out,
        "  {name} = \"stablehlo.gather\"({}, {name}_i) {{dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [{axis}], start_index_map = [{axis}], index_vector_dim = 1>, slice_sizes = {}, indices_are_sorted = false}} : {sig}",
        c.args[0],
        list(offset_dims),
        array(slice_sizes)
    );
}

/// `index_add` and its max and min kin: a scatter whose region combines as `kind` does (max and
/// min propagating NaN, as PyTorch's).
fn scatter(c: &mut Ctx, axis: usize, kind: ReduceKind) {
    let operand = &c.node.inputs[0].shape;
    let indices = &c.node.inputs[1].shape;
    let updates = &c.node.inputs[2].shape;
    let rank = operand.rank();
    let window_dims: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
    let name = c.name.clone();
    let idx_ty = Shape::new(indices.dtype, [indices.dims[0], 1]).mlir();
    let _ = writeln!(
        c.out,
        "  {name}_i = \"stablehlo.reshape\"({}) : ({}) -> {idx_ty}",
        c.args[1],
        indices.mlir()
    );
    let sig = format!("({}, {idx_ty}, {}) -> {}", operand.mlir(), updates.mlir(), c.ty());
    let _ = writeln!(
        c.out,
        "  {name} = \"stablehlo.scatter\"({}, {name}_i, {}) ({{\n{}  }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {}, inserted_window_dims = [{axis}], scatter_dims_to_operand_dims = [{axis}], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}} : {sig}",
        c.args[0],
        c.args[2],
        super::reduce::combiner(kind, operand.dtype),
        list(window_dims)
    );
}
