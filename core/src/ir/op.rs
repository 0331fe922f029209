//! The closed set of primitive ops. Everything else (relu, softmax, layer_norm, ...) is composed
//! from these in `ops/`, so the lowering stays one function per family.

use std::hash::Hasher;
use std::sync::Arc;

use super::DeviceData;
use crate::shape::Shape;
use crate::spmd::Sharding;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tanh,
    Logistic,
    Not,
    Sign,
    Floor,
    /// Half to even, as PyTorch's `round`.
    Round,
    /// `log |Γ(x)|`, `ψ(x) = d/dx log Γ(x)` and the inverse error function: XLA's CHLO ops.
    Lgamma,
    Digamma,
    ErfInv,
    /// The error function and its complement (CHLO), `log(1 + x)` and `exp(x) - 1` (StableHLO):
    /// each exact where its composed form loses the small or the large values.
    Erf,
    Erfc,
    Log1p,
    Expm1,
    /// A complex value's real or imaginary part (a real result).
    Real,
    Imag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    /// Logical on bools; bitwise on integers (StableHLO's `and`, `or`, `xor` are both).
    And,
    Or,
    Xor,
    Rem,
    /// `atan2(a, b)`: the angle of the point (b, a).
    Atan2,
    /// `polygamma(n, x)`, the n-th derivative of ψ (CHLO): `n` is the first operand.
    Polygamma,
    /// The Hurwitz zeta function `ζ(x, q)` (CHLO).
    Zeta,
    /// The next representable value after `a` towards `b` (CHLO).
    NextAfter,
    /// The complex number `a + b i` (a complex result).
    Complex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    /// The direction as StableHLO names it (`EQ`, `LT`, ...).
    pub fn direction(self) -> &'static str {
        match self {
            CompareOp::Eq => "EQ",
            CompareOp::Ne => "NE",
            CompareOp::Lt => "LT",
            CompareOp::Le => "LE",
            CompareOp::Gt => "GT",
            CompareOp::Ge => "GE",
        }
    }
}

/// The shape of the taus of a QR of `a` (`Op::Qr`): its batch dims and `min(m, n)`.
pub fn qr_taus(a: &Shape) -> Shape {
    let r = a.rank();
    let mut dims = a.dims[..r - 2].to_vec();
    dims.push(a.dims[r - 2].min(a.dims[r - 1]));
    a.with_dims(dims)
}

/// Which discrete Fourier transform `Op::Fft` is, as StableHLO names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FftKind {
    /// Complex to complex, forward.
    Fft,
    /// Complex to complex, inverse (scaled by 1/n).
    Ifft,
    /// Real to complex: the last dim keeps n/2 + 1 values.
    Rfft,
    /// Complex to real, the inverse of `Rfft` (scaled by 1/n).
    Irfft,
}

impl FftKind {
    pub fn name(self) -> &'static str {
        match self {
            FftKind::Fft => "FFT",
            FftKind::Ifft => "IFFT",
            FftKind::Rfft => "RFFT",
            FftKind::Irfft => "IRFFT",
        }
    }
}

/// Which result of an LU factorization a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LuOutput {
    Factors,
    Pivots,
    Permutation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
}

impl ReduceKind {
    /// The value a reduction of this kind starts from in `dtype`: what no element changes (a
    /// maximum of bools starts at false, not at -inf cast to bool, which is true).
    pub fn identity(self, dtype: crate::DType) -> f64 {
        match (self, dtype) {
            (ReduceKind::Sum, _) => 0.0,
            (ReduceKind::Max, crate::DType::Pred) => 0.0,
            (ReduceKind::Min, crate::DType::Pred) => 1.0,
            (ReduceKind::Max, _) => f64::NEG_INFINITY,
            (ReduceKind::Min, _) => f64::INFINITY,
        }
    }
}

