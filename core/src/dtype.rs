//! Element types, their sizes, their StableHLO spelling, and the host types that carry them.

use std::fmt;

use half::{bf16, f16};

/// An element type the engine and the runtime support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Pred,
    S8,
    S16,
    S32,
    S64,
    U8,
    F16,
    BF16,
    F32,
    F64,
    /// Complex numbers of two f32 (or f64) parts, the real one first.
    C64,
    C128,
}

impl DType {
    pub const ALL: [DType; 12] = [
        DType::Pred,
        DType::S8,
        DType::S16,
        DType::S32,
        DType::S64,
        DType::U8,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    pub fn size_bytes(self) -> usize {
        match self {
            DType::Pred | DType::S8 | DType::U8 => 1,
            DType::S16 | DType::F16 | DType::BF16 => 2,
            DType::S32 | DType::F32 => 4,
            DType::S64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// The element type as written in StableHLO/MLIR (`tensor<2x3xf32>`).
    pub fn mlir_name(self) -> &'static str {
        match self {
            DType::Pred => "i1",
            DType::S8 => "i8",
            DType::S16 => "i16",
            DType::S32 => "i32",
            DType::S64 => "i64",
            DType::U8 => "ui8",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "complex<f32>",
            DType::C128 => "complex<f64>",
        }
    }

    pub fn from_mlir_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.mlir_name() == name)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// bf16 and f16, which torch's kernels compute in f32 (their opmath type) and round once.
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The type of a complex dtype's parts (f32 or f64); other dtypes are their own.
    pub fn real(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            other => other,
        }
    }

    /// The complex dtype whose parts are `self` (f64: c128; other floats: c64).
    pub fn complex(self) -> DType {
        match self {
            DType::F64 | DType::C128 => DType::C128,
            _ => DType::C64,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            DType::Pred => "bool",
            DType::S8 => "s8",
            DType::S16 => "s16",
            DType::S32 => "s32",
            DType::S64 => "s64",
            DType::U8 => "u8",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::C128 => "c128",
        };
        f.write_str(name)
    }
}

/// A Rust type whose values are laid out exactly like elements of `DTYPE` in a dense buffer.
pub trait NativeType: Copy + Send + Sync + 'static {
    const DTYPE: DType;
}

macro_rules! native {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl NativeType for $t { const DTYPE: DType = DType::$d; })*
    };
}
native!(bool => Pred, i8 => S8, i16 => S16, i32 => S32, i64 => S64, u8 => U8, f16 => F16,
        bf16 => BF16, f32 => F32, f64 => F64, [f32; 2] => C64, [f64; 2] => C128);

/// Formats a shape the way users read it: `f32[2,3]`.
pub fn shape_string(dtype: DType, dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("{dtype}[{}]", dims.join(","))
}

/// One value of `dtype` from an f64, as little-endian bytes (the first `dtype.size_bytes()` of
/// the array): floats round to nearest, integers truncate toward zero and saturate, like Rust's
/// `as` (and XLA's convert, for values in range); a complex value's imaginary part is zero.
pub fn f64_to_bytes(dtype: DType, value: f64) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = dtype.size_bytes().min(8);
    let bytes: [u8; 8] = match dtype {
        DType::Pred => (value != 0.0) as u64,
        DType::S8 => value as i8 as u8 as u64,
        DType::S16 => value as i16 as u16 as u64,
        DType::U8 => value as u8 as u64,
        DType::S32 => value as i32 as u32 as u64,
        DType::S64 => value as i64 as u64,
        DType::F16 => f16::from_f64(value).to_bits() as u64,
        DType::BF16 => bf16::from_f64(value).to_bits() as u64,
        DType::F32 | DType::C64 => (value as f32).to_bits() as u64,
        DType::F64 | DType::C128 => value.to_bits(),
    }
    .to_le_bytes();
    out[..n].copy_from_slice(&bytes[..n]);
    out
}

/// Decodes dense little-endian elements of `dtype` as f64 (for printing and `item`; a complex
/// value's real part).
pub fn bytes_to_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    let size = dtype.size_bytes();
    bytes
        .chunks_exact(size)
        .map(|c| match dtype {
            DType::Pred => (c[0] != 0) as u8 as f64,
            DType::S8 => c[0] as i8 as f64,
            DType::S16 => i16::from_le_bytes([c[0], c[1]]) as f64,
            DType::U8 => c[0] as f64,
            DType::S32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            DType::S64 => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
            DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::F32 | DType::C64 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            DType::F64 => f64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
            DType::C128 => f64::from_le_bytes(c[..8].try_into().unwrap_or([0; 8])),
        })
        .collect()
}
