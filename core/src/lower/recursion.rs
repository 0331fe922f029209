//! Recursions as `while` loops (over time, or as many times as the data says): the program
//! holds one step however many steps run,
//! where an unrolled recursion (a step's ops recorded after the one before) holds them all, and
//! XLA's compile time grows faster than their count (a CTC loss over 40 steps compiled for
//! over a minute on a CPU, with XLA fusing each step into the next; an LSTM's backward, whose
//! cell-state gradient is elementwise from step to step, 50 s over 50 steps).

use super::lines::{lines, Lines};
use super::Ctx;
use crate::dtype::DType;
use crate::ir::{Op, Recursion};
use crate::shape::Shape;

pub(super) fn lower(c: &mut Ctx) {
    let Op::Recursion(r) = c.node.op else { unreachable!("not a recursion: {:?}", c.node.op) };
    match r {
        Recursion::CtcAlphas => ctc_alphas(c),
        Recursion::LstmLoop => lstm(c),
        Recursion::LstmLoopBackward => lstm_backward(c),
        Recursion::GruLoop => gru(c),
        Recursion::GruLoopBackward => gru_backward(c),
        Recursion::RnnLoop { relu } => rnn(c, relu),
        Recursion::RnnLoopBackward { relu } => rnn_backward(c, relu),
        Recursion::Squarings => squarings(c),
        Recursion::ThreeTerm { coefficients } => three_term(c, coefficients),
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
    let shifted = |w: &mut Lines, by: i64| {
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
    let kb = w.broadcast(k, &Shape::new(DType::S32, Vec::<i64>::new()), &rows_i, &[]);
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
    name_result(c, &name, &format!("{name}_a#1"), &all);
}

/// The node as `value` (one result of a loop), named by a reshape to its own type.
fn name_result(c: &mut Ctx, name: &str, value: &str, shape: &Shape) {
    let ty = shape.mlir();
    let _ = std::fmt::Write::write_fmt(
        c.out,
        format_args!("  {name} = \"stablehlo.reshape\"({value}) : ({ty}) -> {ty}\n"),
    );
}

/// Step `steps - 1 - k` of a loop run backwards from its counter `k`, and the step before it
/// (0 at the first step, where the caller takes the initial state instead).
fn step_back(w: &mut Lines, k: &str, steps: i64) -> (String, String) {
    let scalar = Shape::new(DType::S32, Vec::<i64>::new());
    let last = w.constant(DType::S32, (steps - 1) as f64);
    let t = w.binary("subtract", &last, k, &scalar);
    let one = w.constant(DType::S32, 1.0);
    let zero = w.constant(DType::S32, 0.0);
    let before = w.binary("subtract", &t, &one, &scalar);
    let before = w.binary("maximum", &before, &zero, &scalar);
    (t, before)
}

/// `initial` at step 0, `value` (of `shape`) after.
fn or_initial(w: &mut Lines, t: &str, initial: &str, value: &str, shape: &Shape) -> String {
    let scalar = Shape::new(DType::S32, Vec::<i64>::new());
    let zero = w.constant(DType::S32, 0.0);
    let first = w.compare(t, &zero, "EQ", &scalar);
    let first =
        w.broadcast(&first, &scalar.with_dtype(DType::Pred), &shape.with_dtype(DType::Pred), &[]);
    w.select(&first, initial, value, shape)
}

/// `d σ'(x)` from the sigmoid's output `y`: `d y (1 - y)`.
fn sigmoid_back(w: &mut Lines, d: &str, y: &str, shape: &Shape) -> String {
    let ones = w.splat(shape, 1.0);
    let rest = w.binary("subtract", &ones, y, shape);
    let slope = w.binary("multiply", y, &rest, shape);
    w.binary("multiply", d, &slope, shape)
}

/// Row `k` (a 0-d s32) of `x`, `[steps, batch, width]`, as `[batch, width]`.
fn row(w: &mut Lines, x: &str, all: &Shape, k: &str) -> String {
    let (b, width) = (all.dims[1], all.dims[2]);
    let one = Shape::new(all.dtype, vec![1, b, width]);
    let zero = w.constant(DType::S32, 0.0);
    let at = w.emit(
        &format!(
            "\"stablehlo.dynamic_slice\"({x}, {k}, {zero}, {zero}) {{slice_sizes = array<i64: 1, {b}, {width}>}}"
        ),
        &format!("({}, tensor<i32>, tensor<i32>, tensor<i32>) -> {}", all.mlir(), one.mlir()),
    );
    let flat = Shape::new(all.dtype, vec![b, width]);
    w.emit(&format!("\"stablehlo.reshape\"({at})"), &format!("({}) -> {}", one.mlir(), flat.mlir()))
}

/// `x`, `[steps, batch, width]`, with row `k` replaced by `v`, `[batch, width]`.
fn put_row(w: &mut Lines, x: &str, all: &Shape, v: &str, k: &str) -> String {
    let (b, width) = (all.dims[1], all.dims[2]);
    let one = Shape::new(all.dtype, vec![1, b, width]);
    let flat = Shape::new(all.dtype, vec![b, width]);
    let v3 = w.emit(
        &format!("\"stablehlo.reshape\"({v})"),
        &format!("({}) -> {}", flat.mlir(), one.mlir()),
    );
    let zero = w.constant(DType::S32, 0.0);
    w.emit(
        &format!("\"stablehlo.dynamic_update_slice\"({x}, {v3}, {k}, {zero}, {zero})"),
        &format!(
            "({}, {}, tensor<i32>, tensor<i32>, tensor<i32>) -> {}",
            all.mlir(),
            one.mlir(),
            all.mlir()
        ),
    )
}

/// Columns `from..to` of `x`, `[batch, width]`.
fn cols(w: &mut Lines, x: &str, shape: &Shape, from: i64, to: i64) -> String {
    let b = shape.dims[0];
    let out = Shape::new(shape.dtype, vec![b, to - from]);
    w.emit(
        &format!(
            "\"stablehlo.slice\"({x}) {{start_indices = array<i64: 0, {from}>, limit_indices = array<i64: {b}, {to}>, strides = array<i64: 1, 1>}}"
        ),
        &format!("({}) -> {}", shape.mlir(), out.mlir()),
    )
}

/// `[batch, width]` pieces side by side.
fn join(w: &mut Lines, parts: &[&str], shape: &Shape, times: i64) -> String {
    let out = Shape::new(shape.dtype, vec![shape.dims[0], shape.dims[1] * times]);
    let types = vec![shape.mlir(); parts.len()].join(", ");
    w.emit(
        &format!("\"stablehlo.concatenate\"({}) {{dimension = 1 : i64}}", parts.join(", ")),
        &format!("({types}) -> {}", out.mlir()),
    )
}

fn unary(w: &mut Lines, op: &str, x: &str, shape: &Shape) -> String {
    let ty = shape.mlir();
    w.emit(&format!("\"stablehlo.{op}\"({x})"), &format!("({ty}) -> {ty}"))
}

/// `a [batch, k] · b`: contracting `b`'s dim `b_dim` (of `b_shape`, two dims).
fn product(
    w: &mut Lines,
    a: &str,
    a_shape: &Shape,
    b: &str,
    b_shape: &Shape,
    b_dim: usize,
) -> String {
    let n = b_shape.dims[1 - b_dim];
    let out = Shape::new(a_shape.dtype, vec![a_shape.dims[0], n]);
    let precision = if a_shape.dtype == DType::F32 {
        ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]"
    } else {
        ""
    };
    w.emit(
        &format!(
            "\"stablehlo.dot_general\"({a}, {b}) {{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [{b_dim}]>{precision}}}"
        ),
        &format!("({}, {}) -> {}", a_shape.mlir(), b_shape.mlir(), out.mlir()),
    )
}

/// The LSTM cell's activations at a step: input, forget, cell and output gates, `[batch, hidden]`
/// each, from the step's projected input and the hidden state before it.
fn lstm_gates(
    w: &mut Lines,
    projected: &str,
    h: &str,
    w_hh: &str,
    shapes: &CellShapes,
) -> [String; 4] {
    let hw = product(w, h, &shapes.state, w_hh, &shapes.weight, 1);
    let pre = w.binary("add", projected, &hw, &shapes.gates);
    let hidden = shapes.state.dims[1];
    let piece = |w: &mut Lines, j: i64, op: &str| {
        let part = cols(w, &pre, &shapes.gates, j * hidden, (j + 1) * hidden);
        unary(w, op, &part, &shapes.state)
    };
    [piece(w, 0, "logistic"), piece(w, 1, "logistic"), piece(w, 2, "tanh"), piece(w, 3, "logistic")]
}

/// The shapes a gated cell's loops take, for `gates` gates a hidden unit (4 for an LSTM, 3 for
/// a GRU).
struct CellShapes {
    steps: i64,
    /// `[steps, batch, gates hidden]`, `[steps, batch, 2 hidden]` (an LSTM's h and c),
    /// `[steps, batch, hidden]`.
    projected: Shape,
    states: Shape,
    hiddens: Shape,
    /// `[gates hidden, hidden]`, `[gates hidden]`, `[batch, gates hidden]`, `[batch, hidden]`.
    weight: Shape,
    bias: Shape,
    gates: Shape,
    state: Shape,
}

impl CellShapes {
    fn of(projected: &Shape, gates: i64) -> CellShapes {
        let (t, b, g) = (projected.dims[0], projected.dims[1], projected.dims[2]);
        let (dt, h) = (projected.dtype, g / gates);
        CellShapes {
            steps: t,
            projected: projected.clone(),
            states: Shape::new(dt, vec![t, b, 2 * h]),
            hiddens: Shape::new(dt, vec![t, b, h]),
            weight: Shape::new(dt, vec![g, h]),
            bias: Shape::new(dt, vec![g]),
            gates: Shape::new(dt, vec![b, g]),
            state: Shape::new(dt, vec![b, h]),
        }
    }
}

/// `%{node}_l:6 = while`: (step, states, h, c, then the projected inputs and the weight).
fn lstm(c: &mut Ctx) {
    let s = CellShapes::of(&c.node.inputs[0].shape, 4);
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&s.states, 0.0);
    let carried = [
        (out0.as_str(), &s.states),
        (args[2].as_str(), &s.state),
        (args[3].as_str(), &s.state),
        (args[0].as_str(), &s.projected),
        (args[1].as_str(), &s.weight),
    ];
    let v = w.begin_while(&format!("{name}_l"), &carried, s.steps);
    let (k, out, h, cell, projected, w_hh) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    let here = row(&mut w, projected, &s.projected, k);
    let [i, f, g, o] = lstm_gates(&mut w, &here, h, w_hh, &s);
    let kept = w.binary("multiply", &f, cell, &s.state);
    let added = w.binary("multiply", &i, &g, &s.state);
    let cell1 = w.binary("add", &kept, &added, &s.state);
    let squashed = unary(&mut w, "tanh", &cell1, &s.state);
    let h1 = w.binary("multiply", &o, &squashed, &s.state);
    let both = join(&mut w, &[&h1, &cell1], &s.state, 2);
    let out1 = put_row(&mut w, out, &s.states, &both, k);
    let next = vec![out1, h1, cell1, projected.clone(), w_hh.clone()];
    w.end_while(k, &next, &[&s.states, &s.state, &s.state, &s.projected, &s.weight]);
    name_result(c, &name, &format!("{name}_l#1"), &s.states);
}

