//! Bad input is an error naming the shapes and the caller's line, never a panic.

use xlaprof_core::{DType, Error, Tensor};

fn located_here(e: &Error) -> bool {
    e.to_string().contains("core/tests/errors.rs:")
}

#[test]
fn mismatched_matmul_names_both_shapes_and_the_line() {
    let a = Tensor::zeros(&[2, 3], DType::F32);
    let b = Tensor::zeros(&[4, 5], DType::F32);
    let e = a.matmul(&b).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("f32[2,3]") && text.contains("f32[4,5]"), "{text}");
    assert!(located_here(&e), "{text}");
}

#[test]
fn invalid_reshape_out_of_range_axis_and_broadcast() {
    let a = Tensor::zeros(&[2, 3], DType::F32);
    let e = a.reshape(&[4, 2]).unwrap_err();
    assert!(
        e.to_string().contains("cannot reshape f32[2,3] (6 elements) to [4, 2]")
            && located_here(&e),
        "{e}"
    );
    let e = a.sum(&[5], false).unwrap_err();
    assert!(
        e.to_string().contains("axis 5 is out of range for f32[2,3]") && located_here(&e),
        "{e}"
    );
    let e = a.add(&Tensor::zeros(&[4], DType::F32)).unwrap_err();
    assert!(
        e.to_string().contains("f32[2,3] and f32[4] cannot be broadcast") && located_here(&e),
        "{e}"
    );
}

#[test]
fn dtype_mismatch_and_backward_on_a_non_scalar() {
    let a = Tensor::zeros(&[2, 3], DType::F32);
    let ints = Tensor::zeros(&[3, 2], DType::S32);
    let e = a.dot_general(&ints, &[], &[], &[1], &[0]).unwrap_err();
    assert!(
        e.to_string().contains("one dtype, but they are f32[2,3] and s32[3,2]") && located_here(&e),
        "{e}"
    );
    let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    x.set_requires_grad(true);
    let y = x.mul_scalar(2.0).unwrap();
    let e = y.backward().unwrap_err();
    assert!(
        e.to_string().contains("one-element tensor, but this is f32[2]") && located_here(&e),
        "{e}"
    );
}
