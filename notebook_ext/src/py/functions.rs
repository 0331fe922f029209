//! Module-level functions: creating tensors, functional ops, sync and step, scopes, counters.

use std::sync::atomic::{AtomicI64, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use xlaprof_core::{events, DType, Tensor};

use super::dtype::extract_dtype;
use super::location;
use super::ops::dims_arg;
use super::tensor::{from_numpy, PyTensor};
use super::trace::{self, record, traced, traced_detached};

fn dtype_or(dtype: Option<&Bound<'_, PyAny>>, default: DType) -> PyResult<DType> {
    dtype.map(extract_dtype).transpose().map(|d| d.unwrap_or(default))
}

/// The seed of the next `rand`/`randn` without one (`manual_seed` sets it).
static NEXT_SEED: AtomicI64 = AtomicI64::new(0);

fn next_seed(seed: Option<i64>) -> i64 {
    seed.unwrap_or_else(|| NEXT_SEED.fetch_add(1, Ordering::Relaxed))
}

#[pyfunction]
pub(crate) fn manual_seed(seed: i64) {
    NEXT_SEED.store(seed, Ordering::Relaxed);
}

#[pyfunction]
pub(crate) fn from_array(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    from_numpy(py, array).map(PyTensor::new)
}

#[pyfunction]
#[pyo3(signature = (*shape, dtype=None))]
pub(crate) fn zeros(
    py: Python<'_>,
    shape: &Bound<'_, pyo3::types::PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (dims, dtype) = (dims_arg("zeros", shape)?, dtype_or(dtype, DType::F32)?);
    record(py, "zeros", || Ok(Tensor::zeros(&dims, dtype)))
}

#[pyfunction]
#[pyo3(signature = (*shape, dtype=None))]
pub(crate) fn ones(
    py: Python<'_>,
    shape: &Bound<'_, pyo3::types::PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (dims, dtype) = (dims_arg("ones", shape)?, dtype_or(dtype, DType::F32)?);
    record(py, "ones", || Ok(Tensor::ones(&dims, dtype)))
}

#[pyfunction]
#[pyo3(signature = (shape, fill_value, dtype=None))]
pub(crate) fn full(
    py: Python<'_>,
    shape: Vec<i64>,
    fill_value: f64,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let dtype = dtype_or(dtype, DType::F32)?;
    record(py, "full", || Ok(Tensor::full(&shape, fill_value, dtype)))
}

/// `arange(end)` or `arange(start, end, step)`; integers unless a bound is fractional.
#[pyfunction]
#[pyo3(signature = (start, end=None, step=1.0, dtype=None))]
pub(crate) fn arange(
    py: Python<'_>,
    start: f64,
    end: Option<f64>,
    step: f64,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (start, end) = match end {
        Some(e) => (start, e),
        None => (0.0, start),
    };
    let integral = [start, end, step].iter().all(|v| v.fract() == 0.0);
    let dtype = dtype_or(dtype, if integral { DType::S64 } else { DType::F32 })?;
    record(py, "arange", || Tensor::arange(start, end, step, dtype))
}

#[pyfunction]
#[pyo3(signature = (n, dtype=None))]
pub(crate) fn eye(py: Python<'_>, n: i64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let dtype = dtype_or(dtype, DType::F32)?;
    record(py, "eye", || Tensor::eye(n, dtype))
}

#[pyfunction]
#[pyo3(signature = (*shape, seed=None, dtype=None))]
pub(crate) fn rand(
    py: Python<'_>,
    shape: &Bound<'_, pyo3::types::PyTuple>,
    seed: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (dims, dtype, seed) =
        (dims_arg("rand", shape)?, dtype_or(dtype, DType::F32)?, next_seed(seed));
    record(py, "rand", || Tensor::rand(&dims, seed, dtype))
}

#[pyfunction]
#[pyo3(signature = (*shape, seed=None, dtype=None))]
pub(crate) fn randn(
    py: Python<'_>,
    shape: &Bound<'_, pyo3::types::PyTuple>,
    seed: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (dims, dtype, seed) =
        (dims_arg("randn", shape)?, dtype_or(dtype, DType::F32)?, next_seed(seed));
    record(py, "randn", || Tensor::randn(&dims, seed, dtype))
}

#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
pub(crate) fn cat(
    py: Python<'_>,
    tensors: Vec<PyRef<'_, PyTensor>>,
    dim: i64,
) -> PyResult<PyTensor> {
    let refs: Vec<&Tensor> = tensors.iter().map(|t| &t.t).collect();
    record(py, "cat", || Tensor::concat(&refs, dim))
}

#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
pub(crate) fn stack(
    py: Python<'_>,
    tensors: Vec<PyRef<'_, PyTensor>>,
    dim: i64,
) -> PyResult<PyTensor> {
    let refs: Vec<&Tensor> = tensors.iter().map(|t| &t.t).collect();
    record(py, "stack", || Tensor::stack(&refs, dim))
}

#[pyfunction]
#[pyo3(name = "where")]
pub(crate) fn where_(
    py: Python<'_>,
    condition: &PyTensor,
    x: &PyTensor,
    y: &PyTensor,
) -> PyResult<PyTensor> {
    record(py, "where", || Tensor::where_(&condition.t, &x.t, &y.t))
}

#[pyfunction]
#[pyo3(signature = (input, weight, stride=1, padding=0, dilation=1, groups=1))]
pub(crate) fn conv2d(
    py: Python<'_>,
    input: &PyTensor,
    weight: &PyTensor,
    stride: i64,
    padding: i64,
    dilation: i64,
    groups: i64,
) -> PyResult<PyTensor> {
    record(py, "conv2d", || {
        input.t.conv2d(&weight.t, [stride; 2], [padding; 2], [dilation; 2], groups)
    })
}

#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride=None, padding=0))]
pub(crate) fn max_pool2d(
    py: Python<'_>,
    input: &PyTensor,
    kernel_size: i64,
    stride: Option<i64>,
    padding: i64,
) -> PyResult<PyTensor> {
    let s = stride.unwrap_or(kernel_size);
    record(py, "max_pool2d", || input.t.max_pool2d([kernel_size; 2], [s; 2], [padding; 2]))
}

#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride=None, padding=0))]
pub(crate) fn avg_pool2d(
    py: Python<'_>,
    input: &PyTensor,
    kernel_size: i64,
    stride: Option<i64>,
    padding: i64,
) -> PyResult<PyTensor> {
    let s = stride.unwrap_or(kernel_size);
    record(py, "avg_pool2d", || input.t.avg_pool2d([kernel_size; 2], [s; 2], [padding; 2]))
}

/// Mean cross-entropy of logits `[N, C]` against integer labels `[N]`.
#[pyfunction]
pub(crate) fn cross_entropy(
    py: Python<'_>,
    logits: &PyTensor,
    labels: &PyTensor,
) -> PyResult<PyTensor> {
    record(py, "cross_entropy", || logits.t.cross_entropy(&labels.t))
}

#[pyfunction]
#[pyo3(signature = (input, normalized_shape, weight=None, bias=None, eps=1e-5))]
pub(crate) fn layer_norm(
    py: Python<'_>,
    input: &PyTensor,
    normalized_shape: Vec<i64>,
    weight: Option<&PyTensor>,
    bias: Option<&PyTensor>,
    eps: f64,
) -> PyResult<PyTensor> {
    record(py, "layer_norm", || {
        input.t.layer_norm(&normalized_shape, weight.map(|w| &w.t), bias.map(|b| &b.t), eps)
    })
}

#[pyfunction]
pub(crate) fn embedding(py: Python<'_>, ids: &PyTensor, weight: &PyTensor) -> PyResult<PyTensor> {
    record(py, "embedding", || weight.t.embedding(&ids.t))
}

#[pyfunction]
#[pyo3(signature = (input, p=0.5, training=true, seed=None))]
pub(crate) fn dropout(
    py: Python<'_>,
    input: &PyTensor,
    p: f64,
    training: bool,
    seed: Option<i64>,
) -> PyResult<PyTensor> {
    let seed = next_seed(seed);
    record(py, "dropout", || input.t.dropout(p, seed, training))
}

/// Compiles and runs every pending tensor as one graph (torch_xla's `mark_step`).
#[pyfunction]
pub(crate) fn sync(py: Python<'_>) -> PyResult<()> {
    traced_detached(py, "sync", xlaprof_core::sync)
}

/// Ends a training step: a sync, and a step marker in the profile.
#[pyfunction]
pub(crate) fn step(py: Python<'_>) -> PyResult<()> {
    traced_detached(py, "step", xlaprof_core::step)
}

#[pyfunction]
pub(crate) fn no_grad_enter() {
    trace::enter_no_grad();
}

#[pyfunction]
pub(crate) fn no_grad_exit() {
    trace::exit_no_grad();
}

#[pyfunction]
pub(crate) fn is_grad_enabled() -> bool {
    trace::grad_enabled()
}

/// A named region of the program in the profile, open until `close()`.
#[pyclass(name = "_Scope", module = "xlaprof")]
pub struct PyScope(Option<events::Scope>);

#[pymethods]
impl PyScope {
    #[new]
    fn new(py: Python<'_>, name: &str) -> PyResult<Self> {
        traced(py, "profile_scope", || Ok(events::scope(name))).map(|s| PyScope(Some(s)))
    }
    fn close(&mut self) {
        self.0.take();
    }
}

/// The engine's counters since the process started.
#[pyfunction]
pub(crate) fn counters(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in events::counters().named() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

#[pyfunction]
pub(crate) fn set_package_dir(dir: String) {
    location::set_package_dir(dir);
}

#[pyfunction]
#[pyo3(signature = (namer=None))]
pub(crate) fn set_file_namer(namer: Option<Py<PyAny>>) {
    location::set_file_namer(namer);
}

#[pyfunction]
pub(crate) fn source_files() -> std::collections::HashMap<String, String> {
    location::source_files()
}

/// A no-op op recorded from Python, for measuring the binding's cost per call.
#[pyfunction]
pub(crate) fn _trace_cost_probe(py: Python<'_>) -> PyResult<()> {
    traced(py, "probe", || Ok(()))
}