/// `%{node}_b:10 = while` from the last step back: (step, the gates' gradients, dh, dc, then
/// what it reads), and the initial state's gradients written after the gates' last row.
fn lstm_backward(c: &mut Ctx) {
    let s = CellShapes::of(&c.node.inputs[0].shape, 4);
    let all = c.node.shape.clone(); // [steps + 1, batch, 4 hidden]
    let hidden = s.state.dims[1];
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&all, 0.0);
    let zero_state = w.splat(&s.state, 0.0);
    let carried = [
        (out0.as_str(), &all),
        (zero_state.as_str(), &s.state),
        (args[6].as_str(), &s.state),
        (args[0].as_str(), &s.projected),
        (args[1].as_str(), &s.weight),
        (args[2].as_str(), &s.state),
        (args[3].as_str(), &s.state),
        (args[4].as_str(), &s.states),
        (args[5].as_str(), &s.hiddens),
    ];
    let v = w.begin_while(&format!("{name}_b"), &carried, s.steps);
    let (k, out, dh_next, dc_next) = (&v[0], &v[1], &v[2], &v[3]);
    let (projected, w_hh, h0, c0, states, dhs) = (&v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    // Step t = steps - 1 - k, and the state before it (the initial one at t = 0).
    let (t, before) = step_back(&mut w, k, s.steps);
    let prev_row = row(&mut w, states, &s.states, &before);
    let two = Shape::new(s.state.dtype, vec![s.state.dims[0], 2 * hidden]);
    let (h_prev, c_prev) = (
        cols(&mut w, &prev_row, &two, 0, hidden),
        cols(&mut w, &prev_row, &two, hidden, 2 * hidden),
    );
    let h_prev = or_initial(&mut w, &t, h0, &h_prev, &s.state);
    let c_prev = or_initial(&mut w, &t, c0, &c_prev, &s.state);
    let this_row = row(&mut w, states, &s.states, &t);
    let cell = cols(&mut w, &this_row, &two, hidden, 2 * hidden);
    let here = row(&mut w, projected, &s.projected, &t);
    let [i, f, g, o] = lstm_gates(&mut w, &here, &h_prev, w_hh, &s);
    // h = o tanh(c), c = f c_prev + i g, back through them.
    let st = &s.state;
    let dh_out = row(&mut w, dhs, &s.hiddens, &t);
    let dh = w.binary("add", &dh_out, dh_next, st);
    let squashed = unary(&mut w, "tanh", &cell, st);
    let d_o = w.binary("multiply", &dh, &squashed, st);
    let ones = w.splat(st, 1.0);
    let sq = w.binary("multiply", &squashed, &squashed, st);
    let slope = w.binary("subtract", &ones, &sq, st);
    let through = w.binary("multiply", &dh, &o, st);
    let through = w.binary("multiply", &through, &slope, st);
    let dc = w.binary("add", dc_next, &through, st);
    let d_i = w.binary("multiply", &dc, &g, st);
    let d_g = w.binary("multiply", &dc, &i, st);
    let d_f = w.binary("multiply", &dc, &c_prev, st);
    let dc_prev = w.binary("multiply", &dc, &f, st);
    // Through the activations: σ' = σ (1 - σ), tanh' = 1 - tanh².
    let gi = sigmoid_back(&mut w, &d_i, &i, st);
    let gf = sigmoid_back(&mut w, &d_f, &f, st);
    let g2 = w.binary("multiply", &g, &g, st);
    let g_slope = w.binary("subtract", &ones, &g2, st);
    let gg = w.binary("multiply", &d_g, &g_slope, st);
    let go = sigmoid_back(&mut w, &d_o, &o, st);
    let d_gates = join(&mut w, &[&gi, &gf, &gg, &go], st, 4);
    let dh_prev = product(&mut w, &d_gates, &s.gates, w_hh, &s.weight, 0);
    let out1 = put_row(&mut w, out, &all, &d_gates, &t);
    let same: Vec<String> =
        [projected, w_hh, h0, c0, states, dhs].iter().map(|x| x.to_string()).collect();
    let mut next = vec![out1, dh_prev, dc_prev];
    next.extend(same);
    let kinds = [
        &all,
        &s.state,
        &s.state,
        &s.projected,
        &s.weight,
        &s.state,
        &s.state,
        &s.states,
        &s.hiddens,
    ];
    w.end_while(k, &next, &kinds);
    // The initial state's gradients, in the row after the last step's: (dh0, dc0, 0, 0).
    let gates = format!("{name}_b#1");
    let dh0 = format!("{name}_b#2");
    let dc0 = format!("{name}_b#3");
    let zeros = w.splat(st, 0.0);
    let initial = join(&mut w, &[&dh0, &dc0, &zeros, &zeros], st, 4);
    let at = w.constant(DType::S32, s.steps as f64);
    let done = put_row(&mut w, &gates, &all, &initial, &at);
    name_result(c, &name, &done, &all);
}

