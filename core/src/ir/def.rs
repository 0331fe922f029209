//! A graph as data, for whatever looks at it outside the engine (events, profiles, viewers):
//! each node's op with its attributes, its operands, its shape, where it was recorded and its
//! structural hash. Nothing outside core parses text to learn what a graph is.

use std::fmt;

use super::{Op, Recursion};
use crate::location::SourceLocation;
use crate::shape::Shape;

/// The value of one attribute of an op.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    /// `(low, high)` per dimension: padding.
    Pairs(Vec<(i64, i64)>),
    /// A choice among names: a comparison's direction.
    Name(&'static str),
    /// Text made at run time: a sharding's spec and mesh.
    Text(String),
}

/// One node of a graph, as data. Operands are positions in the same graph's node list.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    /// The op's name, as StableHLO spells it where there is one (`add`, `dot_general`).
    pub op: &'static str,
    /// What else the op's structure holds (axes, a permutation, slice bounds ...), by name.
    pub attrs: Vec<(&'static str, Attr)>,
    pub inputs: Vec<u32>,
    pub shape: Shape,
    pub location: SourceLocation,
    /// Structural hash of the subgraph rooted here.
    pub hash: u64,
}

fn ints<T: Copy + TryInto<i64>>(v: &[T]) -> Attr {
    Attr::Ints(v.iter().map(|&x| x.try_into().unwrap_or(i64::MAX)).collect())
}

impl Op {
    /// The op's attributes, named as its fields are. A scalar's value is not one: it is an input
    /// of the graph, never structure.
    pub fn attrs(&self) -> Vec<(&'static str, Attr)> {
        match self {
            Op::Data(data) => match data.sharding() {
                Some(s) => vec![("sharding", Attr::Text(s.to_string()))],
                None => Vec::new(),
            },
            Op::Shard(s) => vec![("sharding", Attr::Text(s.to_string()))],
            Op::Scalar(_)
            | Op::Random { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Select
            | Op::Convert
            | Op::Reshape
            | Op::HouseholderProduct => Vec::new(),
            Op::Iota { axis }
            | Op::Concat { axis }
            | Op::IndexSelect { axis }
            | Op::IndexAdd { axis }
            | Op::IndexReduce { axis, .. } => vec![("axis", Attr::Int(*axis as i64))],
            Op::Compare(c) => vec![("direction", Attr::Name(c.direction()))],
            Op::Reduce { axes, .. } => vec![("axes", ints(axes))],
            Op::Transpose { perm } => vec![("perm", ints(perm))],
            Op::Broadcast { dims } => vec![("dims", ints(dims))],
            Op::Slice { start, limit, stride } => {
                vec![("start", ints(start)), ("limit", ints(limit)), ("stride", ints(stride))]
            }
            Op::Pad { low, high, interior } => {
                vec![("low", ints(low)), ("high", ints(high)), ("interior", ints(interior))]
            }
            Op::Reverse { axes } => vec![("axes", ints(axes))],
            Op::DotGeneral { lhs_batch, rhs_batch, lhs_contract, rhs_contract } => vec![
                ("lhs_batch", ints(lhs_batch)),
                ("rhs_batch", ints(rhs_batch)),
                ("lhs_contract", ints(lhs_contract)),
                ("rhs_contract", ints(rhs_contract)),
            ],
            Op::Fft { kind, lengths } => {
                vec![("kind", Attr::Name(kind.name())), ("lengths", ints(lengths))]
            }
            Op::Conv { stride, padding, lhs_dilation, rhs_dilation, groups, batch_groups } => {
                let mut attrs = vec![
                    ("stride", ints(stride)),
                    ("padding", Attr::Pairs(padding.clone())),
                    ("lhs_dilation", ints(lhs_dilation)),
                    ("rhs_dilation", ints(rhs_dilation)),
                    ("groups", Attr::Int(*groups)),
                ];
                if *batch_groups != 1 {
                    attrs.push(("batch_groups", Attr::Int(*batch_groups)));
                }
                attrs
            }
            Op::ReduceWindow { window, strides, padding, .. } => vec![
                ("window", ints(window)),
                ("strides", ints(strides)),
                ("padding", Attr::Pairs(padding.clone())),
            ],
            Op::Sort { axis, descending, indices } => vec![
                ("axis", Attr::Int(*axis as i64)),
                ("descending", Attr::Int(*descending as i64)),
                ("indices", Attr::Int(*indices as i64)),
            ],
            Op::Cholesky { lower } | Op::Eigh { lower, vectors: false } => {
                vec![("lower", Attr::Int(*lower as i64))]
            }
            Op::Eigh { lower, vectors: true } => {
                vec![("lower", Attr::Int(*lower as i64)), ("vectors", Attr::Int(1))]
            }
            Op::TriangularSolve { left_side, lower, unit_diagonal, transpose } => vec![
                ("left_side", Attr::Int(*left_side as i64)),
                ("lower", Attr::Int(*lower as i64)),
                ("unit_diagonal", Attr::Int(*unit_diagonal as i64)),
                ("transpose", Attr::Int(*transpose as i64)),
            ],
            Op::Qr { taus } => vec![("taus", Attr::Int(*taus as i64))],
            Op::Lu { output } => vec![(
                "output",
                Attr::Name(match output {
                    super::LuOutput::Factors => "factors",
                    super::LuOutput::Pivots => "pivots",
                    super::LuOutput::Permutation => "permutation",
                }),
            )],
            Op::PivotsToPermutation { rows } => vec![("rows", Attr::Int(*rows as i64))],
            Op::Recursion(Recursion::RnnLoop { relu } | Recursion::RnnLoopBackward { relu }) => {
                vec![("nonlinearity", Attr::Name(if *relu { "relu" } else { "tanh" }))]
            }
            Op::Recursion(Recursion::ThreeTerm { coefficients }) => {
                vec![("coefficients", Attr::Ints(coefficients.iter().map(|&c| c as i64).collect()))]
            }
            Op::Recursion(_) => Vec::new(),
        }
    }
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attr::Int(v) => write!(f, "{v}"),
            Attr::Ints(v) => write!(f, "{v:?}"),
            Attr::Pairs(v) => write!(f, "{v:?}"),
            Attr::Name(n) => f.write_str(n),
            Attr::Text(t) => f.write_str(t),
        }
    }
}
