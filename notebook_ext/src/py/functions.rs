//! Module-level functions: creating tensors, functional ops, sync and step, scopes, counters.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use xlaprof_core::{events, DType, Tensor};

use super::args::dims_arg;
use super::device::check_device;
use super::dtype::{extract_dtype, HostData};
use super::location;
use super::tensor::{from_numpy, PyTensor};
use super::trace::{self, record, traced, traced_detached};

fn dtype_or(dtype: Option<&Bound<'_, PyAny>>, default: DType) -> PyResult<DType> {
    dtype.map(extract_dtype).transpose().map(|d| d.unwrap_or(default))
}

fn next_seed(seed: Option<i64>) -> i64 {
    seed.unwrap_or_else(xlaprof_core::next_seed)
}

#[pyfunction]
pub(crate) fn manual_seed(seed: i64) {
    xlaprof_core::manual_seed(seed);
}

#[pyfunction]
pub(crate) fn from_array(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    from_numpy(py, array).map(PyTensor::new)
}

static BREAKING: std::sync::Mutex<Option<xlaprof_profiler::breaks::Breaking>> =
    std::sync::Mutex::new(None);

/// Breaks on a recompile or a hidden sync from now on (both false: no more).
#[pyfunction]
pub(crate) fn break_on(recompile: bool, sync: bool) {
    use xlaprof_profiler::breaks::{self, BreakOn};
    let mut slot = BREAKING.lock().unwrap_or_else(|p| p.into_inner());
    *slot = None; // the old one stops first
    if recompile || sync {
        *slot = Some(breaks::break_on(BreakOn { recompile, sync }));
    }
}

/// The variable a line of source assigns (`model = Net().to(dev)` → `model`), as the profiler
/// names graph inputs: the torch bridge names a module's parameters after it.
#[pyfunction]
pub(crate) fn assigned_variable(line: &str) -> Option<String> {
    xlaprof_profiler::variables::assigned_variable(line)
}

/// A bfloat16 tensor of an int16 array's bits, uploaded as they are (device data, no op).
#[pyfunction]
pub(crate) fn from_bfloat16_bits(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let host = HostData::bfloat16_from_bits(array)?;
    traced(py, "tensor", || host.upload()).map(PyTensor::new)
}

/// What every factory does last: checks `device=`, then records the tensor and marks it a leaf
/// that requires grad when asked (a float one only, as in PyTorch).
fn make(
    py: Python<'_>,
    what: &str,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    f: impl FnOnce() -> xlaprof_core::Result<Tensor>,
) -> PyResult<PyTensor> {
    check_device(what, device)?;
    let t = record(py, what, f)?;
    if requires_grad {
        if !t.t.dtype().is_float() {
            return Err(super::errors::Class::Autograd.err(format!(
                "{what}: only tensors of a float dtype can require gradients, not {}",
                t.t.dtype()
            )));
        }
        t.t.set_requires_grad(true);
    }
    Ok(t)
}

#[pyfunction]
#[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
pub(crate) fn zeros(
    py: Python<'_>,
    size: &Bound<'_, pyo3::types::PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (dims, dtype) = (dims_arg("zeros", size)?, dtype_or(dtype, DType::F32)?);
    make(py, "zeros", device, requires_grad, || {
        Tensor::check_sizes("zeros", &dims)?;
        Ok(Tensor::zeros(&dims, dtype))
    })
}

#[pyfunction]
#[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
pub(crate) fn ones(
    py: Python<'_>,
    size: &Bound<'_, pyo3::types::PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (dims, dtype) = (dims_arg("ones", size)?, dtype_or(dtype, DType::F32)?);
    make(py, "ones", device, requires_grad, || {
        Tensor::check_sizes("ones", &dims)?;
        Ok(Tensor::ones(&dims, dtype))
    })
}

/// The dtype PyTorch gives a Python number: bool, int64 for ints, float32 for floats.
fn number_dtype(value: &Bound<'_, PyAny>) -> PyResult<(f64, DType)> {
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Ok((f64::from(u8::from(value.extract::<bool>()?)), DType::Pred));
    }
    if let Ok(i) = value.extract::<i64>() {
        return Ok((i as f64, DType::S64));
    }
    match value.extract::<f64>() {
        Ok(v) => Ok((v, DType::F32)),
        Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a number, not {}",
            value.get_type().name()?
        ))),
    }
}