/// The GRU cell's gates at a step, `[batch, hidden]` each: reset and update (after their
/// sigmoids), the new state's candidate (after its tanh), and the recurrent part of its
/// pre-activation, `h W_hn + b_hn`, which the reset gate scales.
fn gru_gates(
    w: &mut Lines,
    projected: &str,
    h: &str,
    w_hh: &str,
    b_hh: &str,
    s: &CellShapes,
) -> [String; 4] {
    let hw = product(w, h, &s.state, w_hh, &s.weight, 1);
    let bias = w.broadcast(b_hh, &s.bias, &s.gates, &[1]);
    let recurrent = w.binary("add", &hw, &bias, &s.gates);
    let hidden = s.state.dims[1];
    let part = |w: &mut Lines, x: &str, j: i64| cols(w, x, &s.gates, j * hidden, (j + 1) * hidden);
    let (i_r, i_z, i_n) = (part(w, projected, 0), part(w, projected, 1), part(w, projected, 2));
    let (h_r, h_z, h_n) = (part(w, &recurrent, 0), part(w, &recurrent, 1), part(w, &recurrent, 2));
    let r = w.binary("add", &i_r, &h_r, &s.state);
    let r = unary(w, "logistic", &r, &s.state);
    let z = w.binary("add", &i_z, &h_z, &s.state);
    let z = unary(w, "logistic", &z, &s.state);
    let scaled = w.binary("multiply", &r, &h_n, &s.state);
    let n = w.binary("add", &i_n, &scaled, &s.state);
    let n = unary(w, "tanh", &n, &s.state);
    [r, z, n, h_n]
}

