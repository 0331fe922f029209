//! Reductions: `reduce` over axes, and `reduce_window` (pooling), with their combiner regions.

use std::fmt::Write;

use super::{array, literal, Ctx};
use crate::dtype::DType;
use crate::ir::{Op, ReduceKind};
use crate::shape::Shape;

/// The dtype a sum accumulates in, where wider than its own:
/// - half precision (bf16, f16) in f32, rounded once, as torch's CPU and CUDA kernels and JAX
///   sum them: added up in bf16, a sum of 512 values was off by 8e-3 of its size where torch's
///   is off by 3e-3, and a bf16 model's means and norms with it;
/// - f32 in f64 on the CPU (`wide_sums`), over many values: XLA's CPU reduction adds a reduced
///   dimension that is not the innermost one element after element into one accumulator, so its
///   error grows with the count: a batch norm's channel mean over 8,192 values was off by 9e-7
///   where torch's cascade sum is off by 5e-8, and a ResNet's gradients by twice eager's error.
///   Accumulated in f64 and rounded once, the sum is as exact as torch's (GPUs sum in trees).
fn wide_sum(c: &Ctx, node: &crate::ir::Node, axes: &[usize]) -> Option<DType> {
    match node.shape.dtype {
        DType::BF16 | DType::F16 => Some(DType::F32),
        DType::F32
            if c.wide_sums && reduced_count(&node.inputs[0].shape, axes) >= WIDE_SUM_FROM =>
        {
            Some(DType::F64)
        }
        _ => None,
    }
}

pub(super) fn lower(c: &mut Ctx) {
    let node = c.node;
    let ty = c.ty();
    let name = c.name.clone();
    match &node.op {
        Op::Reduce { kind, axes }
            if c.partitioned && node.shape.dtype.is_float() && *kind != ReduceKind::Sum =>
        {
            // Split over devices, the reduction may become an all-reduce, whose combiner must be
            // a plain maximum or minimum: NaN is carried by a second reduction, an `or` of
            // `x != x`, and selected in.
            let dt = node.shape.dtype;
            let scalar = format!("tensor<{}>", dt.mlir_name());
            let in_ty = c.in_ty(0);
            let x = c.args[0].clone();
            let in_pred = Shape::new(DType::Pred, node.inputs[0].shape.dims.clone()).mlir();
            let pred = Shape::new(DType::Pred, node.shape.dims.clone()).mlir();
            let ne = "{comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>}";
            let out = &mut c.out;
            let _ = writeln!(out, "  {name}_init = stablehlo.constant {}", reduce_init(*kind, dt));
            let _ = writeln!(
                out,
                "  {name}_plain = \"stablehlo.reduce\"({x}, {name}_init) ({{\n{}  }}) {{dimensions = {}}} : ({in_ty}, {scalar}) -> {ty}",
                plain_combiner(reduce_op(*kind, dt), dt),
                array(axes)
            );
            let _ = writeln!(out, "  {name}_isnan = \"stablehlo.compare\"({x}, {x}) {ne} : ({in_ty}, {in_ty}) -> {in_pred}");
            let _ = writeln!(out, "  {name}_no = stablehlo.constant {}", literal(DType::Pred, 0.0));
            let _ = writeln!(
                out,
                "  {name}_anynan = \"stablehlo.reduce\"({name}_isnan, {name}_no) ({{\n{}  }}) {{dimensions = {}}} : ({in_pred}, tensor<i1>) -> {pred}",
                plain_combiner("or", DType::Pred),
                array(axes)
            );
            let _ = writeln!(out, "  {name}_nan1 = stablehlo.constant {}", literal(dt, f64::NAN));
            let _ = writeln!(
                out,
                "  {name}_nan = \"stablehlo.broadcast_in_dim\"({name}_nan1) {{broadcast_dimensions = array<i64>}} : ({scalar}) -> {ty}"
            );
            let _ = writeln!(
                out,
                "  {name} = \"stablehlo.select\"({name}_anynan, {name}_nan, {name}_plain) : ({pred}, {ty}, {ty}) -> {ty}"
            );
        }
        Op::Reduce { kind: ReduceKind::Sum, axes } if wide_sum(c, node, axes).is_some() => {
            let wide = wide_sum(c, node, axes).unwrap();
            let in_wide = Shape::new(wide, node.inputs[0].shape.dims.clone()).mlir();
            let out_wide = Shape::new(wide, node.shape.dims.clone()).mlir();
            let in_ty = c.in_ty(0);
            let x = c.args[0].clone();
            let _ = writeln!(
                c.out,
                "  {name}_wide = \"stablehlo.convert\"({x}) : ({in_ty}) -> {in_wide}"
            );
            let _ = writeln!(c.out, "  {name}_init = stablehlo.constant {}", literal(wide, 0.0));
            let _ = writeln!(
                c.out,
                "  {name}_sum = \"stablehlo.reduce\"({name}_wide, {name}_init) ({{\n{}  }}) {{dimensions = {}}} : ({in_wide}, tensor<{}>) -> {out_wide}",
                plain_combiner("add", wide),
                array(axes),
                wide.mlir_name()
            );
            let _ = writeln!(
                c.out,
                "  {name} = \"stablehlo.convert\"({name}_sum) : ({out_wide}) -> {ty}"
            );
        }
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
        _ => unreachable!("not a reduction: {:?}", node.op),
    }
}