/// `size` filled with `fill_value`, in the dtype the value has when `dtype` is None (as PyTorch).
#[pyfunction]
#[pyo3(signature = (size, fill_value, *, dtype=None, device=None, requires_grad=false))]
pub(crate) fn full(
    py: Python<'_>,
    size: &Bound<'_, PyAny>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let dims = dims_arg("full", &pyo3::types::PyTuple::new(py, [size])?)?;
    let (value, inferred) = number_dtype(fill_value)?;
    let dtype = dtype_or(dtype, inferred)?;
    make(py, "full", device, requires_grad, || {
        Tensor::check_sizes("full", &dims)?;
        Ok(Tensor::full(&dims, value, dtype))
    })
}

/// `arange(end)` or `arange(start, end, step)`: int64 when all three are ints, else float32.
#[pyfunction]
#[pyo3(
    signature = (start, end=None, step=None, *, dtype=None, device=None, requires_grad=false),
    text_signature = "(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False)"
)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn arange(
    py: Python<'_>,
    start: &Bound<'_, PyAny>,
    end: Option<&Bound<'_, PyAny>>,
    step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (first, first_dtype) = number_dtype(start)?;
    let (step, step_dtype) = match step.filter(|s| !s.is_none()) {
        Some(s) => number_dtype(s)?,
        None => (1.0, DType::S64),
    };
    let ((start, end), end_dtype) = match end.filter(|e| !e.is_none()) {
        Some(e) => {
            let (end, end_dtype) = number_dtype(e)?;
            ((first, end), end_dtype)
        }
        None => ((0.0, first), DType::S64),
    };
    let integral = [first_dtype, step_dtype, end_dtype].iter().all(|d| !d.is_float());
    let dtype = dtype_or(dtype, if integral { DType::S64 } else { DType::F32 })?;
    make(py, "arange", device, requires_grad, || Tensor::arange(start, end, step, dtype))
}

/// The `n` x `m` identity (`m` defaults to `n`).
#[pyfunction]
#[pyo3(signature = (n, m=None, *, dtype=None, device=None, requires_grad=false))]
pub(crate) fn eye(
    py: Python<'_>,
    n: i64,
    m: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let dtype = dtype_or(dtype, DType::F32)?;
    make(py, "eye", device, requires_grad, || match m {
        None => Tensor::eye(n, dtype),
        Some(m) if m == n => Tensor::eye(n, dtype),
        Some(m) => {
            let rows = Tensor::arange(0.0, n as f64, 1.0, DType::S64)?.reshape(&[n, 1])?;
            let cols = Tensor::arange(0.0, m as f64, 1.0, DType::S64)?.reshape(&[1, m])?;
            rows.eq(&cols)?.cast(dtype)
        }
    })
}

/// Uniform values in [0, 1); `seed` (an xlaprof extension) fixes them, else `manual_seed`'s
/// sequence does.
#[pyfunction]
#[pyo3(signature = (*size, seed=None, dtype=None, device=None, requires_grad=false))]
pub(crate) fn rand(
    py: Python<'_>,
    size: &Bound<'_, pyo3::types::PyTuple>,
    seed: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (dims, dtype, seed) =
        (dims_arg("rand", size)?, dtype_or(dtype, DType::F32)?, next_seed(seed));
    make(py, "rand", device, requires_grad, || Tensor::rand(&dims, seed, dtype))
}

/// Standard normal values; `seed` as in `rand`.
#[pyfunction]
#[pyo3(signature = (*size, seed=None, dtype=None, device=None, requires_grad=false))]
pub(crate) fn randn(
    py: Python<'_>,
    size: &Bound<'_, pyo3::types::PyTuple>,
    seed: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (dims, dtype, seed) =
        (dims_arg("randn", size)?, dtype_or(dtype, DType::F32)?, next_seed(seed));
    make(py, "randn", device, requires_grad, || Tensor::randn(&dims, seed, dtype))
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

/// `where(condition, input, other)`: `input` where `condition` is true, else `other`; either
/// may be a number.
#[pyfunction]
#[pyo3(name = "where")]
pub(crate) fn where_(
    py: Python<'_>,
    condition: &PyTensor,
    input: &Bound<'_, PyAny>,
    other: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let operand = |v: &Bound<'_, PyAny>| -> PyResult<Result<Tensor, (f64, DType)>> {
        match v.cast::<PyTensor>() {
            Ok(t) => Ok(Ok(t.get().t.clone())),
            Err(_) => number_dtype(v).map(Err),
        }
    };
    let (a, b) = (operand(input)?, operand(other)?);
    record(py, "where", || {
        // A number takes the other operand's dtype, as `x + 0.5` does.
        let scalar = |(v, d): (f64, DType), other: &Result<Tensor, (f64, DType)>| match other {
            Ok(t) => Tensor::scalar(v, super::args::scalar_dtype(t, v)),
            Err((_, od)) => Tensor::scalar(v, if od.is_float() { *od } else { d }),
        };
        let x = a.clone().or_else(|n| Ok::<_, xlaprof_core::Error>(scalar(n, &b)))?;
        let y = b.clone().or_else(|n| Ok::<_, xlaprof_core::Error>(scalar(n, &a)))?;
        Tensor::where_(&condition.t, &x, &y)
    })
}