/// `%{node}_g:6 = while`: (step, hidden states, h, then the projected inputs, weight and bias).
fn gru(c: &mut Ctx) {
    let s = CellShapes::of(&c.node.inputs[0].shape, 3);
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&s.hiddens, 0.0);
    let carried = [
        (out0.as_str(), &s.hiddens),
        (args[3].as_str(), &s.state),
        (args[0].as_str(), &s.projected),
        (args[1].as_str(), &s.weight),
        (args[2].as_str(), &s.bias),
    ];
    let v = w.begin_while(&format!("{name}_g"), &carried, s.steps);
    let (k, out, h, projected, w_hh, b_hh) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    let here = row(&mut w, projected, &s.projected, k);
    let [_, z, n, _] = gru_gates(&mut w, &here, h, w_hh, b_hh, &s);
    // h' = n + z (h - n), torch's (1 - z) n + z h.
    let toward = w.binary("subtract", h, &n, &s.state);
    let toward = w.binary("multiply", &z, &toward, &s.state);
    let h1 = w.binary("add", &n, &toward, &s.state);
    let out1 = put_row(&mut w, out, &s.hiddens, &h1, k);
    let next = vec![out1, h1, projected.clone(), w_hh.clone(), b_hh.clone()];
    w.end_while(k, &next, &[&s.hiddens, &s.state, &s.projected, &s.weight, &s.bias]);
    name_result(c, &name, &format!("{name}_g#1"), &s.hiddens);
}

