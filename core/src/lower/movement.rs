//! Movement ops: reshape, transpose, broadcast, slice, concatenate, pad, reverse.

use super::{array, Ctx};
use crate::ir::Op;

pub(super) fn lower(c: &mut Ctx) {
    match &c.node.op {
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
        _ => unreachable!("not a movement op: {:?}", c.node.op),
    }
}