/// An int or a pair of ints (PyTorch's `_pair`), for strides, paddings and kernel sizes;
/// `default` when None.
fn pair_or(what: &str, value: Option<&Bound<'_, PyAny>>, default: i64) -> PyResult<[i64; 2]> {
    match value.filter(|v| !v.is_none()) {
        Some(v) => pair(what, v),
        None => Ok([default; 2]),
    }
}

/// An int or a pair of ints (PyTorch's `_pair`), for strides, paddings and kernel sizes.
fn pair(what: &str, value: &Bound<'_, PyAny>) -> PyResult<[i64; 2]> {
    if let Ok(v) = value.extract::<i64>() {
        return Ok([v; 2]);
    }
    value.extract::<(i64, i64)>().map(|(a, b)| [a, b]).map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be an int or a pair of ints, not {}",
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}

/// 2-D convolution of `[N, C, H, W]` by `[O, C/groups, kH, kW]`, plus `bias` `[O]`.
#[pyfunction]
#[pyo3(
    signature = (input, weight, bias=None, stride=None, padding=None, dilation=None, groups=1),
    text_signature = "(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)"
)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d(
    py: Python<'_>,
    input: &PyTensor,
    weight: &PyTensor,
    bias: Option<&PyTensor>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: i64,
) -> PyResult<PyTensor> {
    let (s, p, d) = (
        pair_or("stride", stride, 1)?,
        pair_or("padding", padding, 0)?,
        pair_or("dilation", dilation, 1)?,
    );
    record(py, "conv2d", || {
        let y = input.t.conv2d(&weight.t, s, p, d, groups)?;
        match bias {
            Some(b) => y.add(&b.t.reshape(&[1, -1, 1, 1])?),
            None => Ok(y),
        }
    })
}

/// The pooling window, stride (the window when None) and padding, as pairs.
fn pool_args(
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
) -> PyResult<([i64; 2], [i64; 2], [i64; 2])> {
    let k = pair("kernel_size", kernel_size)?;
    let s = match stride.filter(|s| !s.is_none()) {
        Some(s) => pair("stride", s)?,
        None => k,
    };
    Ok((k, s, pair_or("padding", padding, 0)?))
}

#[pyfunction]
#[pyo3(
    signature = (input, kernel_size, stride=None, padding=None),
    text_signature = "(input, kernel_size, stride=None, padding=0)"
)]
pub(crate) fn max_pool2d(
    py: Python<'_>,
    input: &PyTensor,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (k, s, p) = pool_args(kernel_size, stride, padding)?;
    record(py, "max_pool2d", || input.t.max_pool2d(k, s, p))
}

#[pyfunction]
#[pyo3(
    signature = (input, kernel_size, stride=None, padding=None),
    text_signature = "(input, kernel_size, stride=None, padding=0)"
)]
pub(crate) fn avg_pool2d(
    py: Python<'_>,
    input: &PyTensor,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (k, s, p) = pool_args(kernel_size, stride, padding)?;
    record(py, "avg_pool2d", || input.t.avg_pool2d(k, s, p))
}

