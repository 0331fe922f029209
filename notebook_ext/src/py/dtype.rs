//! Dtypes by their NumPy names, and host data (NumPy arrays) to tensors and back.

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods, ToPyArray};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use xlaprof_core::{DType, Tensor};

pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Pred => "bool",
        DType::S8 => "int8",
        DType::S16 => "int16",
        DType::S32 => "int32",
        DType::S64 => "int64",
        DType::U8 => "uint8",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::C64 => "complex64",
        DType::C128 => "complex128",
    }
}

/// A dtype by its NumPy name ([`dtype_name`]), or PyTorch's `float` and `double`.
pub(crate) fn parse_dtype(name: &str) -> PyResult<DType> {
    let found = match name {
        "float" => Some(DType::F32),
        "double" => Some(DType::F64),
        _ => DType::ALL.into_iter().find(|&d| dtype_name(d) == name),
    };
    found.ok_or_else(|| {
        let names: Vec<&str> = DType::ALL.into_iter().map(dtype_name).collect();
        PyValueError::new_err(format!(
            "unknown dtype {name:?}; the dtypes are {}",
            names.join(", ")
        ))
    })
}

/// A dtype given as a name, an `xp` dtype, or a NumPy dtype/type (anything whose `str()` or
/// `numpy.dtype(...).name` is a dtype name).
pub(crate) fn extract_dtype(value: &Bound<'_, PyAny>) -> PyResult<DType> {
    if let Ok(name) = value.extract::<String>() {
        return parse_dtype(&name);
    }
    let numpy = value.py().import("numpy")?;
    let name: String = numpy.call_method1("dtype", (value,))?.getattr("name")?.extract()?;
    parse_dtype(&name)
}

fn upload<T: numpy::Element + Copy>(array: &Bound<'_, PyAny>) -> Option<(Vec<T>, Vec<i64>)> {
    let array = array.cast::<PyArrayDyn<T>>().ok()?;
    let dims = array.shape().iter().map(|&d| d as i64).collect();
    let ro = array.readonly();
    // A contiguous array is read in place; others are gathered in logical order.
    let data = match ro.as_slice() {
        Ok(slice) => slice.to_vec(),
        Err(_) => ro.as_array().iter().copied().collect(),
    };
    Some((data, dims))
}

/// Host values of one supported element type, with their dims.
pub(crate) enum HostData {
    Bool(Vec<bool>, Vec<i64>),
    I8(Vec<i8>, Vec<i64>),
    I16(Vec<i16>, Vec<i64>),
    I32(Vec<i32>, Vec<i64>),
    I64(Vec<i64>, Vec<i64>),
    U8(Vec<u8>, Vec<i64>),
    F16(Vec<half::f16>, Vec<i64>),
    BF16(Vec<half::bf16>, Vec<i64>),
    F32(Vec<f32>, Vec<i64>),
    F64(Vec<f64>, Vec<i64>),
    C64(Vec<[f32; 2]>, Vec<i64>),
    C128(Vec<[f64; 2]>, Vec<i64>),
}

impl HostData {
    pub(crate) fn from_numpy(array: &Bound<'_, PyAny>) -> PyResult<HostData> {
        macro_rules! try_types {
            ($($t:ty => $v:ident),*) => {
                $(if let Some((d, dims)) = upload::<$t>(array) { return Ok(HostData::$v(d, dims)); })*
            };
        }
        try_types!(f32 => F32, f64 => F64, i64 => I64, i32 => I32, bool => Bool, u8 => U8,
                   i8 => I8, i16 => I16, half::f16 => F16);
        // Complex numbers as (re, im) pairs, the layout of NumPy's complex64 and complex128.
        if let Some((d, dims)) = upload::<numpy::Complex32>(array) {
            return Ok(HostData::C64(d.into_iter().map(|c| [c.re, c.im]).collect(), dims));
        }
        if let Some((d, dims)) = upload::<numpy::Complex64>(array) {
            return Ok(HostData::C128(d.into_iter().map(|c| [c.re, c.im]).collect(), dims));
        }
        let dtype = array.getattr("dtype").map(|d| d.to_string()).unwrap_or_default();
        Err(PyTypeError::new_err(format!(
            "cannot make a tensor of a NumPy array of {dtype}; supported: bool, int8, int16, \
             int32, int64, uint8, float16, float32, float64, complex64, complex128"
        )))
    }

