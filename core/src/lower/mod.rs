//! Lowering a graph to StableHLO text: the module and its parameters here, one file per op family
//! (`elementwise`, `reduce`, `movement`, `index`, `linalg`, `factor`, `random`, `sort`).
//!
//! Ops without regions are written in MLIR's generic form (`"stablehlo.op"(...) {attrs}`), which
//! does not change between StableHLO versions; reductions use the region form.

mod elementwise;
mod factor;
mod index;
mod linalg;
mod lines;
mod movement;
mod random;
mod recursion;
mod reduce;
mod sort;

use std::fmt::Write;
use std::sync::Arc;

use crate::dtype::DType;
use crate::ir::{Graph, Node, Op, OpKind};
use crate::spmd::{Mesh, Sharding};

/// The StableHLO module for `graph`: parameters are its device data in order, then its host
/// scalars, each a 0-d tensor of its own dtype (as JAX passes typed scalars: XLA then fuses them
/// like any operand, where slicing and converting one packed vector cost time in every fused
/// loop); results are its outputs in order.
///
/// `spmd`: for a graph partitioned over a mesh, the mesh and each output's sharding. The module
/// then declares the mesh (Shardy), and every parameter and result carries its sharding: device
/// data its own (or replicated), host scalars replicated.
///
/// `wide_sums`: f32 sums accumulate in f64 (on the CPU, see `reduce.rs`).
pub(crate) fn stablehlo(
    graph: &Graph,
    spmd: Option<(&Mesh, &[Arc<Sharding>])>,
    wide_sums: bool,
) -> String {
    let mut out = String::with_capacity(graph.order.len() * 96 + 256);
    let replicated = |rank: usize| -> String {
        let dims = vec!["{}"; rank].join(", ");
        format!(" {{sdy.sharding = #sdy.sharding<@mesh, [{dims}]>}}")
    };
    let mut params: Vec<String> = graph
        .order
        .iter()
        .zip(&graph.slot)
        .filter_map(|(n, slot)| match &n.op {
            Op::Data(data) => Some((n, slot, data)),
            _ => None,
        })
        .map(|(n, slot, data)| {
            let ty = n.shape.mlir();
            if let Some((mesh, _)) = spmd {
                // XLA may not alias buffers across a partitioned program's differing shardings:
                // partitioned programs donate nothing.
                let sharding = match data.sharding() {
                    Some(s) if *s.mesh == *mesh => format!(" {{sdy.sharding = {}}}", s.sdy()),
                    _ => replicated(n.shape.dims.len()),
                };
                return format!("%p{slot}: {ty}{sharding}");
            }
            let alias = graph.donated.iter().find(|(p, _)| *p == *slot as usize);
            match alias {
                Some((_, output)) => {
                    format!("%p{slot}: {ty} {{tf.aliasing_output = {output} : i32}}")
                }
                None => format!("%p{slot}: {ty}"),
            }
        })
        .collect();
    for (slot, (_, dtype)) in graph.scalars.iter().enumerate() {
        let sharding = if spmd.is_some() { replicated(0) } else { String::new() };
        params.push(format!("%s{slot}: tensor<{}>{sharding}", dtype.mlir_name()));
    }
    let mut results: Vec<String> =
        graph.outputs.iter().map(|&o| graph.order[o as usize].shape.mlir()).collect();
    if graph.check_finite {
        results.push("tensor<f32>".into()); // the marker, last (see below)
    }
    let annotated: Vec<String> = match spmd {
        Some((mesh, shardings)) => {
            let _ = writeln!(out, "{}", mesh.sdy());
            results
                .iter()
                .enumerate()
                .map(|(i, ty)| match shardings.get(i) {
                    Some(s) => format!("{ty} {{sdy.sharding = {}}}", s.sdy()),
                    None => format!("{ty}{}", replicated(0)),
                })
                .collect()
        }
        None => results.clone(),
    };
    let _ =
        writeln!(out, "func.func @main({}) -> ({}) {{", params.join(", "), annotated.join(", "));
    let name = |i: usize| -> String {
        match graph.order[i].op {
            Op::Data(_) => format!("%p{}", graph.slot[i]),
            // A host scalar is a parameter of its own dtype: nothing to compute.
            Op::Scalar(_) => format!("%s{}", graph.slot[i]),
            _ => format!("%v{i}"),
        }
    };
    let index_of = |n: &Node| n.visit_index.load(std::sync::atomic::Ordering::Relaxed) as usize;
    // How many nodes (and outputs) use each node: a dot only its transpose reads is folded into it.
    let mut users = vec![0u32; graph.order.len()];
    for node in &graph.order {
        for input in &node.inputs {
            users[index_of(input)] += 1;
        }
    }
    for &o in &graph.outputs {
        users[o as usize] += 1;
    }
    let partitioned = spmd.is_some();
    for (i, node) in graph.order.iter().enumerate() {
        let start = out.len();
        if let Some(line) = transposed_dot(node, &users, &index_of, &name) {
            let _ = writeln!(out, "  %v{i} = {line}");
        } else {
            let args: Vec<String> = node.inputs.iter().map(|n| name(index_of(n))).collect();
            let ctx =
                Ctx { out: &mut out, name: format!("%v{i}"), node, args, partitioned, wide_sums };
            lower_node(ctx);
        }
        // A partitioned program's ops carry the user's line, which XLA keeps in the metadata of
        // what it derives from them: the collectives it inserts are found at a line. One-line
        // ops only (regions span lines), which is nearly all of them.
        if spmd.is_some() && out[start..].matches('\n').count() == 1 {
            out.pop();
            let _ = writeln!(out, " loc(\"v{i}\"({}))", mlir_location(&node.location));
        }
    }
    let mut names: Vec<String> = graph.outputs.iter().map(|&o| name(o as usize)).collect();
    if graph.check_finite {
        // detect_anomaly(): one more output, the sum of every floating-point output's marker
        // (0 when all are finite), so the check costs no recorded op and no second graph.
        let floats: Vec<(String, &crate::shape::Shape)> = graph
            .outputs
            .iter()
            .map(|&o| (name(o as usize), &graph.order[o as usize].shape))
            .filter(|(_, shape)| shape.dtype.is_float())
            .collect();
        reduce::not_finite_marker(&mut out, "%finite", &floats);
        names.push("%finite".into());
    }
    let _ = writeln!(out, "  return {} : {}", names.join(", "), results.join(", "));
    out.push_str("}\n");
    out
}