/// The recursions the engine runs as loops ([`Op::Recursion`]): over time, or a count the data
/// decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recursion {
    /// The CTC loss's alpha recursion in log space, over the time dim (1) of input 0, the
    /// log-probabilities `[batch, time, places]` of each place (an extended label: blanks between
    /// a target's labels) at each step. The node is the alphas, of the same shape: -inf before
    /// step `first[b]` (input 2, s64 `[batch]`), the log-probabilities of the places `start`
    /// (input 3, pred `[batch, places]`) at it, and after it `log(Σ exp(α[s], α[s-1], α[s-2]))`
    /// of the step before plus the step's own, the third term where `skip` (input 1, pred
    /// `[batch, places]`) allows. The beta recursion is the same on time and places reversed.
    CtcAlphas,
    /// An LSTM layer's recursion over time (dim 0): input 0 the projected inputs with both biases
    /// `[time, batch, 4 hidden]` (input, forget, cell, output gates), input 1 the recurrent weight
    /// `[4 hidden, hidden]`, inputs 2 and 3 the initial `h` and `c`, `[batch, hidden]`. The node
    /// is each step's `h` and `c` side by side, `[time, batch, 2 hidden]`.
    LstmLoop,
    /// Its gradient, from the last step back: inputs 0 to 3 as [`Recursion::LstmLoop`]'s, input 4 its
    /// result, input 5 the gradient of every step's `h` `[time, batch, hidden]`, input 6 that of
    /// the last `c`. The node is the gradient of each step's gates before their activations
    /// (the projected inputs' gradient), `[time + 1, batch, 4 hidden]`, its last row the initial
    /// state's: `h`'s, `c`'s, then zeros.
    LstmLoopBackward,
    /// A GRU layer's recursion over time: input 0 the projected inputs with their bias
    /// `[time, batch, 3 hidden]` (reset, update, new), input 1 the recurrent weight
    /// `[3 hidden, hidden]`, input 2 its bias `[3 hidden]`, input 3 the initial `h`. The node is
    /// each step's `h`, `[time, batch, hidden]`.
    GruLoop,
    /// Its gradient, from the last step back: inputs 0 to 3 as [`Recursion::GruLoop`]'s, input 4 its
    /// result, input 5 the gradient of every step's `h`. The node is `[time + 1, batch,
    /// 4 hidden]`: at each step the gradients of the reset and update gates' and the new state's
    /// pre-activations and of the recurrent part the reset gate scales (`h W_hn + b_hn`); its last
    /// row the initial state's, then zeros.
    GruLoopBackward,
    /// An Elman RNN layer's recursion over time: input 0 the projected inputs with both biases
    /// `[time, batch, hidden]`, input 1 the recurrent weight `[hidden, hidden]`, input 2 the
    /// initial `h`; `h' = tanh(x + h W^T)` (or `relu`). The node is each step's `h`.
    RnnLoop { relu: bool },
    /// Its gradient, from the last step back: input 0 the loop's result, input 1 the recurrent
    /// weight, input 2 the gradient of every step's `h`. The node is `[time + 1, batch, hidden]`:
    /// the pre-activations' gradients at each step, then the initial state's.
    RnnLoopBackward { relu: bool },
    /// Each matrix of input 0 (`[..., n, n]`) squared as many times as input 1 (s32, one count
    /// per matrix, `[...]`) says: the squaring half of a matrix exponential's scaling and
    /// squaring. The loop runs the largest count; a matrix whose own count is spent stays as
    /// it is.
    Squarings,
    /// A three-term recurrence per element, the orthogonal polynomials': from `P_0 = 1` and
    /// `P_1` (input 2), `P_m = ((a1 m + a0) x + (b1 m + b0)) P_{m-1} - (c1 m + c0) P_{m-2}`, all
    /// over `d1 m + d0`, for `m = 2 ..= n`: input 0 is `x`, input 1 each element's `n` (s32, of
    /// `x`'s shape), `coefficients` are `[a1, a0, b1, b0, c1, c0, d1, d0]`. The node is `P_n`
    /// (`P_1` where `n <= 1`). The loop runs the largest `n`, or stops once every element still
    /// going is NaN (as torch's kernels stop).
    ThreeTerm { coefficients: [i8; 8] },
}

impl Recursion {
    pub fn name(self) -> &'static str {
        match self {
            Recursion::CtcAlphas => "ctc_alphas",
            Recursion::LstmLoop => "lstm_loop",
            Recursion::LstmLoopBackward => "lstm_loop_backward",
            Recursion::GruLoop => "gru_loop",
            Recursion::GruLoopBackward => "gru_loop_backward",
            Recursion::RnnLoop { .. } => "rnn_loop",
            Recursion::RnnLoopBackward { .. } => "rnn_loop_backward",
            Recursion::Squarings => "squarings",
            Recursion::ThreeTerm { .. } => "three_term_recurrence",
        }
    }
}

#[derive(Clone)]
pub enum Op {
    // ---- leaves: graph inputs ----
    /// Device data (one buffer, or one per partition of a mesh): a parameter of the compiled
    /// program. Its sharding, if any, is structure.
    Data(Arc<DeviceData>),
    /// A host scalar. Passed to the program as an input, never baked in, so a value that changes
    /// from step to step (a learning rate, a step count) does not recompile.
    Scalar(f64),
    /// `0, 1, 2, ...` along `axis` of the node's shape.
    Iota {
        axis: usize,
    },
    /// Random bits turned into uniform [0, 1) or standard normal values; input 0 is the s64 seed.
    Random {
        normal: bool,
    },

