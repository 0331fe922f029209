//! Shapes, NumPy/PyTorch broadcasting and type promotion.

use std::fmt;

use crate::dtype::{shape_string, DType};

/// A shape's dims: inline up to rank 4, so a shape is copied without allocating (every node and
/// tensor holds one).
pub type Dims = smallvec::SmallVec<[i64; 4]>;

/// Element type and dims of a tensor.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    pub dtype: DType,
    pub dims: Dims,
}

impl Shape {
    pub fn new(dtype: DType, dims: impl AsRef<[i64]>) -> Shape {
        Shape { dtype, dims: Dims::from_slice(dims.as_ref()) }
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub fn element_count(&self) -> usize {
        self.dims.iter().map(|&d| d.max(0) as usize).product()
    }

    pub fn with_dtype(&self, dtype: DType) -> Shape {
        Shape { dtype, dims: self.dims.clone() }
    }

    pub fn with_dims(&self, dims: impl AsRef<[i64]>) -> Shape {
        Shape::new(self.dtype, dims)
    }

    /// `tensor<2x3xf32>`
    pub fn mlir(&self) -> String {
        let mut s = String::from("tensor<");
        for d in &self.dims {
            s += &d.to_string();
            s.push('x');
        }
        s += self.dtype.mlir_name();
        s.push('>');
        s
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shape_string(self.dtype, &self.dims))
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The broadcast dims of two shapes (NumPy rules: align right; equal or 1), or `None`.
pub fn broadcast_dims(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// PyTorch-style promotion of two tensor dtypes: bool < integers < floats, wider wins, and a
/// float beats any integer. bf16 with f16 becomes f32.
pub fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    let category = |d: DType| match d {
        Pred => 0,
        S8 | U8 | S16 | S32 | S64 => 1,
        C64 | C128 => 3,
        _ => 2,
    };
    // A complex number with a wider float: complex of the wider parts (c64 and f64 make c128).
    if a.is_complex() || b.is_complex() {
        let (c, other) = if a.is_complex() { (a, b) } else { (b, a) };
        return if other.is_complex() || other == F64 {
            C128.min(c.max(other.complex()))
        } else {
            c
        };
    }
    match category(a).cmp(&category(b)) {
        std::cmp::Ordering::Greater => return a,
        std::cmp::Ordering::Less => return b,
        std::cmp::Ordering::Equal => {}
    }
    match (a, b) {
        (F16, BF16) | (BF16, F16) => F32,
        (S8, U8) | (U8, S8) => S16,
        _ => {
            // Same category: the wider one (by size, then the later one in the enum).
            if (a.size_bytes(), a) >= (b.size_bytes(), b) {
                a
            } else {
                b
            }
        }
    }
}

/// Normalizes a possibly negative axis for a tensor of `rank` dims.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_dims(&[2, 1, 3], &[4, 1]), Some(vec![2, 4, 3]));
        assert_eq!(broadcast_dims(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_dims(&[2, 3], &[3, 2]), None);
        assert_eq!(broadcast_dims(&[0, 3], &[1]), Some(vec![0, 3]));
    }

    #[test]
    fn promotion_follows_pytorch() {
        use DType::*;
        assert_eq!(promote(S32, F16), F16);
        assert_eq!(promote(S64, S32), S64);
        assert_eq!(promote(Pred, U8), U8);
        assert_eq!(promote(BF16, F16), F32);
        assert_eq!(promote(F32, F64), F64);
        assert_eq!(promote(S8, U8), S16);
        assert_eq!(promote(C64, F64), C128);
        assert_eq!(promote(F32, C64), C64);
        assert_eq!(promote(S64, C64), C64);
    }
}