/// `%{node}_gb:9 = while` from the last step back: (step, the gates' gradients, dh, then what it
/// reads), and the initial state's gradient written after the last row.
fn gru_backward(c: &mut Ctx) {
    let s = CellShapes::of(&c.node.inputs[0].shape, 3);
    let all = c.node.shape.clone(); // [steps + 1, batch, 4 hidden]
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&all, 0.0);
    let zero_state = w.splat(&s.state, 0.0);
    let carried = [
        (out0.as_str(), &all),
        (zero_state.as_str(), &s.state),
        (args[0].as_str(), &s.projected),
        (args[1].as_str(), &s.weight),
        (args[2].as_str(), &s.bias),
        (args[3].as_str(), &s.state),
        (args[4].as_str(), &s.hiddens),
        (args[5].as_str(), &s.hiddens),
    ];
    let v = w.begin_while(&format!("{name}_gb"), &carried, s.steps);
    let (k, out, dh_next) = (&v[0], &v[1], &v[2]);
    let (projected, w_hh, b_hh, h0, hs, dhs) = (&v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);
    let (t, before) = step_back(&mut w, k, s.steps);
    let h_prev = row(&mut w, hs, &s.hiddens, &before);
    let h_prev = or_initial(&mut w, &t, h0, &h_prev, &s.state);
    let here = row(&mut w, projected, &s.projected, &t);
    let [r, z, n, h_n] = gru_gates(&mut w, &here, &h_prev, w_hh, b_hh, &s);
    let st = &s.state;
    let dh_out = row(&mut w, dhs, &s.hiddens, &t);
    let dh = w.binary("add", &dh_out, dh_next, st);
    // h' = (1 - z) n + z h: back to n, z and h.
    let ones = w.splat(st, 1.0);
    let keep = w.binary("subtract", &ones, &z, st);
    let d_n = w.binary("multiply", &dh, &keep, st);
    let gap = w.binary("subtract", &h_prev, &n, st);
    let d_z = w.binary("multiply", &dh, &gap, st);
    let d_h_direct = w.binary("multiply", &dh, &z, st);
    // n = tanh(i_n + r h_n), r and z sigmoids.
    let n2 = w.binary("multiply", &n, &n, st);
    let n_slope = w.binary("subtract", &ones, &n2, st);
    let d_n_pre = w.binary("multiply", &d_n, &n_slope, st);
    let d_h_n = w.binary("multiply", &d_n_pre, &r, st);
    let d_r = w.binary("multiply", &d_n_pre, &h_n, st);
    let d_r_pre = sigmoid_back(&mut w, &d_r, &r, st);
    let d_z_pre = sigmoid_back(&mut w, &d_z, &z, st);
    let d_recurrent = join(&mut w, &[&d_r_pre, &d_z_pre, &d_h_n], st, 3);
    let through = product(&mut w, &d_recurrent, &s.gates, w_hh, &s.weight, 0);
    let dh_prev = w.binary("add", &d_h_direct, &through, st);
    let grads = join(&mut w, &[&d_r_pre, &d_z_pre, &d_n_pre, &d_h_n], st, 4);
    let out1 = put_row(&mut w, out, &all, &grads, &t);
    let same: Vec<String> =
        [projected, w_hh, b_hh, h0, hs, dhs].iter().map(|x| x.to_string()).collect();
    let mut next = vec![out1, dh_prev];
    next.extend(same);
    let kinds =
        [&all, &s.state, &s.projected, &s.weight, &s.bias, &s.state, &s.hiddens, &s.hiddens];
    w.end_while(k, &next, &kinds);
    let zeros = w.splat(st, 0.0);
    let dh0 = format!("{name}_gb#2");
    let initial = join(&mut w, &[&dh0, &zeros, &zeros, &zeros], st, 4);
    let at = w.constant(DType::S32, s.steps as f64);
    let done = put_row(&mut w, &format!("{name}_gb#1"), &all, &initial, &at);
    name_result(c, &name, &done, &all);
}