    // ---- elementwise (inputs already broadcast to the node's shape) ----
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    /// `select(pred, on_true, on_false)`
    Select,
    /// Element type conversion to the node's dtype.
    Convert,

    // ---- reductions ----
    /// Reduces `axes` away (keepdim is a reshape on top).
    Reduce {
        kind: ReduceKind,
        axes: Vec<usize>,
    },

    // ---- movement ----
    Reshape,
    Transpose {
        perm: Vec<usize>,
    },
    /// `broadcast_in_dim`: operand dim `i` becomes output dim `dims[i]`.
    Broadcast {
        dims: Vec<usize>,
    },
    Slice {
        start: Vec<i64>,
        limit: Vec<i64>,
        stride: Vec<i64>,
    },
    Concat {
        axis: usize,
    },
    /// Input 1 is the scalar padding value.
    Pad {
        low: Vec<i64>,
        high: Vec<i64>,
        interior: Vec<i64>,
    },
    Reverse {
        axes: Vec<usize>,
    },
    /// Selects slices of input 0 along `axis` by the s64/s32 indices in input 1 (index_select).
    IndexSelect {
        axis: usize,
    },
    /// Adds the rows of input 2 into a copy of input 0 at the indices of input 1 along `axis`.
    IndexAdd {
        axis: usize,
    },
    /// Like `IndexAdd`, combining by `kind` (max or min) instead of adding.
    IndexReduce {
        axis: usize,
        kind: ReduceKind,
    },

    // ---- linear algebra ----
    DotGeneral {
        lhs_batch: Vec<usize>,
        rhs_batch: Vec<usize>,
        lhs_contract: Vec<usize>,
        rhs_contract: Vec<usize>,
    },
    /// The discrete Fourier transform over the last `lengths.len()` dims (1 to 3), of those
    /// lengths (for `Irfft`, the real result's).
    Fft {
        kind: FftKind,
        lengths: Vec<i64>,
    },
    /// NCHW input, OIHW kernel.
    Conv {
        stride: Vec<i64>,
        padding: Vec<(i64, i64)>,
        lhs_dilation: Vec<i64>,
        rhs_dilation: Vec<i64>,
        /// Feature groups: each group of input features convolved with its own kernels.
        groups: i64,
        /// Batch groups (a grouped convolution's kernel gradient): each group of the input's
        /// batch convolved with its own group of output features.
        batch_groups: i64,
    },
    /// Windowed reduction over NCHW spatial dims (pooling); input 1 is the scalar init value.
    ReduceWindow {
        kind: ReduceKind,
        window: Vec<i64>,
        strides: Vec<i64>,
        padding: Vec<(i64, i64)>,
    },
    /// A stable sort along `axis` (NaN last ascending, first descending, as PyTorch's): the
    /// node is the sorted values, or with `indices` the s64 positions they came from.
    Sort {
        axis: usize,
        descending: bool,
        indices: bool,
    },

    // ---- factorizations: of the last two dims, the leading ones a batch ----
    /// The Cholesky factor of symmetric positive-definite matrices (the other triangle zero).
    Cholesky {
        lower: bool,
    },
    /// Solves `op(a) x = b` (left side) or `x op(a) = b` for triangular `a` (input 0), `b`
    /// input 1; `op` transposes `a` if `transpose`.
    TriangularSolve {
        left_side: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose: bool,
    },
    /// Householder QR in LAPACK's compact form (`geqrf`): R on and above the diagonal, the
    /// reflectors below it; the node is that matrix, or with `taus` the reflectors' scales.
    Qr {
        taus: bool,
    },
    /// The product of the Householder reflectors in input 0 with the scales in input 1
    /// (LAPACK's `orgqr`): the first columns of Q.
    HouseholderProduct,
    /// The eigen-decomposition of symmetric matrices, read from the `lower` (or upper)
    /// triangle: the node is the eigenvalues in ascending order, or with `vectors` the
    /// eigenvectors as columns.
    Eigh {
        lower: bool,
        vectors: bool,
    },
    /// LU with partial pivoting, as LAPACK's `getrf`: the node is L and U in one matrix (L's
    /// unit diagonal implied), or the s32 pivots (1-based rows swapped at each step), or the
    /// s32 permutation those swaps make (row `i` of the product came from row `perm[i]`).
    Lu {
        output: LuOutput,
    },
    /// The permutation of `rows` rows that LAPACK's 1-based pivots (input 0) make.
    PivotsToPermutation {
        rows: usize,
    },

