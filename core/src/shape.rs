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

/// `dims` with its `-1` inferred from `count` elements, as a reshape reads them (torch's rule,
/// the one place it is written: the engine's reshape, the torch bridge's native views and its
/// view lowerings all ask here). None when no such dims exist: two `-1`s, a negative size, sizes
/// whose product is not `count`, or a `-1` beside a 0 (any size would do: torch calls it
/// ambiguous).
pub fn infer_dims(count: i64, dims: &[i64]) -> Option<Vec<i64>> {
    let known = checked_product(dims.iter().copied().filter(|&d| d != -1))?;
    let holes = dims.iter().filter(|&&d| d == -1).count();
    let mut out = dims.to_vec();
    if holes == 1 && known > 0 && count % known == 0 {
        out[dims.iter().position(|&d| d == -1)?] = count / known;
    }
    let whole = holes <= 1 && out.iter().all(|&d| d >= 0);
    (whole && checked_product(out.iter().copied()) == Some(count)).then_some(out)
}

/// The product of `dims`, or None where it overflows.
fn checked_product(dims: impl Iterator<Item = i64>) -> Option<i64> {
    dims.into_iter().try_fold(1i64, |p, d| p.checked_mul(d))
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

#[cfg(test)]
mod infer_dims_tests {
    use super::infer_dims;

    #[test]
    fn a_minus_one_takes_what_the_others_leave_and_nothing_ambiguous_passes() {
        assert_eq!(infer_dims(12, &[3, -1]), Some(vec![3, 4]));
        assert_eq!(infer_dims(12, &[-1]), Some(vec![12]));
        assert_eq!(infer_dims(1, &[]), Some(vec![]));
        assert_eq!(infer_dims(0, &[0, 3]), Some(vec![0, 3]));
        assert_eq!(infer_dims(0, &[0, -1]), None, "torch: ambiguous");
        assert_eq!(infer_dims(12, &[5, -1]), None);
        assert_eq!(infer_dims(12, &[-1, -1]), None);
        assert_eq!(infer_dims(12, &[-2, -6]), None);
        assert_eq!(infer_dims(12, &[i64::MAX, 2, -1]), None, "no overflow");
    }
}