/// The fewest values an f32 sum adds for it to accumulate in f64: below, its error stays near
/// f32's own rounding, and a softmax or a layer norm over a short row keeps f32's speed.
const WIDE_SUM_FROM: i64 = 1024;

/// How many values each result of reducing `axes` of `shape` adds.
fn reduced_count(shape: &Shape, axes: &[usize]) -> i64 {
    axes.iter().map(|&a| shape.dims[a]).product()
}

/// The body of a reduction's region: how two values combine. Float max and min propagate NaN,
/// as PyTorch's do (XLA's CPU maximum would drop it).
pub(super) fn combiner(kind: ReduceKind, dt: DType) -> String {
    let op = reduce_op(kind, dt);
    if !dt.is_float() || kind == ReduceKind::Sum {
        return plain_combiner(op, dt);
    }
    let t = format!("tensor<{}>", dt.mlir_name());
    let cmp = "{comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>}";
    let mut body = format!(
        "  ^bb0(%a: {t}, %b: {t}):\n    %m = \"stablehlo.{op}\"(%a, %b) : ({t}, {t}) -> {t}\n"
    );
    body += &format!("    %na = \"stablehlo.compare\"(%a, %a) {cmp} : ({t}, {t}) -> tensor<i1>\n");
    body += &format!("    %nb = \"stablehlo.compare\"(%b, %b) {cmp} : ({t}, {t}) -> tensor<i1>\n");
    body +=
        &format!("    %t = \"stablehlo.select\"(%nb, %b, %m) : (tensor<i1>, {t}, {t}) -> {t}\n");
    body +=
        &format!("    %r = \"stablehlo.select\"(%na, %a, %t) : (tensor<i1>, {t}, {t}) -> {t}\n");
    body += &format!("    \"stablehlo.return\"(%r) : ({t}) -> ()\n");
    body
}

