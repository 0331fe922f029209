//! Neural-network ops, composed from primitives (so autograd and lowering come for free).

use crate::dtype::DType;
use crate::error::Result;
use crate::ir::{Op, Recursion};
use crate::location::{scoped, SourceLocation};
use crate::tensor::Tensor;

use super::{not_differentiable, shape_error};

impl Tensor {
    #[track_caller]
    pub fn softmax(&self, axis: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || {
            let shifted = self.sub(&self.amax(&[axis], true)?.detach())?;
            let e = shifted.exp()?;
            e.div(&e.sum(&[axis], true)?)
        })
    }

    #[track_caller]
    pub fn log_softmax(&self, axis: i64) -> Result<Tensor> {
        let location = SourceLocation::caller();
        scoped(&location, || self.sub(&self.logsumexp(&[axis], true)?))
    }

    /// Mean cross entropy of `[N, C]` logits against `[N]` integer class labels.
    #[track_caller]
    pub fn cross_entropy(&self, labels: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() != 2 || labels.rank() != 1 || labels.dims()[0] != self.dims()[0] {
            return Err(shape_error(
                "cross_entropy",
                &location,
                format!(
                    "needs [N, C] logits and [N] labels, got {} and {}",
                    self.shape(),
                    labels.shape()
                ),
            ));
        }
        scoped(&location, || {
            let logp = self.log_softmax(-1)?;
            let target = labels.one_hot(self.dims()[1], self.dtype())?;
            logp.mul(&target)?.sum(&[-1], false)?.mean(&[], false)?.neg()
        })
    }

    /// Layer normalization over the last `normalized.len()` dims, then `* weight + bias`.
    #[track_caller]
    pub fn layer_norm(
        &self,
        normalized: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let k = normalized.len();
        if k > self.rank() || self.dims()[self.rank() - k..] != *normalized {
            return Err(shape_error(
                "layer_norm",
                &location,
                format!("{normalized:?} are not the last dims of {}", self.shape()),
            ));
        }
        scoped(&location, || {
            let axes: Vec<i64> = (self.rank() - k..self.rank()).map(|a| a as i64).collect();
            let mean = self.mean(&axes, true)?;
            let centered = self.sub(&mean)?;
            let var = centered.mul(&centered)?.mean(&axes, true)?;
            let mut y = centered.mul(&var.add_scalar(eps)?.rsqrt()?)?;
            if let Some(w) = weight {
                y = y.mul(w)?;
            }
            if let Some(b) = bias {
                y = y.add(b)?;
            }
            Ok(y)
        })
    }

    /// Rows of this `[V, D]` table at integer `indices` of any shape: `[.., D]`.
    #[track_caller]
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() != 2 {
            return Err(shape_error(
                "embedding",
                &location,
                format!("the table must be [V, D], not {}", self.shape()),
            ));
        }
        scoped(&location, || {
            let rows = self.index_select(0, &indices.flatten()?)?;
            let mut dims = indices.dims().to_vec();
            dims.push(self.dims()[1]);
            rows.reshape(&dims)
        })
    }

    /// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)`;
    /// the mask comes from XLA's RNG with `seed`.
    #[track_caller]
    pub fn dropout(&self, p: f64, seed: i64, training: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if !(0.0..1.0).contains(&p) {
            return Err(shape_error("dropout", &location, format!("p must be in [0, 1), not {p}")));
        }
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        scoped(&location, || {
            let keep = Tensor::rand(self.dims(), seed, DType::F32)?.gt_scalar(p)?;
            let zero = Tensor::scalar(0.0, self.dtype());
            Tensor::where_(&keep, &self.mul_scalar(1.0 / (1.0 - p))?, &zero)
        })
    }
}

impl Tensor {
    /// The CTC loss's alpha recursion over time, in one loop ([`Recursion::CtcAlphas`]):
    /// `self` is the log-probability of each place at each step, `[batch, time, places]`;
    /// `skip` (bool, `[batch, places]`) where an alpha may come from two places back, `first`
    /// (integer, `[batch]`) each sequence's first step, `start` (bool, `[batch, places]`) the
    /// places it starts in. Not differentiable: the loss's gradient is the beta recursion (this
    /// one on time and places reversed) and the alphas, as torch's backward computes it.
    #[track_caller]
    pub fn ctc_alphas(&self, skip: &Tensor, first: &Tensor, start: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let d = self.dims();
        let fits = self.rank() == 3
            && matches!(self.dtype(), DType::F32 | DType::F64)
            && skip.dtype() == DType::Pred
            && start.dtype() == DType::Pred
            && skip.dims() == [d[0], d[2]]
            && start.dims() == [d[0], d[2]]
            && matches!(first.dtype(), DType::S32 | DType::S64)
            && first.dims() == [d[0]];
        if !fits {
            return Err(shape_error(
                "ctc_alphas",
                &location,
                format!(
                    "needs float log-probabilities [batch, time, places], bool [batch, places] skips and starts, and integer [batch] first steps, got {}, {}, {} and {}",
                    self.shape(),
                    skip.shape(),
                    start.shape(),
                    first.shape()
                ),
            ));
        }
        not_differentiable("ctc_alphas", &[self], &location)?;
        let first = scoped(&location, || first.cast(DType::S32))?;
        let op = Op::Recursion(Recursion::CtcAlphas);
        Ok(Tensor::op(op, self.shape().clone(), &[self, skip, &first, start], location, None))
    }
}