/// `%{node}_r:5 = while`: (step, hidden states, h, then the projected inputs and the weight).
fn rnn(c: &mut Ctx, relu: bool) {
    let all = c.node.shape.clone(); // [steps, batch, hidden]
    let (steps, st) = (all.dims[0], Shape::new(all.dtype, vec![all.dims[1], all.dims[2]]));
    let weight = Shape::new(all.dtype, vec![all.dims[2], all.dims[2]]);
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&all, 0.0);
    let carried = [
        (out0.as_str(), &all),
        (args[2].as_str(), &st),
        (args[0].as_str(), &all),
        (args[1].as_str(), &weight),
    ];
    let v = w.begin_while(&format!("{name}_r"), &carried, steps);
    let (k, out, h, projected, w_hh) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let here = row(&mut w, projected, &all, k);
    let hw = product(&mut w, h, &st, w_hh, &weight, 1);
    let pre = w.binary("add", &here, &hw, &st);
    let h1 = if relu {
        let zero = w.splat(&st, 0.0);
        w.binary("maximum", &pre, &zero, &st)
    } else {
        unary(&mut w, "tanh", &pre, &st)
    };
    let out1 = put_row(&mut w, out, &all, &h1, k);
    let next = vec![out1, h1, projected.clone(), w_hh.clone()];
    w.end_while(k, &next, &[&all, &st, &all, &weight]);
    name_result(c, &name, &format!("{name}_r#1"), &all);
}