/// `detect_anomaly()`'s marker of the values named in `xs` (with their shapes), as `{name}`, an
/// f32 scalar: `Σ (x - x)`, which is 0 when every value is finite and NaN as soon as one is not
/// (∞ - ∞ and NaN - NaN are NaN). Each `x - x` is taken in `x`'s own dtype (an f64 beyond f32's
/// range stays finite) and converted. With no values, 0.
///
/// What the check costs is kernels more than the values it reads: XLA splits a sum of a
/// concatenation back into one reduction per value, and on a CPU each is two kernels (`x - x`,
/// then its sum) of a few microseconds, two hundred for a small GPT-2 step (+5 % of it). So
/// the small values of each dtype are concatenated behind an optimization barrier, which XLA
/// keeps as one copy, and summed in one pass; a large value (a copy of it would cost more than
/// a kernel does) is summed where it is.
pub(super) fn not_finite_marker(out: &mut String, name: &str, xs: &[(String, &Shape)]) {
    const LARGE: i64 = 1 << 20;
    if xs.is_empty() {
        let _ = writeln!(out, "  {name} = stablehlo.constant {}", literal(DType::F32, 0.0));
        return;
    }
    // Every sum starts from this 0, and so does the sum of the sums.
    let zero = format!("{name}_zero");
    let _ = writeln!(out, "  {zero} = stablehlo.constant {}", literal(DType::F32, 0.0));
    let mut sums: Vec<String> = Vec::new();
    let mut small: Vec<(DType, Vec<(String, i64)>)> = Vec::new();
    for (k, (x, shape)) in xs.iter().enumerate() {
        let n: i64 = shape.dims.iter().product();
        let flat = format!("{name}_{k}");
        let ty = shape.mlir();
        let flat_ty = Shape::new(shape.dtype, vec![n]).mlir();
        let _ = writeln!(out, "  {flat} = \"stablehlo.reshape\"({x}) : ({ty}) -> {flat_ty}");
        if n >= LARGE {
            sums.push(sum_of_differences(out, &flat, shape.dtype, n, &zero));
            continue;
        }
        match small.iter_mut().find(|(dt, _)| *dt == shape.dtype) {
            Some((_, group)) => group.push((flat, n)),
            None => small.push((shape.dtype, vec![(flat, n)])),
        }
    }
    for (g, (dt, group)) in small.iter().enumerate() {
        let total: i64 = group.iter().map(|(_, n)| n).sum();
        let all_ty = Shape::new(*dt, vec![total]).mlir();
        let all = match group.as_slice() {
            [(flat, _)] => flat.clone(),
            _ => {
                let names: Vec<&str> = group.iter().map(|(v, _)| v.as_str()).collect();
                let types: Vec<String> =
                    group.iter().map(|(_, n)| Shape::new(*dt, vec![*n]).mlir()).collect();
                let joined = format!("{name}_g{g}_cat");
                let _ = writeln!(
                    out,
                    "  {joined} = \"stablehlo.concatenate\"({}) {{dimension = 0 : i64}} : ({}) -> {all_ty}",
                    names.join(", "),
                    types.join(", ")
                );
                let kept = format!("{name}_g{g}");
                let _ = writeln!(
                    out,
                    "  {kept} = \"stablehlo.optimization_barrier\"({joined}) : ({all_ty}) -> {all_ty}"
                );
                kept
            }
        };
        sums.push(sum_of_differences(out, &all, *dt, total, &zero));
    }
    // Σ of the parts (the last sum is named `name`).
    let mut total = zero;
    for (k, part) in sums.iter().enumerate() {
        let next = if k + 1 == sums.len() { name.to_string() } else { format!("{name}_t{k}") };
        let _ = writeln!(
            out,
            "  {next} = \"stablehlo.add\"({total}, {part}) : (tensor<f32>, tensor<f32>) -> tensor<f32>"
        );
        total = next;
    }
}

/// `Σ (x - x)` of the flat value `x` (`n` values of `dt`), as an f32 scalar named after `x`;
/// `zero` names an f32 0.
fn sum_of_differences(out: &mut String, x: &str, dt: DType, n: i64, zero: &str) -> String {
    let ty = Shape::new(dt, vec![n]).mlir();
    let f32_ty = Shape::new(DType::F32, vec![n]).mlir();
    let _ = writeln!(out, "  {x}_d = \"stablehlo.subtract\"({x}, {x}) : ({ty}, {ty}) -> {ty}");
    let _ = writeln!(out, "  {x}_c = \"stablehlo.convert\"({x}_d) : ({ty}) -> {f32_ty}");
    let _ = writeln!(
        out,
        "  {x}_s = \"stablehlo.reduce\"({x}_c, {zero}) ({{\n{}  }}) {{dimensions = array<i64: 0>}} : ({f32_ty}, tensor<f32>) -> tensor<f32>",
        plain_combiner("add", DType::F32)
    );
    format!("{x}_s")
}

/// A region that combines two values with `op` alone.
fn plain_combiner(op: &str, dt: DType) -> String {
    let t = format!("tensor<{}>", dt.mlir_name());
    format!(
        "  ^bb0(%a: {t}, %b: {t}):\n    %m = \"stablehlo.{op}\"(%a, %b) : ({t}, {t}) -> {t}\n    \"stablehlo.return\"(%m) : ({t}) -> ()\n"
    )
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
    literal(dtype, kind.identity(dtype))
}
