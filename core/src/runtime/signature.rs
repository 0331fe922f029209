//! The parameter and result types of a StableHLO program's `main`, read from its text.
//!
//! PJRT checks little at execute time (the CPU plugin compares byte sizes only, so f32[2,3] passes
//! for f32[3,2]); knowing the signature lets us reject a wrong input with a message naming both
//! shapes, and type outputs without asking the plugin.

use crate::dtype::{shape_string, DType};

/// A static tensor type: element type and dims.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub dims: Vec<i64>,
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shape_string(self.dtype, &self.dims))
    }
}

/// Inputs and outputs of a program's entry function, and which inputs are donated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature {
    pub inputs: Vec<TensorType>,
    pub outputs: Vec<TensorType>,
    /// Input positions whose buffers are donated to an output (`tf.aliasing_output` or
    /// `jax.buffer_donor`).
    pub donated: Vec<usize>,
}

impl Signature {
    /// Reads the signature of `@main` in StableHLO text; `None` when it is not all static tensors.
    pub fn parse(mlir: &str) -> Option<Signature> {
        let start = mlir.find("@main(")? + "@main(".len();
        let (params, rest) = split_balanced(&mlir[start..])?;
        let mut sig = Signature::default();
        for (index, param) in split_top_level(params).into_iter().enumerate() {
            let ty = param.split_once(':')?.1;
            sig.inputs.push(parse_tensor_type(ty)?);
            if param.contains("tf.aliasing_output") || param.contains("jax.buffer_donor") {
                sig.donated.push(index);
            }
        }
        // Results follow `->` and end at the body's `{`: `-> tensor<..>` or `-> (tensor<..>, ..)`.
        let rest = rest.trim_start();
        let Some(results) = rest.strip_prefix("->") else {
            return Some(sig); // no results
        };
        let results = results.trim_start();
        let list = if let Some(inner) = results.strip_prefix('(') {
            split_balanced(inner)?.0
        } else {
            &results[..results.find('{')?]
        };
        for result in split_top_level(list) {
            sig.outputs.push(parse_tensor_type(&result)?);
        }
        Some(sig)
    }
}

/// Parses the first `tensor<...>` in `text`.
fn parse_tensor_type(text: &str) -> Option<TensorType> {
    let start = text.find("tensor<")? + "tensor<".len();
    let body = &text[start..];
    let body = &body[..body.find('>')?];
    let mut parts: Vec<&str> = body.split('x').collect();
    let dtype = DType::from_mlir_name(parts.pop()?.trim())?;
    let dims = parts.iter().map(|d| d.trim().parse::<i64>().ok()).collect::<Option<Vec<_>>>()?;
    Some(TensorType { dtype, dims })
}

/// Splits `text` (just after an opening parenthesis) at its matching `)`.
fn split_balanced(text: &str) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' if depth == 0 => return Some((&text[..i], &text[i + 1..])),
            ')' | '>' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Splits a comma-separated list, ignoring commas nested in brackets.
fn split_top_level(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' | '>' | '}' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        items.push(current);
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inputs_outputs_and_donation() {
        let text = "func.func public @main(%arg0: tensor<2x3xf32> {tf.aliasing_output = 0 : i32}, \
                    %arg1: tensor<i64>) -> (tensor<2x3xf32>, tensor<0xbf16>) {\n return }";
        let sig = Signature::parse(text).unwrap();
        assert_eq!(sig.inputs[0].to_string(), "f32[2,3]");
        assert_eq!(sig.inputs[1].to_string(), "s64[]");
        assert_eq!(sig.outputs.len(), 2);
        assert_eq!(sig.outputs[1].to_string(), "bf16[0]");
        assert_eq!(sig.donated, vec![0]);
    }

    #[test]
    fn single_result_without_parentheses() {
        let sig = Signature::parse("func.func @main() -> tensor<4xui8> {").unwrap();
        assert!(sig.inputs.is_empty());
        assert_eq!(sig.outputs[0].dtype, DType::U8);
    }

    #[test]
    fn dynamic_shapes_are_not_a_signature() {
        assert!(Signature::parse("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {").is_none());
    }
}
