//! Generated values: `iota`, and random numbers from XLA's counter-based generator.

use std::fmt::Write;

use super::Ctx;
use crate::dtype::DType;
use crate::ir::Op;
use crate::shape::Shape;

pub(super) fn lower(c: &mut Ctx) {
    match c.node.op {
        Op::Iota { axis } => c.generic("iota", &format!("iota_dimension = {axis} : i64")),
        Op::Random { normal } => random(c, normal),
        _ => unreachable!("not a generated value: {:?}", c.node.op),
    }
}

/// Uniform [0, 1) or standard normal values from XLA's counter-based RNG, seeded by input 0
/// (an s64 scalar), so results depend only on the seed and run on the device.
fn random(c: &mut Ctx, normal: bool) {
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
