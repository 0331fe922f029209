//! Lowering a graph to StableHLO text: one function per op family.
//!
//! Ops without regions are written in MLIR's generic form (`"stablehlo.op"(...) {attrs}`), which
//! does not change between StableHLO versions; reductions use the region form.

use std::fmt::Write;

use crate::dtype::DType;
use crate::exec::Graph;
use crate::ir::{BinaryOp, CompareOp, Node, Op, ReduceKind};
use crate::shape::Shape;

/// The StableHLO module for `graph`: parameters are its device data in order, then the packed
/// host scalars; results are its outputs in order.
pub(crate) fn stablehlo(graph: &Graph) -> String {
    let mut out = String::with_capacity(graph.order.len() * 96 + 256);
    let mut params: Vec<String> = graph
        .order
        .iter()
        .zip(&graph.slot)
        .filter(|(n, _)| matches!(n.op, Op::Data(_)))
        .map(|(n, slot)| {
            let alias = graph.donated.iter().find(|(p, _)| *p == *slot as usize);
            match alias {
                Some((_, output)) => {
                    format!("%p{slot}: {} {{tf.aliasing_output = {output} : i32}}", n.shape.mlir())
                }
                None => format!("%p{slot}: {}", n.shape.mlir()),
            }
        })
        .collect();
    let scalars_ty = format!("tensor<{}xf64>", graph.scalars.len());
    if !graph.scalars.is_empty() {
        params.push(format!("%scalars: {scalars_ty}"));
    }
    let results: Vec<String> =
        graph.outputs.iter().map(|&o| graph.order[o as usize].shape.mlir()).collect();
    let _ = writeln!(out, "func.func @main({}) -> ({}) {{", params.join(", "), results.join(", "));
    let name = |i: usize| -> String {
        match graph.order[i].op {
            Op::Data(_) => format!("%p{}", graph.slot[i]),
            _ => format!("%v{i}"),
        }
    };
    for (i, node) in graph.order.iter().enumerate() {
        let args: Vec<String> = node
            .inputs
            .iter()
            .map(|n| name(n.visit_index.load(std::sync::atomic::Ordering::Relaxed) as usize))
            .collect();
        let ctx =
            Ctx { out: &mut out, name: format!("%v{i}"), node, args, scalars_ty: &scalars_ty };
        lower_node(ctx, graph.slot[i]);
    }
    let names: Vec<String> = graph.outputs.iter().map(|&o| name(o as usize)).collect();
    let _ = writeln!(out, "  return {} : {}", names.join(", "), results.join(", "));
    out.push_str("}\n");
    out
}

struct Ctx<'a> {
    out: &'a mut String,
    name: String,
    node: &'a Node,
    args: Vec<String>,
    scalars_ty: &'a str,
}

impl Ctx<'_> {
    fn ty(&self) -> String {
        self.node.shape.mlir()
    }
    fn in_ty(&self, i: usize) -> String {
        self.node.inputs[i].shape.mlir()
    }
    fn signature(&self) -> String {
        let ins: Vec<String> = (0..self.args.len()).map(|i| self.in_ty(i)).collect();
        format!("({}) -> {}", ins.join(", "), self.ty())
    }
    /// `%name = "stablehlo.op"(args) {attrs} : (in types) -> type`
    fn generic(&mut self, op: &str, attrs: &str) {
        let sig = self.signature();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{attrs}}}") };
        let _ = writeln!(
            self.out,
            "  {} = \"stablehlo.{op}\"({}){attrs} : {sig}",
            self.name,
            self.args.join(", ")
        );
    }
}

fn array(values: impl IntoIterator<Item = impl ToString>) -> String {
    let v: Vec<String> = values.into_iter().map(|x| x.to_string()).collect();
    if v.is_empty() {
        "array<i64>".to_string()
    } else {
        format!("array<i64: {}>", v.join(", "))
    }
}