/// `%{node}_rb:5 = while` from the last step back: (step, the pre-activations' gradients, dh,
/// then the hidden states and the weight); the initial state's gradient written after them.
fn rnn_backward(c: &mut Ctx, relu: bool) {
    let hs = c.node.inputs[0].shape.clone(); // [steps, batch, hidden]
    let all = c.node.shape.clone(); // [steps + 1, batch, hidden]
    let (steps, st) = (hs.dims[0], Shape::new(hs.dtype, vec![hs.dims[1], hs.dims[2]]));
    let weight = Shape::new(hs.dtype, vec![hs.dims[2], hs.dims[2]]);
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    let out0 = w.splat(&all, 0.0);
    let zero_state = w.splat(&st, 0.0);
    let carried = [
        (out0.as_str(), &all),
        (zero_state.as_str(), &st),
        (args[0].as_str(), &hs),
        (args[1].as_str(), &weight),
        (args[2].as_str(), &hs),
    ];
    let v = w.begin_while(&format!("{name}_rb"), &carried, steps);
    let (k, out, dh_next, hiddens, w_hh, dhs) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    let (t, _) = step_back(&mut w, k, steps);
    let h = row(&mut w, hiddens, &hs, &t);
    let dh_out = row(&mut w, dhs, &hs, &t);
    let dh = w.binary("add", &dh_out, dh_next, &st);
    // Through the nonlinearity, read off its output: relu' = (h > 0), tanh' = 1 - h².
    let slope = if relu {
        let zero = w.splat(&st, 0.0);
        let on = w.compare(&h, &zero, "GT", &st);
        let one = w.splat(&st, 1.0);
        w.select(&on, &one, &zero, &st)
    } else {
        let one = w.splat(&st, 1.0);
        let h2 = w.binary("multiply", &h, &h, &st);
        w.binary("subtract", &one, &h2, &st)
    };
    let d_pre = w.binary("multiply", &dh, &slope, &st);
    let dh_prev = product(&mut w, &d_pre, &st, w_hh, &weight, 0);
    let out1 = put_row(&mut w, out, &all, &d_pre, &t);
    let next = vec![out1, dh_prev, hiddens.clone(), w_hh.clone(), dhs.clone()];
    w.end_while(k, &next, &[&all, &st, &hs, &weight, &hs]);
    let at = w.constant(DType::S32, steps as f64);
    let done = put_row(&mut w, &format!("{name}_rb#1"), &all, &format!("{name}_rb#2"), &at);
    name_result(c, &name, &done, &all);
}

/// `%{node}_s:4 = while`: (count, matrices, their counts, the largest count). Each round squares
/// every matrix and keeps the square where the matrix's own count is not yet reached.
fn squarings(c: &mut Ctx) {
    let all = c.node.shape.clone(); // [..., n, n]
    let r = all.rank();
    let batch: Vec<usize> = (0..r - 2).collect();
    let counts = Shape::new(DType::S32, &all.dims[..r - 2]);
    let scalar = Shape::new(DType::S32, Vec::<i64>::new());
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    // (A single matrix's count is the largest; a reduction over no dims is not written.)
    let most =
        if r == 2 { args[1].clone() } else { w.reduce("maximum", &args[1], &counts, &batch) };
    let carried = [(args[0].as_str(), &all), (args[1].as_str(), &counts), (most.as_str(), &scalar)];
    let v = w.begin_while_below(&format!("{name}_s"), &carried, 2);
    let (k, m, times, most) = (&v[0], &v[1], &v[2], &v[3]);
    let list = |d: &[usize]| d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
    let precision = if all.dtype == DType::F32 {
        ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]"
    } else {
        ""
    };
    let square = w.emit(
        &format!(
            "\"stablehlo.dot_general\"({m}, {m}) {{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{b}], rhs_batching_dimensions = [{b}], lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>{precision}}}",
            r - 1,
            r - 2,
            b = list(&batch),
        ),
        &format!("({}, {}) -> {}", all.mlir(), all.mlir(), all.mlir()),
    );
    let kb = w.broadcast(k, &scalar, &counts, &[]);
    let due = w.compare(&kb, times, "LT", &counts);
    let due =
        w.broadcast(&due, &counts.with_dtype(DType::Pred), &all.with_dtype(DType::Pred), &batch);
    let next = w.select(&due, &square, m, &all);
    w.end_while(k, &[next, times.to_string(), most.to_string()], &[&all, &counts, &scalar]);
    name_result(c, &name, &format!("{name}_s#1"), &all);
}