/// `transpose(dot(a, b))` of 2-D operands, where nothing else reads the dot, as `dot(b, a)`: the
/// product in the transposed layout directly. A gradient of `x @ w.T` (a linear layer) is such a
/// transpose; left as is, XLA transposes and copies a weight-sized array per step, and, in a
/// partitioned program, after the gradient's all-reduce where it cannot fold it into the dot.
fn transposed_dot(
    node: &Node,
    users: &[u32],
    index_of: &impl Fn(&Node) -> usize,
    name: &impl Fn(usize) -> String,
) -> Option<String> {
    let Op::Transpose { perm } = &node.op else { return None };
    let dot = node.inputs.first()?;
    let Op::DotGeneral { lhs_batch, rhs_batch, lhs_contract, rhs_contract } = &dot.op else {
        return None;
    };
    let plain = perm.as_slice() == [1, 0]
        && lhs_batch.is_empty()
        && rhs_batch.is_empty()
        && lhs_contract.len() == 1
        && rhs_contract.len() == 1
        && dot.inputs.iter().all(|x| x.shape.dims.len() == 2)
        && users[index_of(dot)] == 1;
    if !plain {
        return None;
    }
    let (a, b) = (&dot.inputs[0], &dot.inputs[1]);
    Some(format!(
        "\"stablehlo.dot_general\"({}, {}) {{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>{}}} : ({}, {}) -> {}",
        name(index_of(b)),
        name(index_of(a)),
        rhs_contract[0],
        lhs_contract[0],
        linalg::f32_precision(a),
        b.shape.mlir(),
        a.shape.mlir(),
        node.shape.mlir()
    ))
}

/// `loc("file":line:0)`, MLIR's spelling of a source line.
fn mlir_location(location: &crate::location::SourceLocation) -> String {
    let file: String = location
        .file()
        .chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_control() => vec![],
            c => vec![c],
        })
        .collect();
    format!("\"{file}\":{}:0", location.line())
}

