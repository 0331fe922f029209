//! Linear algebra: `dot_general`, `fft` and `convolution` (NCHW input, OIHW kernel).

use super::{array, list, Ctx};
use crate::dtype::DType;
use crate::ir::{Node, Op};

/// The precision attribute of a product of `f32` operands: full `f32`. XLA's default precision
/// lets a GPU multiply `f32` in TF32 (10-bit mantissas), where torch (CPU, and CUDA unless
/// `torch.backends.cuda.matmul.allow_tf32` is set) and NumPy multiply in `f32`: with the default
/// a model's loss drifts from theirs by 1e-3 on a GPU. The CPU plugin computes `f32` either way.
pub(super) fn f32_precision(operand: &Node) -> &'static str {
    if operand.shape.dtype == DType::F32 {
        ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]"
    } else {
        ""
    }
}

pub(super) fn lower(c: &mut Ctx) {
    let node = c.node;
    match &node.op {
    Op::DotGeneral { lhs_batch, rhs_batch, lhs_contract, rhs_contract } => c.generic(
        "dot_general",
        &format!(
            "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {}, rhs_batching_dimensions = {}, lhs_contracting_dimensions = {}, rhs_contracting_dimensions = {}>{}",
            list(lhs_batch),
            list(rhs_batch),
            list(lhs_contract),
            list(rhs_contract),
            f32_precision(&node.inputs[0])
        ),
    ),
    Op::Fft { kind, lengths } => c.generic(
        "fft",
        &format!("fft_type = #stablehlo<fft_type {}>, fft_length = {}", kind.name(), array(lengths)),
    ),
    Op::Conv { stride, padding, lhs_dilation, rhs_dilation, groups, batch_groups } => {
        let pad: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
        let rank = node.shape.rank();
        let spatial: Vec<usize> = (2..rank).collect();
        let s = list(&spatial);
        c.generic(
            "convolution",
            &format!(
                "window_strides = {}, padding = dense<[{}]> : tensor<{}x2xi64>, lhs_dilation = {}, rhs_dilation = {}, \
                 dimension_numbers = #stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 1, input_spatial_dimensions = {s}, \
                 kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0, kernel_spatial_dimensions = {s}, \
                 output_batch_dimension = 0, output_feature_dimension = 1, output_spatial_dimensions = {s}>, \
                 feature_group_count = {groups} : i64, batch_group_count = {batch_groups} : i64{}",
                array(stride),
                pad.join(", "),
                spatial.len(),
                array(lhs_dilation),
                array(rhs_dilation),
                f32_precision(&node.inputs[0])
            ),
        );
    }
        _ => unreachable!("not a linear algebra op: {:?}", node.op),
    }
}
