//! Tensor ops. Each checks shapes and dtypes when it is recorded (errors name the shapes and the
//! caller's line) and records primitives from `ir::Op`; composite ops (relu, softmax, ...) are
//! built from primitives, so the lowering and autograd only know the primitives.

mod conv;
mod create;
mod elementwise;
mod factor;
mod linalg;
mod movement;
mod nn;
mod reduce;
mod shard;

pub(crate) use create::full_like_at;

use crate::error::Error;
use crate::location::SourceLocation;

pub(crate) fn shape_error(op: &'static str, location: &SourceLocation, message: String) -> Error {
    Error::Shape { op, message, location: location.clone() }
}

/// The error for an op the engine's autograd does not differentiate, if one of `inputs` requires
/// a gradient (never a silent constant): a caller's autograd computes its gradient instead.
pub(crate) fn not_differentiable(
    op: &str,
    inputs: &[&crate::tensor::Tensor],
    location: &SourceLocation,
) -> Result<(), Error> {
    match inputs.iter().find(|t| t.requires_grad()) {
        Some(t) => Err(Error::Autograd {
            message: format!(
                "{op} is not differentiable by xlaprof's autograd (its input {} requires a gradient)",
                t.shape()
            ),
            location: location.clone(),
        }),
        None => Ok(()),
    }
}