/// What lowering one node needs: where to write, the node's name and its operands' names.
struct Ctx<'a> {
    out: &'a mut String,
    name: String,
    node: &'a Node,
    args: Vec<String>,
    /// Whether the program is partitioned over a mesh (its reductions may cross devices).
    partitioned: bool,
    /// Whether f32 sums accumulate in f64.
    wide_sums: bool,
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
        self.generic_in("stablehlo", op, attrs);
    }
    /// [`Ctx::generic`] for an op of another dialect (`chlo`).
    fn generic_in(&mut self, dialect: &str, op: &str, attrs: &str) {
        let sig = self.signature();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{attrs}}}") };
        let _ = writeln!(
            self.out,
            "  {} = \"{dialect}.{op}\"({}){attrs} : {sig}",
            self.name,
            self.args.join(", ")
        );
    }
}

/// `array<i64: 1, 2>`, the attribute form of an index list.
fn array(values: impl IntoIterator<Item = impl ToString>) -> String {
    let v: Vec<String> = values.into_iter().map(|x| x.to_string()).collect();
    if v.is_empty() {
        "array<i64>".to_string()
    } else {
        format!("array<i64: {}>", v.join(", "))
    }
}

/// `[1, 2]`, the form dimension numbers take.
fn list(values: impl IntoIterator<Item = impl ToString>) -> String {
    let v: Vec<String> = values.into_iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// A scalar constant of `dtype` as an MLIR dense literal (a complex one's imaginary part zero).
pub(crate) fn literal(dtype: DType, value: f64) -> String {
    let text = if dtype.is_complex() {
        format!("({}, 0.0)", literal_value(dtype.real(), value))
    } else {
        literal_value(dtype, value)
    };
    format!("dense<{text}> : tensor<{}>", dtype.mlir_name())
}

/// One value of a real dtype as MLIR spells it (`true`, `-3`, `5.0e-1`, `0x7F800000`).
fn literal_value(dtype: DType, value: f64) -> String {
    match dtype {
        DType::Pred => (value != 0.0).to_string(),
        DType::S8 | DType::S16 | DType::S32 | DType::S64 | DType::U8 => {
            let (lo, hi) = match dtype {
                DType::S8 => (i8::MIN as f64, i8::MAX as f64),
                DType::S16 => (i16::MIN as f64, i16::MAX as f64),
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
    }
}
/// One node, by family.
fn lower_node(mut c: Ctx) {
    let kind = c.node.op.kind();
    if c.node.shape.element_count() == 0 && !matches!(kind, OpKind::Data | OpKind::Scalar) {
        // An empty result has no values to compute: some ops' StableHLO is not even valid with
        // an empty operand (a gather's slice of size 1 from a dim of 0).
        let dt = c.node.shape.dtype;
        let _ = writeln!(c.out, "  {}_z = stablehlo.constant {}", c.name, literal(dt, 0.0));
        let _ = writeln!(
            c.out,
            "  {} = \"stablehlo.broadcast_in_dim\"({}_z) {{broadcast_dimensions = array<i64>}} : (tensor<{}>) -> {}",
            c.name,
            c.name,
            dt.mlir_name(),
            c.ty()
        );
        return;
    }
    match kind {
        OpKind::Data | OpKind::Scalar => {} // parameters: referenced by name
        OpKind::Iota | OpKind::Random => random::lower(&mut c),
        OpKind::Elementwise | OpKind::Convert => elementwise::lower(&mut c),
        OpKind::Reduce | OpKind::ReduceWindow => reduce::lower(&mut c),
        OpKind::Movement => match c.node.op {
            Op::IndexSelect { .. } | Op::IndexAdd { .. } | Op::IndexReduce { .. } => {
                index::lower(&mut c)
            }
            _ => movement::lower(&mut c),
        },
        OpKind::DotGeneral | OpKind::Fft | OpKind::Conv => linalg::lower(&mut c),
        OpKind::Sort => sort::lower(&mut c),
        OpKind::Factorization => factor::lower(&mut c),
        OpKind::Recursion => recursion::lower(&mut c),
        OpKind::Shard => {
            let Op::Shard(s) = &c.node.op else { return };
            let line = format!(
                "  {} = sdy.sharding_constraint {} {} : {}",
                c.name,
                c.args[0],
                s.sdy_body(),
                c.ty()
            );
            let _ = writeln!(c.out, "{line}");
        }
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
        assert_eq!(literal(DType::C64, 0.5), "dense<(5.0e-1, 0.0)> : tensor<complex<f32>>");
        assert_eq!(literal(DType::S16, 1e6), "dense<32767> : tensor<i16>");
    }
}