    /// bfloat16 values from an int16 array of their bits: NumPy has no bfloat16, so torch's
    /// bfloat16 tensors cross as their bits (`t.view(torch.int16)`), with no convert on the device.
    pub(crate) fn bfloat16_from_bits(array: &Bound<'_, PyAny>) -> PyResult<HostData> {
        let (bits, dims) = upload::<i16>(array).ok_or_else(|| {
            let dtype = array.getattr("dtype").map(|d| d.to_string()).unwrap_or_default();
            PyTypeError::new_err(format!("bfloat16 bits come as an int16 NumPy array, not {dtype}"))
        })?;
        Ok(HostData::BF16(
            bits.into_iter().map(|b| half::bf16::from_bits(b as u16)).collect(),
            dims,
        ))
    }

    pub(crate) fn upload(&self) -> xlaprof_core::Result<Tensor> {
        match self {
            HostData::Bool(d, s) => Tensor::from_slice(d, s),
            HostData::I8(d, s) => Tensor::from_slice(d, s),
            HostData::I16(d, s) => Tensor::from_slice(d, s),
            HostData::C64(d, s) => Tensor::from_slice(d, s),
            HostData::C128(d, s) => Tensor::from_slice(d, s),
            HostData::I32(d, s) => Tensor::from_slice(d, s),
            HostData::I64(d, s) => Tensor::from_slice(d, s),
            HostData::U8(d, s) => Tensor::from_slice(d, s),
            HostData::F16(d, s) => Tensor::from_slice(d, s),
            HostData::BF16(d, s) => Tensor::from_slice(d, s),
            HostData::F32(d, s) => Tensor::from_slice(d, s),
            HostData::F64(d, s) => Tensor::from_slice(d, s),
        }
    }
}

/// Values read from the device, ready to become a NumPy array.
pub(crate) enum HostValues {
    Bool(Vec<bool>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    F16(Vec<half::f16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<numpy::Complex32>),
    C128(Vec<numpy::Complex64>),
}

impl HostValues {
    /// Reads a tensor (materializing it). bfloat16 has no NumPy type: it reads as float32.
    pub(crate) fn read(t: &Tensor) -> xlaprof_core::Result<HostValues> {
        Ok(match t.dtype() {
            DType::Pred => HostValues::Bool(t.to_vec()?),
            DType::S8 => HostValues::I8(t.to_vec()?),
            DType::S16 => HostValues::I16(t.to_vec()?),
            DType::C64 => HostValues::C64(
                t.to_vec::<[f32; 2]>()?
                    .into_iter()
                    .map(|[re, im]| numpy::Complex32::new(re, im))
                    .collect(),
            ),
            DType::C128 => HostValues::C128(
                t.to_vec::<[f64; 2]>()?
                    .into_iter()
                    .map(|[re, im]| numpy::Complex64::new(re, im))
                    .collect(),
            ),
            DType::S32 => HostValues::I32(t.to_vec()?),
            DType::S64 => HostValues::I64(t.to_vec()?),
            DType::U8 => HostValues::U8(t.to_vec()?),
            DType::F16 => HostValues::F16(t.to_vec()?),
            DType::F32 => HostValues::F32(t.to_vec()?),
            DType::F64 => HostValues::F64(t.to_vec()?),
            DType::BF16 => HostValues::F32(t.to_f64_vec()?.into_iter().map(|v| v as f32).collect()),
        })
    }

    /// The values as an array of `dims`; the vector becomes the array's memory (no copy).
    pub(crate) fn into_numpy<'py>(
        self,
        py: Python<'py>,
        dims: &[i64],
    ) -> PyResult<Bound<'py, PyAny>> {
        let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        macro_rules! array {
            ($v:expr) => {
                numpy::PyArray1::from_vec(py, $v).reshape(dims)?.into_any()
            };
        }
        Ok(match self {
            HostValues::Bool(v) => array!(v),
            HostValues::I8(v) => array!(v),
            HostValues::I16(v) => array!(v),
            HostValues::C64(v) => array!(v),
            HostValues::C128(v) => array!(v),
            HostValues::I32(v) => array!(v),
            HostValues::I64(v) => array!(v),
            HostValues::U8(v) => array!(v),
            HostValues::F16(v) => v.to_pyarray(py).reshape(dims)?.into_any(),
            HostValues::F32(v) => array!(v),
            HostValues::F64(v) => array!(v),
        })
    }
}