fn list(values: impl IntoIterator<Item = impl ToString>) -> String {
    let v: Vec<String> = values.into_iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// A scalar constant of `dtype` as an MLIR dense literal.
pub(crate) fn literal(dtype: DType, value: f64) -> String {
    let text = match dtype {
        DType::Pred => (value != 0.0).to_string(),
        DType::S8 | DType::S32 | DType::S64 | DType::U8 => {
            let (lo, hi) = match dtype {
                DType::S8 => (i8::MIN as f64, i8::MAX as f64),
                DType::U8 => (0.0, u8::MAX as f64),
                DType::S32 => (i32::MIN as f64, i32::MAX as f64),
                _ => (i64::MIN as f64, i64::MAX as f64),
            };
            format!("{}", value.clamp(lo, hi) as i64)
        }
        _ if value.is_infinite() || value.is_nan() => {
            let bits: u64 = match (dtype, value.is_sign_negative(), value.is_nan()) {
                (_, _, true) => match dtype {
                    DType::F16 => 0x7E00,
                    DType::BF16 => 0x7FC0,
                    DType::F32 => 0x7FC0_0000,
                    _ => 0x7FF8_0000_0000_0000,
                },
                (DType::F16, neg, _) => {
                    if neg {
                        0xFC00
                    } else {
                        0x7C00
                    }
                }
                (DType::BF16, neg, _) => {
                    if neg {
                        0xFF80
                    } else {
                        0x7F80
                    }
                }
                (DType::F32, neg, _) => {
                    if neg {
                        0xFF80_0000
                    } else {
                        0x7F80_0000
                    }
                }
                (_, neg, _) => {
                    if neg {
                        0xFFF0_0000_0000_0000
                    } else {
                        0x7FF0_0000_0000_0000
                    }
                }
            };
            let width = dtype.size_bytes() * 2;
            format!("0x{bits:0width$X}")
        }
        _ => {
            // MLIR float literals need a decimal point: 5e-1 is written 5.0e-1.
            let e = format!("{value:e}");
            if e.contains('.') {
                e
            } else {
                e.replacen('e', ".0e", 1)
            }
        }
    };
    format!("dense<{text}> : tensor<{}>", dtype.mlir_name())
}

fn lower_node(mut c: Ctx, slot: u32) {
    let node = c.node;
    let ty = c.ty();
    let name = c.name.clone();
    match &node.op {
        Op::Data(_) => {} // a parameter: referenced by name
        Op::Scalar(_) => {
            let dt = node.shape.dtype;
            let _ = writeln!(
                c.out,
                "  {name}_s = \"stablehlo.slice\"(%scalars) {{start_indices = {}, limit_indices = {}, strides = array<i64: 1>}} : ({}) -> tensor<1xf64>",
                array([slot]),
                array([slot + 1]),
                c.scalars_ty
            );
            // An f64 scalar is the reshaped slice itself; others are converted from it.
            let reshaped = if dt == DType::F64 { name.clone() } else { format!("{name}_r") };
            let _ = writeln!(c.out, "  {reshaped} = \"stablehlo.reshape\"({name}_s) : (tensor<1xf64>) -> tensor<f64>");
            if dt != DType::F64 {
                let _ = writeln!(c.out, "  {name} = \"stablehlo.convert\"({reshaped}) : (tensor<f64>) -> {ty}");
            }
        }
        Op::Iota { axis } => c.generic("iota", &format!("iota_dimension = {axis} : i64")),
        Op::Random { normal } => lower_random(&mut c, *normal),
        Op::Unary(_) => c.generic(node.op.name(), ""),
        Op::Binary(b @ (BinaryOp::Max | BinaryOp::Min)) if node.shape.dtype.is_float() => {
            // XLA's CPU maximum returns the other operand for a NaN; PyTorch propagates NaN.
            let (a, b_arg) = (c.args[0].clone(), c.args[1].clone());
            let pred = node.shape.with_dtype(DType::Pred).mlir();
            let _ = writeln!(c.out, "  {name}_m = \"stablehlo.{}\"({a}, {b_arg}) : ({ty}, {ty}) -> {ty}", node.op.name());
            for (suffix, x) in [("na", &a), ("nb", &b_arg)] {
                let _ = writeln!(
                    c.out,
                    "  {name}_{suffix} = \"stablehlo.compare\"({x}, {x}) {{comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>}} : ({ty}, {ty}) -> {pred}"
                );
            }
            let _ = writeln!(c.out, "  {name}_t = \"stablehlo.select\"({name}_nb, {b_arg}, {name}_m) : ({pred}, {ty}, {ty}) -> {ty}");
            let _ = writeln!(c.out, "  {name} = \"stablehlo.select\"({name}_na, {a}, {name}_t) : ({pred}, {ty}, {ty}) -> {ty}");
        }
        Op::Binary(_) => c.generic(node.op.name(), ""),
        Op::Compare(cmp) => {
            let dir = match cmp {
                CompareOp::Eq => "EQ",
                CompareOp::Ne => "NE",
                CompareOp::Lt => "LT",
                CompareOp::Le => "LE",
                CompareOp::Gt => "GT",
                CompareOp::Ge => "GE",
            };
            let in_dt = node.inputs[0].shape.dtype;
            let kind = if in_dt.is_float() {
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
        Op::Select => c.generic("select", ""),
        Op::Convert => c.generic("convert", ""),
        Op::Reduce { kind, axes } => {
            let dt = node.shape.dtype;
            let init = reduce_init(*kind, dt);
            let scalar = format!("tensor<{}>", dt.mlir_name());
            let in_ty = c.in_ty(0);
            let _ = writeln!(c.out, "  {name}_init = stablehlo.constant {init}");
            let _ = writeln!(
                c.out,
                "  {name} = \"stablehlo.reduce\"({}, {name}_init) ({{\n{}  }}) {{dimensions = {}}} : ({in_ty}, {scalar}) -> {ty}",
                c.args[0],
                combiner(*kind, dt),
                array(axes)
            );
        }
        Op::Reshape => c.generic("reshape", ""),
        Op::Transpose { perm } => c.generic("transpose", &format!("permutation = {}", array(perm))),
        Op::Broadcast { dims } => {
            c.generic("broadcast_in_dim", &format!("broadcast_dimensions = {}", array(dims)))
        }
        Op::Slice { start, limit, stride } => c.generic(
            "slice",
            &format!(
                "start_indices = {}, limit_indices = {}, strides = {}",
                array(start),
                array(limit),
                array(stride)
            ),
        ),
        Op::Concat { axis } => c.generic("concatenate", &format!("dimension = {axis} : i64")),
        Op::Pad { low, high, interior } => c.generic(
            "pad",
            &format!(
                "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
                array(low),
                array(high),
                array(interior)
            ),
        ),
        Op::Reverse { axes } => c.generic("reverse", &format!("dimensions = {}", array(axes))),
        Op::IndexSelect { axis } => lower_index_select(&mut c, *axis),
        Op::IndexAdd { axis } => lower_index_add(&mut c, *axis),
        Op::DotGeneral { lhs_batch, rhs_batch, lhs_contract, rhs_contract } => c.generic(
            "dot_general",
            &format!(
                "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {}, rhs_batching_dimensions = {}, lhs_contracting_dimensions = {}, rhs_contracting_dimensions = {}>",
                list(lhs_batch),
                list(rhs_batch),
                list(lhs_contract),
                list(rhs_contract)
            ),
        ),
        Op::Conv { stride, padding, lhs_dilation, rhs_dilation, groups } => {
            let pad: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
            let rank = node.shape.rank();
            let spatial: Vec<usize> = (2..rank).collect();
            let s = list(&spatial);
            c.generic(
                "convolution",
                &format!(
                    "window_strides = {}, padding = dense<[{}]> : tensor<{}x2xi64>, lhs_dilation = {}, rhs_dilation = {}, \
                     dimension_numbers = #stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 1, input_spatial_dimensions = {s}, \
                     kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0, kernel_spatial_dimensions = {s}, \
                     output_batch_dimension = 0, output_feature_dimension = 1, output_spatial_dimensions = {s}>, \
                     feature_group_count = {groups} : i64, batch_group_count = 1 : i64",
                    array(stride),
                    pad.join(", "),
                    spatial.len(),
                    array(lhs_dilation),
                    array(rhs_dilation)
                ),
            );
        }
        Op::ReduceWindow { kind, window, strides, padding } => {
            let dt = node.shape.dtype;
            let pad: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
            let sig = c.signature();
            let _ = writeln!(
                c.out,
                "  {name} = \"stablehlo.reduce_window\"({}, {}) ({{\n{}  }}) {{window_dimensions = {}, window_strides = {}, padding = dense<[{}]> : tensor<{}x2xi64>}} : {sig}",
                c.args[0],
                c.args[1],
                combiner(*kind, dt),
                array(window),
                array(strides),
                pad.join(", "),
                padding.len()
            );
        }
    }
}

/// The body of a reduction's region: how two values combine. Float max and min propagate NaN,
/// as PyTorch's do (XLA's CPU maximum would drop it).
fn combiner(kind: ReduceKind, dt: DType) -> String {
    let t = format!("tensor<{}>", dt.mlir_name());
    let op = reduce_op(kind, dt);
    let mut body = format!(
        "  ^bb0(%a: {t}, %b: {t}):\n    %m = \"stablehlo.{op}\"(%a, %b) : ({t}, {t}) -> {t}\n"
    );
    if dt.is_float() && kind != ReduceKind::Sum {
        let cmp = "{comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>}";
        body +=
            &format!("    %na = \"stablehlo.compare\"(%a, %a) {cmp} : ({t}, {t}) -> tensor<i1>\n");
        body +=
            &format!("    %nb = \"stablehlo.compare\"(%b, %b) {cmp} : ({t}, {t}) -> tensor<i1>\n");
        body += &format!(
            "    %t = \"stablehlo.select\"(%nb, %b, %m) : (tensor<i1>, {t}, {t}) -> {t}\n"
        );
        body += &format!(
            "    %r = \"stablehlo.select\"(%na, %a, %t) : (tensor<i1>, {t}, {t}) -> {t}\n"
        );
        body += &format!("    \"stablehlo.return\"(%r) : ({t}) -> ()\n");
    } else {
        body += &format!("    \"stablehlo.return\"(%m) : ({t}) -> ()\n");
    }
    body
}

fn reduce_op(kind: ReduceKind, dtype: DType) -> &'static str {
    match (kind, dtype) {
        (ReduceKind::Sum, DType::Pred) => "or",
        (ReduceKind::Sum, _) => "add",
        (ReduceKind::Max, _) => "maximum",
        (ReduceKind::Min, _) => "minimum",
    }
}

fn reduce_init(kind: ReduceKind, dtype: DType) -> String {
    match kind {
        ReduceKind::Sum => literal(dtype, 0.0),
        ReduceKind::Max => literal(dtype, f64::NEG_INFINITY),
        ReduceKind::Min => literal(dtype, f64::INFINITY),
    }
}

fn lower_index_select(c: &mut Ctx, axis: usize) {
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

fn lower_index_add(c: &mut Ctx, axis: usize) {
    let operand = &c.node.inputs[0].shape;
    let indices = &c.node.inputs[1].shape;
    let updates = &c.node.inputs[2].shape;
    let rank = operand.rank();
    let window_dims: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
    let name = c.name.clone();
    let idx_ty = Shape::new(indices.dtype, [indices.dims[0], 1]).mlir();
    let scalar = format!("tensor<{}>", operand.dtype.mlir_name());
    let _ = writeln!(
        c.out,
        "  {name}_i = \"stablehlo.reshape\"({}) : ({}) -> {idx_ty}",
        c.args[1],
        indices.mlir()
    );
    let sig = format!("({}, {idx_ty}, {}) -> {}", operand.mlir(), updates.mlir(), c.ty());
    let _ = writeln!(
        c.out,
        "  {name} = \"stablehlo.scatter\"({}, {name}_i, {}) ({{\n  ^bb0(%a: {scalar}, %b: {scalar}):\n    %s = stablehlo.add %a, %b : {scalar}\n    stablehlo.return %s : {scalar}\n  }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {}, inserted_window_dims = [{axis}], scatter_dims_to_operand_dims = [{axis}], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}} : {sig}",
        c.args[0],
        c.args[2],
        list(window_dims)
    );
}

/// Uniform [0, 1) or standard normal values from XLA's counter-based RNG, seeded by input 0
/// (an s64 scalar), so results depend only on the seed and run on the device.
fn lower_random(c: &mut Ctx, normal: bool) {
    let name = c.name.clone();
    let shape = &c.node.shape;
    let n = shape.element_count().max(1) as i64;
    // Box-Muller needs two uniforms per normal value.
    let draws = if normal { 2 * n } else { n };
    let seed = &c.args[0];
    let _ = writeln!(
        c.out,
        "  {name}_sd = \"stablehlo.convert\"({seed}) : (tensor<i64>) -> tensor<ui64>"
    );
    let _ = writeln!(c.out, "  {name}_st = \"stablehlo.broadcast_in_dim\"({name}_sd) {{broadcast_dimensions = array<i64>}} : (tensor<ui64>) -> tensor<2xui64>");
    let _ = writeln!(
        c.out,
        "  {name}_ns, {name}_bits = \"stablehlo.rng_bit_generator\"({name}_st) {{rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<{draws}xui32>)"
    );
    // Keep 23 random bits as a float's mantissa in [1, 2), then subtract 1.
    let u32ty = format!("tensor<{draws}xui32>");
    let f32ty = format!("tensor<{draws}xf32>");
    let _ = writeln!(c.out, "  {name}_c9 = stablehlo.constant dense<9> : {u32ty}");
    let _ = writeln!(c.out, "  {name}_one = stablehlo.constant dense<1065353216> : {u32ty}");
    let _ = writeln!(c.out, "  {name}_m = \"stablehlo.shift_right_logical\"({name}_bits, {name}_c9) : ({u32ty}, {u32ty}) -> {u32ty}");
    let _ = writeln!(
        c.out,
        "  {name}_o = \"stablehlo.or\"({name}_m, {name}_one) : ({u32ty}, {u32ty}) -> {u32ty}"
    );
    let _ = writeln!(
        c.out,
        "  {name}_f = \"stablehlo.bitcast_convert\"({name}_o) : ({u32ty}) -> {f32ty}"
    );
    let _ = writeln!(c.out, "  {name}_1f = stablehlo.constant dense<1.0> : {f32ty}");
    let _ = writeln!(
        c.out,
        "  {name}_u = \"stablehlo.subtract\"({name}_f, {name}_1f) : ({f32ty}, {f32ty}) -> {f32ty}"
    );
    let flat_ty = format!("tensor<{n}xf32>");
    let flat = if normal {
        // z = sqrt(-2 ln(1 - u1)) * cos(2 pi u2)
        let h = format!("tensor<{n}xf32>");
        let _ = writeln!(c.out, "  {name}_u1 = \"stablehlo.slice\"({name}_u) {{start_indices = array<i64: 0>, limit_indices = array<i64: {n}>, strides = array<i64: 1>}} : ({f32ty}) -> {h}");
        let _ = writeln!(c.out, "  {name}_u2 = \"stablehlo.slice\"({name}_u) {{start_indices = array<i64: {n}>, limit_indices = array<i64: {draws}>, strides = array<i64: 1>}} : ({f32ty}) -> {h}");
        let _ = writeln!(c.out, "  {name}_k1 = stablehlo.constant dense<1.0> : {h}");
        let _ = writeln!(c.out, "  {name}_km2 = stablehlo.constant dense<-2.0> : {h}");
        let _ = writeln!(c.out, "  {name}_k2pi = stablehlo.constant dense<6.28318530717958> : {h}");
        let _ = writeln!(
            c.out,
            "  {name}_a = \"stablehlo.subtract\"({name}_k1, {name}_u1) : ({h}, {h}) -> {h}"
        );
        let _ = writeln!(c.out, "  {name}_l = \"stablehlo.log\"({name}_a) : ({h}) -> {h}");
        let _ = writeln!(
            c.out,
            "  {name}_l2 = \"stablehlo.multiply\"({name}_l, {name}_km2) : ({h}, {h}) -> {h}"
        );
        let _ = writeln!(c.out, "  {name}_r = \"stablehlo.sqrt\"({name}_l2) : ({h}) -> {h}");
        let _ = writeln!(
            c.out,
            "  {name}_t = \"stablehlo.multiply\"({name}_u2, {name}_k2pi) : ({h}, {h}) -> {h}"
        );
        let _ = writeln!(c.out, "  {name}_cs = \"stablehlo.cosine\"({name}_t) : ({h}) -> {h}");
        let _ = writeln!(
            c.out,
            "  {name}_z = \"stablehlo.multiply\"({name}_r, {name}_cs) : ({h}, {h}) -> {h}"
        );
        format!("{name}_z")
    } else {
        format!("{name}_u")
    };
    let target = Shape::new(DType::F32, shape.dims.clone()).mlir();
    if shape.dtype == DType::F32 {
        let _ =
            writeln!(c.out, "  {name} = \"stablehlo.reshape\"({flat}) : ({flat_ty}) -> {target}");
    } else {
        let _ = writeln!(
            c.out,
            "  {name}_rs = \"stablehlo.reshape\"({flat}) : ({flat_ty}) -> {target}"
        );
        let _ = writeln!(
            c.out,
            "  {name} = \"stablehlo.convert\"({name}_rs) : ({target}) -> {}",
            shape.mlir()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_spell_infinities_per_width() {
        assert_eq!(literal(DType::F32, f64::NEG_INFINITY), "dense<0xFF800000> : tensor<f32>");
        assert_eq!(literal(DType::BF16, f64::INFINITY), "dense<0x7F80> : tensor<bf16>");
        assert_eq!(literal(DType::S32, f64::NEG_INFINITY), "dense<-2147483648> : tensor<i32>");
        assert_eq!(literal(DType::Pred, 0.0), "dense<false> : tensor<i1>");
        assert_eq!(literal(DType::F32, 0.5), "dense<5.0e-1> : tensor<f32>");
        assert_eq!(literal(DType::F64, 1.25), "dense<1.25e0> : tensor<f64>");
    }
}