impl Tensor {
    /// An LSTM layer's recursion over time in one loop ([`Recursion::LstmLoop`]): `self` the
    /// projected inputs with both biases `[time, batch, 4 hidden]`, `w_hh` `[4 hidden, hidden]`,
    /// `h0` and `c0` `[batch, hidden]`; each step's `h` and `c` side by side. Not differentiable
    /// here: [`Tensor::lstm_loop_backward`] is its gradient, for a caller's autograd to call.
    #[track_caller]
    pub fn lstm_loop(&self, w_hh: &Tensor, h0: &Tensor, c0: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        cell_check("lstm_loop", 4, self, w_hh, None, &[h0, c0], &location)?;
        let d = self.dims();
        let shape = crate::shape::Shape::new(self.dtype(), vec![d[0], d[1], d[2] / 2]);
        Ok(Tensor::op(
            Op::Recursion(Recursion::LstmLoop),
            shape,
            &[self, w_hh, h0, c0],
            location,
            None,
        ))
    }

    /// The gradient of [`Tensor::lstm_loop`] (`states` its result) for the gradients of every
    /// step's `h` and of the last `c`: the gates' gradients before their activations
    /// `[time, batch, 4 hidden]`, then one row of the initial state's (`h`'s, `c`'s, zeros).
    #[track_caller]
    pub fn lstm_loop_backward(
        &self,
        w_hh: &Tensor,
        h0: &Tensor,
        c0: &Tensor,
        states: &Tensor,
        d_hiddens: &Tensor,
        d_last_cell: &Tensor,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        cell_check("lstm_loop_backward", 4, self, w_hh, None, &[h0, c0], &location)?;
        let d = self.dims();
        let (t, b, h) = (d[0], d[1], d[2] / 4);
        let fits = states.dims() == [t, b, 2 * h]
            && d_hiddens.dims() == [t, b, h]
            && d_last_cell.dims() == [b, h]
            && [states, d_hiddens, d_last_cell].iter().all(|x| x.dtype() == self.dtype());
        if !fits {
            return Err(shape_error(
                "lstm_loop_backward",
                &location,
                format!(
                    "needs the loop's states [{t}, {b}, {}], the hidden states' gradients [{t}, {b}, {h}] and the last cell's [{b}, {h}], of {}, got {}, {} and {}",
                    2 * h,
                    self.dtype(),
                    states.shape(),
                    d_hiddens.shape(),
                    d_last_cell.shape()
                ),
            ));
        }
        let shape = crate::shape::Shape::new(self.dtype(), vec![t + 1, b, 4 * h]);
        let inputs = [self, w_hh, h0, c0, states, d_hiddens, d_last_cell];
        Ok(Tensor::op(Op::Recursion(Recursion::LstmLoopBackward), shape, &inputs, location, None))
    }
}

impl Tensor {
    /// A GRU layer's recursion over time in one loop ([`Recursion::GruLoop`]): `self` the
    /// projected inputs with their bias `[time, batch, 3 hidden]`, `w_hh` `[3 hidden, hidden]`,
    /// `b_hh` `[3 hidden]`, `h0` `[batch, hidden]`; each step's `h`. Not differentiable here:
    /// [`Tensor::gru_loop_backward`] is its gradient, for a caller's autograd to call.
    #[track_caller]
    pub fn gru_loop(&self, w_hh: &Tensor, b_hh: &Tensor, h0: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        cell_check("gru_loop", 3, self, w_hh, Some(b_hh), &[h0], &location)?;
        let d = self.dims();
        let shape = crate::shape::Shape::new(self.dtype(), vec![d[0], d[1], d[2] / 3]);
        Ok(Tensor::op(
            Op::Recursion(Recursion::GruLoop),
            shape,
            &[self, w_hh, b_hh, h0],
            location,
            None,
        ))
    }

    /// The gradient of [`Tensor::gru_loop`] (`hiddens` its result) for the gradients of every
    /// step's `h`: per step the reset, update and new pre-activations' and the recurrent new
    /// part's, `[time, batch, 4 hidden]`, then one row of the initial state's (and zeros).
    #[track_caller]
    pub fn gru_loop_backward(
        &self,
        w_hh: &Tensor,
        b_hh: &Tensor,
        h0: &Tensor,
        hiddens: &Tensor,
        d_hiddens: &Tensor,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        cell_check("gru_loop_backward", 3, self, w_hh, Some(b_hh), &[h0], &location)?;
        let d = self.dims();
        let (t, b, h) = (d[0], d[1], d[2] / 3);
        let fits =
            [hiddens, d_hiddens].iter().all(|x| x.dims() == [t, b, h] && x.dtype() == self.dtype());
        if !fits {
            return Err(shape_error(
                "gru_loop_backward",
                &location,
                format!(
                    "needs the loop's hidden states and their gradients, [{t}, {b}, {h}] of {}, got {} and {}",
                    self.dtype(),
                    hiddens.shape(),
                    d_hiddens.shape()
                ),
            ));
        }
        let shape = crate::shape::Shape::new(self.dtype(), vec![t + 1, b, 4 * h]);
        let inputs = [self, w_hh, b_hh, h0, hiddens, d_hiddens];
        Ok(Tensor::op(Op::Recursion(Recursion::GruLoopBackward), shape, &inputs, location, None))
    }
}