/// `%{node}_w:6 = while`: (count, P_{m-2}, P_{m-1}, x, n, the bound), `m` the count plus 2.
fn three_term(c: &mut Ctx, k: [i8; 8]) {
    let shape = c.node.shape.clone();
    let r = shape.rank();
    let all: Vec<usize> = (0..r).collect();
    let ints = shape.with_dtype(DType::S32);
    let preds = shape.with_dtype(DType::Pred);
    let scalar = Shape::new(DType::S32, Vec::<i64>::new());
    let float = Shape::new(shape.dtype, Vec::<i64>::new());
    let (name, args) = (c.name.clone(), c.args.clone());
    let mut w = lines(c);
    // The largest of a tensor of s32 (itself when 0-d).
    let largest = |w: &mut Lines, x: &str| {
        if r == 0 {
            x.to_string()
        } else {
            w.reduce("maximum", x, &ints, &all)
        }
    };
    let most = largest(&mut w, &args[1]);
    let one = w.constant(DType::S32, 1.0);
    let bound = w.binary("subtract", &most, &one, &scalar);
    let p0 = w.splat(&shape, 1.0);
    let carried = [
        (p0.as_str(), &shape),
        (args[2].as_str(), &shape),
        (args[0].as_str(), &shape),
        (args[1].as_str(), &ints),
        (bound.as_str(), &scalar),
    ];
    let v = w.begin_while_below(&format!("{name}_w"), &carried, 4);
    let (count, p, q, x, n, bound) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    let two = w.constant(DType::S32, 2.0);
    let m = w.binary("add", count, &two, &scalar);
    let mf = w.emit(
        &format!("\"stablehlo.convert\"({m})"),
        &format!("(tensor<i32>) -> {}", float.mlir()),
    );
    // `i1 m + i0` over the whole shape.
    let coefficient = |w: &mut Lines, i1: i8, i0: i8| {
        let c0 = w.constant(shape.dtype, i0 as f64);
        let value = if i1 == 0 {
            c0
        } else {
            let c1 = w.constant(shape.dtype, i1 as f64);
            let scaled = w.binary("multiply", &c1, &mf, &float);
            w.binary("add", &scaled, &c0, &float)
        };
        w.broadcast(&value, &float, &shape, &[])
    };
    let a = coefficient(&mut w, k[0], k[1]);
    let b = coefficient(&mut w, k[2], k[3]);
    let before = coefficient(&mut w, k[4], k[5]);
    let divisor = coefficient(&mut w, k[6], k[7]);
    let ax = w.binary("multiply", &a, x, &shape);
    let factor = w.binary("add", &ax, &b, &shape);
    let grown = w.binary("multiply", &factor, q, &shape);
    let back = w.binary("multiply", &before, p, &shape);
    let next = w.binary("subtract", &grown, &back, &shape);
    let next = w.binary("divide", &next, &divisor, &shape);
    let mb = w.broadcast(&m, &scalar, &ints, &[]);
    let due = w.compare(&mb, n, "LE", &ints);
    let p1 = w.select(&due, q, p, &shape);
    let q1 = w.select(&due, &next, q, &shape);
    // Go on while an element has a step left and is not NaN.
    let m1 = w.binary("add", &m, &one, &scalar);
    let m1b = w.broadcast(&m1, &scalar, &ints, &[]);
    let left = w.compare(&m1b, n, "LE", &ints);
    let number = w.compare(&q1, &q1, "EQ", &shape);
    let going = w.binary("and", &left, &number, &preds);
    let going = w.emit(
        &format!("\"stablehlo.convert\"({going})"),
        &format!("({}) -> {}", preds.mlir(), ints.mlir()),
    );
    let any = largest(&mut w, &going);
    let zero = w.constant(DType::S32, 0.0);
    let on = w.compare(&any, &zero, "GT", &scalar);
    let bound1 = w.select(&on, bound, &zero, &scalar);
    let next_values = [p1, q1, x.to_string(), n.to_string(), bound1];
    w.end_while(count, &next_values, &[&shape, &shape, &shape, &ints, &scalar]);
    name_result(c, &name, &format!("{name}_w#2"), &shape);
}
