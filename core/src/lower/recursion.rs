//! Recursions over time as `while` loops: the program holds one step however many steps run,
//! where an unrolled recursion (a step's ops recorded after the one before) holds them all, and
//! XLA's compile time grows faster than their count (a CTC loss over 40 steps compiled for
//! over a minute on a CPU, with XLA fusing each step into the next).

use super::factor::lines;
use super::Ctx;
use crate::dtype::DType;
use crate::ir::Op;
use crate::shape::Shape;

pub(super) fn lower(c: &mut Ctx) {
    match c.node.op {
        Op::CtcAlphas => ctc_alphas(c),
        _ => unreachable!("not a recursion: {:?}", c.node.op),
    }
}

/// `%{node}_a:7 = while`: (step, alphas, the step's alphas, then the inputs, carried unchanged
/// because a region reads only what its loop carries).
fn ctc_alphas(c: &mut Ctx) {
    let all = c.node.shape.clone(); // [batch, time, places]
    let (b, t, l) = (all.dims[0], all.dims[1], all.dims[2]);
    let dt = all.dtype;
    let row = Shape::new(dt, vec![b, l]);
    let one_step = Shape::new(dt, vec![b, 1, l]);
    let pred = Shape::new(DType::Pred, vec![b, l]);
    let firsts = Shape::new(DType::S32, vec![b]);
    let rows_i = Shape::new(DType::S32, vec![b, l]);
    let scalar_i = Shape::new(DType::S32, Vec::<i64>::new());
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&all, f64::NEG_INFINITY);
    let prev0 = w.splat(&row, f64::NEG_INFINITY);
    let carried = [
        (out0.as_str(), &all),
        (prev0.as_str(), &row),
        (args[0].as_str(), &all),
        (args[1].as_str(), &pred),
        (args[2].as_str(), &firsts),
        (args[3].as_str(), &pred),
    ];
    let v = w.begin_while(&format!("{name}_a"), &carried, t);
    let (k, out, prev, emitted, skip, first, start) =
        (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
    let zero_i = w.constant(DType::S32, 0.0);
    let here = w.emit(
        &format!(
            "\"stablehlo.dynamic_slice\"({emitted}, {zero_i}, {k}, {zero_i}) {{slice_sizes = array<i64: {b}, 1, {l}>}}"
        ),
        &format!("({}, tensor<i32>, tensor<i32>, tensor<i32>) -> {}", all.mlir(), one_step.mlir()),
    );
    let e = w.emit(
        &format!("\"stablehlo.reshape\"({here})"),
        &format!("({}) -> {}", one_step.mlir(), row.mlir()),
    );
    let never = w.splat(&row, f64::NEG_INFINITY);
    let fill = w.constant(dt, f64::NEG_INFINITY);
    let shifted = |w: &mut super::factor::Lines, by: i64| {
        let wide = Shape::new(dt, vec![b, l + by]);
        let padded = w.emit(
            &format!(
                "\"stablehlo.pad\"({prev}, {fill}) {{edge_padding_low = array<i64: 0, {by}>, edge_padding_high = array<i64: 0, 0>, interior_padding = array<i64: 0, 0>}}"
            ),
            &format!("({}, tensor<{}>) -> {}", row.mlir(), dt.mlir_name(), wide.mlir()),
        );
        w.emit(
            &format!(
                "\"stablehlo.slice\"({padded}) {{start_indices = array<i64: 0, 0>, limit_indices = array<i64: {b}, {l}>, strides = array<i64: 1, 1>}}"
            ),
            &format!("({}) -> {}", wide.mlir(), row.mlir()),
        )
    };
    let one_back = shifted(&mut w, 1);
    let two_back = shifted(&mut w, 2);
    let two_back = w.select(skip, &two_back, &never, &row);
    // log(Σ exp) shifted by the largest term, or by 0 where every term is -inf (not NaN).
    let top = w.binary("maximum", prev, &one_back, &row);
    let top = w.binary("maximum", &top, &two_back, &row);
    let none = w.compare(&top, &never, "EQ", &row);
    let zero = w.splat(&row, 0.0);
    let top = w.select(&none, &zero, &top, &row);
    let mut total: Option<String> = None;
    for term in [prev.as_str(), one_back.as_str(), two_back.as_str()] {
        let d = w.binary("subtract", term, &top, &row);
        let ty = row.mlir();
        let x = w.emit(&format!("\"stablehlo.exponential\"({d})"), &format!("({ty}) -> {ty}"));
        total = Some(match total {
            None => x,
            Some(sum) => w.binary("add", &sum, &x, &row),
        });
    }
    let ty = row.mlir();
    let log = w.emit(&format!("\"stablehlo.log\"({})", total.unwrap()), &format!("({ty}) -> {ty}"));
    let stepped = w.binary("add", &log, &top, &row);
    let stepped = w.binary("add", &stepped, &e, &row);
    let started = w.select(start, &e, &never, &row);
    let kb = w.broadcast(k, &scalar_i, &rows_i, &[]);
    let fb = w.broadcast(first, &firsts, &rows_i, &[0]);
    let at_first = w.compare(&kb, &fb, "EQ", &rows_i);
    let after = w.compare(&kb, &fb, "GT", &rows_i);
    let next = w.select(&after, &stepped, &never, &row);
    let next = w.select(&at_first, &started, &next, &row);
    let next3 = w.emit(
        &format!("\"stablehlo.reshape\"({next})"),
        &format!("({}) -> {}", row.mlir(), one_step.mlir()),
    );
    let out1 = w.emit(
        &format!("\"stablehlo.dynamic_update_slice\"({out}, {next3}, {zero_i}, {k}, {zero_i})"),
        &format!(
            "({}, {}, tensor<i32>, tensor<i32>, tensor<i32>) -> {}",
            all.mlir(),
            one_step.mlir(),
            all.mlir()
        ),
    );
    let same: Vec<String> = [emitted, skip, first, start].iter().map(|s| s.to_string()).collect();
    let mut next_values = vec![out1, next];
    next_values.extend(same);
    w.end_while(k, &next_values, &[&all, &row, &all, &pred, &firsts, &pred]);
    let ty = all.mlir();
    let _ = std::fmt::Write::write_fmt(
        c.out,
        format_args!("  {name} = \"stablehlo.reshape\"({name}_a#1) : ({ty}) -> {ty}\n"),
    );
}
