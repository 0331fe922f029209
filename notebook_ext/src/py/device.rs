//! `device=` arguments and `Tensor.device`, read through `xlaprof._device` (which documents
//! what each device name means here: xlaprof runs every tensor on one device).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// The type of the device `value` names (`"cpu"`, `"cuda"`, `"xla"`), or None when `value` is
/// not a device at all; a device name this process has no device for raises `ValueError`.
/// Unless `strict`, a string that does not start with a device's name is not a device (it may
/// be a dtype, as in `t.to("float64")`).
pub(crate) fn device_type(value: &Bound<'_, PyAny>, strict: bool) -> PyResult<Option<String>> {
    value.py().import("xlaprof._device")?.call_method1("resolve", (value, strict))?.extract()
}

/// Checks a `device=` argument: None, a device or a device name.
pub(crate) fn check_device(what: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match value.filter(|v| !v.is_none()) {
        None => Ok(()),
        Some(v) => match device_type(v, true)? {
            Some(_) => Ok(()),
            None => Err(PyTypeError::new_err(format!(
                "{what}: device must be None, an xlaprof.device or a device name such as \"cpu\", \
                 not {}",
                v.repr()?
            ))),
        },
    }
}

/// The device every tensor is on, as an `xlaprof.device`.
pub(crate) fn engine_device(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("xlaprof._device")?.call_method0("engine_device")
}