/// Mean cross-entropy of logits `[N, C]` against integer class indices `[N]` (the engine's op;
/// `xlaprof.nn.functional.cross_entropy` adds PyTorch's other arguments).
#[pyfunction]
pub(crate) fn cross_entropy(
    py: Python<'_>,
    input: &PyTensor,
    target: &PyTensor,
) -> PyResult<PyTensor> {
    record(py, "cross_entropy", || input.t.cross_entropy(&target.t))
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

/// `input @ weight.T + bias` (PyTorch's `nn.functional.linear`), the graph of `nn.Linear`.
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None))]
pub(crate) fn linear(
    py: Python<'_>,
    input: &PyTensor,
    weight: &PyTensor,
    bias: Option<&PyTensor>,
) -> PyResult<PyTensor> {
    record(py, "linear", || {
        let y = input.t.matmul(&weight.t.transpose(0, 1)?)?;
        match bias {
            Some(b) => y.add(&b.t),
            None => Ok(y),
        }
    })
}

/// The rows of `weight` at the integer positions `input`.
#[pyfunction]
pub(crate) fn embedding(py: Python<'_>, input: &PyTensor, weight: &PyTensor) -> PyResult<PyTensor> {
    record(py, "embedding", || weight.t.embedding(&input.t))
}

/// Zeroes each element with probability `p` and scales the others by `1 / (1 - p)` when
/// `training`. `inplace=True` is accepted and returns the result as a new tensor.
#[pyfunction]
#[pyo3(signature = (input, p=0.5, training=true, inplace=false, *, seed=None))]
pub(crate) fn dropout(
    py: Python<'_>,
    input: &PyTensor,
    p: f64,
    training: bool,
    inplace: bool,
    seed: Option<i64>,
) -> PyResult<PyTensor> {
    let _ = inplace;
    if !(0.0..=1.0).contains(&p) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    let seed = next_seed(seed);
    record(py, "dropout", || {
        if p == 1.0 && training {
            input.t.mul_scalar(0.0)
        } else {
            input.t.dropout(p, seed, training)
        }
    })
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

/// Waits until every program launched so far has finished on the device (torch_xla's
/// `wait_device_ops`): on a GPU a sync returns once its program is queued.
#[pyfunction]
pub(crate) fn wait(py: Python<'_>) -> PyResult<()> {
    // What ran ahead under detect_anomaly() is checked once it has finished.
    traced_detached(py, "wait", || {
        xlaprof_core::wait().and_then(|()| xlaprof_core::check_anomalies())
    })
}

/// Whether a sync returns once its program is queued (`XLAPROF_RUN_AHEAD`; GPUs by default):
/// what a step's own results say is then read at the next sync, not at this one.
#[pyfunction]
pub(crate) fn runs_ahead(py: Python<'_>) -> PyResult<bool> {
    py.detach(|| xlaprof_core::engine().map(|e| e.runs_ahead())).map_err(super::errors::engine_error)
}

/// The values of an integer tensor a sync computed already, as i64, read without counting as
/// the user's read (the index check's bounds, computed in the step's own graph and no sync of
/// the program's): None while it is still pending. Waits for its program when it runs ahead.
#[pyfunction]
pub(crate) fn read_computed(py: Python<'_>, t: &PyTensor) -> PyResult<Option<Vec<i64>>> {
    let xlaprof_core::ir::Op::Data(data) = &t.t.node().op else {
        return Ok(None);
    };
    let data = data.clone();
    py.detach(move || data.to_vec::<i64>()).map(Some).map_err(super::errors::engine_error)
}

/// A tensor's node, held weakly (see `needs`).
#[pyclass(name = "_NodeHandle", module = "xlaprof", frozen)]
pub(crate) struct NodeHandle(std::sync::Weak<xlaprof_core::ir::Node>);

/// `t`'s node, held without keeping it alive.
#[pyfunction]
pub(crate) fn node_handle(t: &PyTensor) -> NodeHandle {
    NodeHandle(t.t.node_handle())
}

/// For each node, whether reading `t` would compute it.
#[pyfunction]
pub(crate) fn needs(py: Python<'_>, t: &PyTensor, nodes: Vec<PyRef<'_, NodeHandle>>) -> PyResult<Vec<bool>> {
    let (t, nodes): (Tensor, Vec<_>) = (t.t.clone(), nodes.iter().map(|n| n.0.clone()).collect());
    py.detach(move || t.needs(&nodes)).map_err(super::errors::engine_error)
}

/// Computes `t` (pending) as reading it does, with `riders` computed by the same program (the
/// index check's bounds: no sync of their own); the read that follows then runs nothing.
#[pyfunction]
pub(crate) fn compute_with(py: Python<'_>, t: &PyTensor, riders: Vec<PyRef<'_, PyTensor>>) -> PyResult<()> {
    let (t, riders): (Tensor, Vec<Tensor>) = (t.t.clone(), riders.iter().map(|r| r.t.clone()).collect());
    traced_detached(py, "numpy", move || t.compute_with(&riders.iter().collect::<Vec<_>>()))
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

/// Tells the profiler that `op` ran on the host for want of a lowering (the torch bridge's CPU
/// fallback), at the caller's line, taking `seconds` in all.
#[pyfunction]
pub(crate) fn host_fallback(py: Python<'_>, op: &str, seconds: f64) {
    trace::not_tracing(nanoseconds(seconds));
    xlaprof_core::events::host_fallback(op, here(py), nanoseconds(seconds));
}

/// Tells the profiler that the caller's op (`op`, the torch bridge's `aten::index` of a mask)
/// read its result's size from the device, `size` (the count of `what`), in `seconds`.
#[pyfunction]
pub(crate) fn size_read(py: Python<'_>, op: &str, what: &str, size: u64, seconds: f64) {
    xlaprof_core::events::size_read(op, what, size, here(py), nanoseconds(seconds));
}

/// Tells the profiler that the caller's loop waited `seconds` for the next batch of its input
/// pipeline (the torch bridge's `DeviceLoader`).
#[pyfunction]
pub(crate) fn data_wait(py: Python<'_>, seconds: f64) {
    xlaprof_core::events::data_wait(here(py), nanoseconds(seconds));
}

/// Whether anything listens to the engine's events (a profile records): what a front end's
/// own instrumentation asks before measuring anything.
#[pyfunction]
pub(crate) fn profiling() -> bool {
    xlaprof_core::events::enabled()
}

/// Tells the profiler that this process entered the `seq`th collective of its process group
/// `group` with the job's other processes (torch.distributed's), at the caller's line.
#[pyfunction]
pub(crate) fn collective_enter(py: Python<'_>, group: &str, seq: u64, op: &str, bytes: u64) {
    xlaprof_core::events::collective_enter(group, seq, op, bytes, here(py));
}

/// Tells the profiler that this process left collective `seq` of `group`.
#[pyfunction]
pub(crate) fn collective_leave(group: &str, seq: u64) {
    xlaprof_core::events::collective_leave(group, seq);
}

/// `dims` with its -1 inferred for `count` elements, as a reshape reads them, or None where no
/// reshape fits (`xlaprof_core::shape::infer_dims`: the rule's one home; the torch bridge's view
/// lowerings ask here).
#[pyfunction]
pub(crate) fn infer_dims(count: i64, dims: Vec<i64>) -> Option<Vec<i64>> {
    xlaprof_core::shape::infer_dims(count, &dims)
}

/// Tells the profiler what a debugging tool written in Python caught (`tool`: `check`,
/// `compare_with_eager`, `break_on`): at `site` (file, line, function), the line behind it,
/// else at the caller's line.
#[pyfunction]
#[pyo3(signature = (tool, message, site=None))]
pub(crate) fn caught(
    py: Python<'_>,
    tool: &str,
    message: &str,
    site: Option<(String, u32, String)>,
) -> PyResult<()> {
    let Some(tool) = events::Tool::from_name(tool) else {
        let names: Vec<&str> = events::Tool::ALL.iter().map(|t| t.name()).collect();
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown debugging tool {tool:?}; the tools are {}",
            names.join(", ")
        )));
    };
    let at = match site.and_then(|site| location::from_stack(py, &[site])) {
        Some(site) => xlaprof_core::location::SourceLocation::External(site),
        None => here(py),
    };
    events::caught(tool, message, at);
    Ok(())
}

/// The caller's Python line, with the user's line that called into it when it is a library's
/// (or this Rust line, when no Python frame runs).
fn here(py: Python<'_>) -> xlaprof_core::location::SourceLocation {
    match location::current_with_caller(py) {
        Some(l) => xlaprof_core::location::SourceLocation::External(l),
        None => xlaprof_core::location::SourceLocation::caller(),
    }
}

/// Seconds from Python as the engine's nanoseconds (a negative duration is none).
pub(crate) fn nanoseconds(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e9) as u64
}

#[pyfunction]
pub(crate) fn add_library_dir(dir: String) {
    location::add_library_dir(dir);
}

#[pyfunction]
pub(crate) fn add_internal_dir(dir: String) {
    location::add_internal_dir(dir);
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