    // ---- recursions over time ----
    /// A recursion over time as one `while` loop in the program, so a graph holds one step
    /// however many steps run (unrolled, XLA's compile grew with their square).
    Recursion(Recursion),

    // ---- many devices ----
    /// The input's value, to be split over a mesh as the sharding says (`mark_sharding` on a
    /// pending tensor): a constraint for XLA's partitioner, no computation.
    Shard(Arc<Sharding>),
}

/// Ops by family, for histograms and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Data,
    Scalar,
    Iota,
    Random,
    Elementwise,
    Convert,
    Reduce,
    Movement,
    DotGeneral,
    Fft,
    Conv,
    ReduceWindow,
    Sort,
    Factorization,
    Recursion,
    Shard,
}

impl Op {
    /// A short name, as StableHLO spells it where there is one (`add`, `dot_general`): the
    /// lowering writes elementwise ops by this name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Data(_) => "parameter",
            Op::Scalar(_) => "scalar",
            Op::Iota { .. } => "iota",
            Op::Random { normal: false } => "rand",
            Op::Random { normal: true } => "randn",
            Op::Unary(u) => match u {
                UnaryOp::Neg => "negate",
                UnaryOp::Abs => "abs",
                UnaryOp::Exp => "exponential",
                UnaryOp::Log => "log",
                UnaryOp::Sqrt => "sqrt",
                UnaryOp::Rsqrt => "rsqrt",
                UnaryOp::Sin => "sine",
                UnaryOp::Cos => "cosine",
                UnaryOp::Tanh => "tanh",
                UnaryOp::Logistic => "logistic",
                UnaryOp::Not => "not",
                UnaryOp::Sign => "sign",
                UnaryOp::Floor => "floor",
                UnaryOp::Round => "round_nearest_even",
                UnaryOp::Lgamma => "lgamma",
                UnaryOp::Digamma => "digamma",
                UnaryOp::ErfInv => "erf_inv",
                UnaryOp::Erf => "erf",
                UnaryOp::Erfc => "erfc",
                UnaryOp::Log1p => "log_plus_one",
                UnaryOp::Expm1 => "exponential_minus_one",
                UnaryOp::Real => "real",
                UnaryOp::Imag => "imag",
            },
            Op::Binary(b) => match b {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "subtract",
                BinaryOp::Mul => "multiply",
                BinaryOp::Div => "divide",
                BinaryOp::Pow => "power",
                BinaryOp::Max => "maximum",
                BinaryOp::Min => "minimum",
                BinaryOp::And => "and",
                BinaryOp::Or => "or",
                BinaryOp::Xor => "xor",
                BinaryOp::Rem => "remainder",
                BinaryOp::Atan2 => "atan2",
                BinaryOp::Polygamma => "polygamma",
                BinaryOp::Zeta => "zeta",
                BinaryOp::NextAfter => "next_after",
                BinaryOp::Complex => "complex",
            },
            Op::Compare(_) => "compare",
            Op::Select => "select",
            Op::Convert => "convert",
            Op::Reduce { kind: ReduceKind::Sum, .. } => "reduce_sum",
            Op::Reduce { kind: ReduceKind::Max, .. } => "reduce_max",
            Op::Reduce { kind: ReduceKind::Min, .. } => "reduce_min",
            Op::Reshape => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Broadcast { .. } => "broadcast_in_dim",
            Op::Slice { .. } => "slice",
            Op::Concat { .. } => "concatenate",
            Op::Pad { .. } => "pad",
            Op::Reverse { .. } => "reverse",
            Op::IndexSelect { .. } => "index_select",
            Op::IndexAdd { .. } => "index_add",
            Op::IndexReduce { kind: ReduceKind::Min, .. } => "index_reduce_min",
            Op::IndexReduce { .. } => "index_reduce_max",
            Op::DotGeneral { .. } => "dot_general",
            Op::Fft { .. } => "fft",
            Op::Conv { .. } => "convolution",
            Op::ReduceWindow { .. } => "reduce_window",
            Op::Sort { .. } => "sort",
            Op::Cholesky { .. } => "cholesky",
            Op::TriangularSolve { .. } => "triangular_solve",
            Op::Qr { .. } => "qr",
            Op::HouseholderProduct => "householder_product",
            Op::Eigh { .. } => "eigh",
            Op::Lu { .. } => "lu",
            Op::PivotsToPermutation { .. } => "lu_pivots_to_permutation",
            Op::Recursion(r) => r.name(),
            Op::Shard(_) => "sharding_constraint",
        }
    }

    pub fn kind(&self) -> OpKind {
        match self {
            Op::Data(_) => OpKind::Data,
            Op::Scalar(_) => OpKind::Scalar,
            Op::Iota { .. } => OpKind::Iota,
            Op::Random { .. } => OpKind::Random,
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select => OpKind::Elementwise,
            Op::Convert => OpKind::Convert,
            Op::Reduce { .. } => OpKind::Reduce,
            Op::Reshape
            | Op::Transpose { .. }
            | Op::Broadcast { .. }
            | Op::Slice { .. }
            | Op::Concat { .. }
            | Op::Pad { .. }
            | Op::Reverse { .. }
            | Op::IndexSelect { .. }
            | Op::IndexAdd { .. }
            | Op::IndexReduce { .. } => OpKind::Movement,
            Op::DotGeneral { .. } => OpKind::DotGeneral,
            Op::Fft { .. } => OpKind::Fft,
            Op::Conv { .. } => OpKind::Conv,
            Op::ReduceWindow { .. } => OpKind::ReduceWindow,
            Op::Sort { .. } => OpKind::Sort,
            Op::Cholesky { .. }
            | Op::TriangularSolve { .. }
            | Op::Qr { .. }
            | Op::HouseholderProduct
            | Op::Eigh { .. }
            | Op::Lu { .. }
            | Op::PivotsToPermutation { .. } => OpKind::Factorization,
            Op::Recursion(_) => OpKind::Recursion,
            Op::Shard(_) => OpKind::Shard,
        }
    }

    /// Feeds the op's structure (never data: not a buffer, not a scalar's value) to a hasher.
    pub(crate) fn hash_structure(&self, h: &mut impl Hasher) {
        use std::hash::Hash;
        std::mem::discriminant(self).hash(h);
        match self {
            // A replicated array is structurally an unsharded one: both are whole on every
            // device a program runs on (so a parameter that comes back replicated from a
            // partitioned step does not recompile the next).
            Op::Data(data) => {
                if let Some(s) = data.sharding().filter(|s| !s.is_replicated()) {
                    s.hash(h)
                }
            }
            Op::Shard(s) => s.hash(h),
            Op::Scalar(_) | Op::Select | Op::Convert | Op::Reshape | Op::HouseholderProduct => {}
            Op::Iota { axis } => axis.hash(h),
            Op::Recursion(r) => r.hash(h),
            Op::Random { normal } => normal.hash(h),
            Op::Unary(u) => u.hash(h),
            Op::Binary(b) => b.hash(h),
            Op::Compare(c) => c.hash(h),
            Op::Reduce { kind, axes } => (kind, axes).hash(h),
            Op::Transpose { perm } => perm.hash(h),
            Op::Broadcast { dims } => dims.hash(h),
            Op::Slice { start, limit, stride } => (start, limit, stride).hash(h),
            Op::Concat { axis } | Op::IndexSelect { axis } | Op::IndexAdd { axis } => axis.hash(h),
            Op::IndexReduce { axis, kind } => (axis, kind).hash(h),
            Op::Pad { low, high, interior } => (low, high, interior).hash(h),
            Op::Reverse { axes } => axes.hash(h),
            Op::DotGeneral { lhs_batch, rhs_batch, lhs_contract, rhs_contract } => {
                (lhs_batch, rhs_batch, lhs_contract, rhs_contract).hash(h)
            }
            Op::Conv { stride, padding, lhs_dilation, rhs_dilation, groups, batch_groups } => {
                (stride, padding, lhs_dilation, rhs_dilation, groups, batch_groups).hash(h)
            }
            Op::Fft { kind, lengths } => (kind, lengths).hash(h),
            Op::ReduceWindow { kind, window, strides, padding } => {
                (kind, window, strides, padding).hash(h)
            }
            Op::Sort { axis, descending, indices } => (axis, descending, indices).hash(h),
            Op::Cholesky { lower } => lower.hash(h),
            Op::TriangularSolve { left_side, lower, unit_diagonal, transpose } => {
                (left_side, lower, unit_diagonal, transpose).hash(h)
            }
            Op::Qr { taus } => taus.hash(h),
            Op::Eigh { lower, vectors } => (lower, vectors).hash(h),
            Op::Lu { output } => output.hash(h),
            Op::PivotsToPermutation { rows } => rows.hash(h),
        }
    }
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Scalar(v) => write!(f, "scalar({v})"),
            Op::Compare(c) => write!(f, "compare({c:?})"),
            other => f.write_str(other.name()),
        }
    }
}