impl Tensor {
    /// An Elman RNN layer's recursion over time in one loop ([`Recursion::RnnLoop`]):
    /// `self` the projected inputs with both biases `[time, batch, hidden]`, `w_hh`
    /// `[hidden, hidden]`, `h0` `[batch, hidden]`; each step's `h` (tanh, or relu if `relu`).
    /// Not differentiable here: [`Tensor::rnn_loop_backward`] is its gradient.
    #[track_caller]
    pub fn rnn_loop(&self, w_hh: &Tensor, h0: &Tensor, relu: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        cell_check("rnn_loop", 1, self, w_hh, None, &[h0], &location)?;
        let op = Op::Recursion(Recursion::RnnLoop { relu });
        Ok(Tensor::op(op, self.shape().clone(), &[self, w_hh, h0], location, None))
    }

    /// The gradient of [`Tensor::rnn_loop`], `self` its result, for the gradients of every
    /// step's `h`: the pre-activations' at each step, then one row of the initial state's.
    #[track_caller]
    pub fn rnn_loop_backward(
        &self,
        w_hh: &Tensor,
        d_hiddens: &Tensor,
        relu: bool,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let d = self.dims();
        let fits = self.rank() == 3
            && self.dtype().is_float()
            && w_hh.dims() == [d[2], d[2]]
            && w_hh.dtype() == self.dtype()
            && d_hiddens.dims() == d
            && d_hiddens.dtype() == self.dtype();
        if !fits {
            return Err(shape_error(
                "rnn_loop_backward",
                &location,
                format!(
                    "needs hidden states [time, batch, hidden], a recurrent weight [hidden, hidden] and the states' gradients, all of one float dtype, got {}, {} and {}",
                    self.shape(),
                    w_hh.shape(),
                    d_hiddens.shape()
                ),
            ));
        }
        let shape = crate::shape::Shape::new(self.dtype(), vec![d[0] + 1, d[1], d[2]]);
        let op = Op::Recursion(Recursion::RnnLoopBackward { relu });
        Ok(Tensor::op(op, shape, &[self, w_hh, d_hiddens], location, None))
    }
}

/// The checks of a recurrent cell's loop, `gates` gates a hidden unit (4 for an LSTM, 3 for a
/// GRU, 1 for an RNN): projected inputs `[time, batch, gates hidden]`, a recurrent weight
/// `[gates hidden, hidden]`, its bias `[gates hidden]` where the loop takes one, and initial
/// states `[batch, hidden]`, all of one float dtype and none requiring the engine's gradient.
fn cell_check(
    op: &'static str,
    gates: i64,
    projected: &Tensor,
    w_hh: &Tensor,
    bias: Option<&Tensor>,
    initial: &[&Tensor],
    location: &SourceLocation,
) -> Result<()> {
    let d = projected.dims();
    let hidden = if projected.rank() == 3 { d[2] / gates } else { 0 };
    let fits = projected.rank() == 3
        && d[2] % gates == 0
        && projected.dtype().is_float()
        && w_hh.dims() == [d[2], hidden]
        && bias.is_none_or(|b| b.dims() == [d[2]])
        && initial.iter().all(|x| x.dims() == [d[1], hidden])
        && [w_hh].iter().chain(bias.iter()).chain(initial).all(|x| x.dtype() == projected.dtype());
    if !fits {
        let g = if gates == 1 { String::new() } else { format!("{gates} ") };
        let given: Vec<String> = [projected, w_hh]
            .into_iter()
            .chain(bias)
            .chain(initial.iter().copied())
            .map(|x| x.shape().to_string())
            .collect();
        return Err(shape_error(
            op,
            location,
            format!(
                "needs projected inputs [time, batch, {g}hidden], a recurrent weight [{g}hidden, hidden]{}, and initial states [batch, hidden], all of one float dtype, got {}",
                if bias.is_some() { format!(" and bias [{g}hidden]") } else { String::new() },
                given.join(", ")
            ),
        ));
    }
    let all = [projected, w_hh].into_iter().chain(bias).chain(initial.iter().copied());
    if let Some(x) = all.into_iter().find(|x| x.requires_grad()) {
        return Err(crate::error::Error::Autograd {
            message: format!(
                "{op} is not differentiable by xlaprof's autograd (its input {} requires a gradient): its gradient is the {}_backward op",
                x.shape(),
                op.trim_end_matches("_backward")
            ),
            location: location.clone(),
        });
    }
    Ok(())
}
