//! `xlaprof.Tensor`: a handle to a lazy engine tensor. Properties, conversions and `repr`;
//! the ops are in `ops.rs` and indexing in `index.rs`.

use std::collections::HashSet;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use xlaprof_core::ir::Op;
use xlaprof_core::{DType, Tensor};

use super::device::{device_type, engine_device};
use super::dtype::{dtype_name, extract_dtype, HostData, HostValues};
use super::errors::engine_error;
use super::trace::{record, traced, traced_detached};

#[pyclass(name = "Tensor", module = "xlaprof", frozen, weakref)]
pub struct PyTensor {
    pub(crate) t: Tensor,
}

impl PyTensor {
    pub(crate) fn new(t: Tensor) -> PyTensor {
        PyTensor { t }
    }
}

/// The number of distinct IR nodes a pending value depends on (no execution: it walks the IR).
fn graph_size(t: &Tensor) -> usize {
    const LIMIT: usize = 1_000_000;
    let root = t.node();
    let mut seen: HashSet<*const xlaprof_core::ir::Node> = HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if seen.len() >= LIMIT || !seen.insert(std::sync::Arc::as_ptr(&node)) {
            continue;
        }
        stack.extend(node.inputs.iter().cloned());
    }
    seen.len()
}

/// Reads a tensor to a NumPy array (a sync when it is pending), with the GIL released.
pub(crate) fn to_numpy<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    let t2 = t.clone();
    let values = traced_detached(py, "numpy", move || HostValues::read(&t2))?;
    values.into_numpy(py, t.dims())
}

/// A tensor from NumPy data (or anything `numpy.asarray` takes).
pub(crate) fn from_numpy(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let array = if array.hasattr("__array_interface__")? {
        array.clone()
    } else {
        py.import("numpy")?.call_method1("asarray", (array,))?
    };
    let host = HostData::from_numpy(&array)?;
    traced(py, "tensor", || host.upload())
}

#[pymethods]
impl PyTensor {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.dims().iter().copied())
    }

    /// What the user calls the tensor (a parameter's name): findings name a graph input by it.
    #[getter]
    fn name(&self) -> Option<&str> {
        self.t.name()
    }

    #[setter]
    fn set_name(&self, name: &str) {
        self.t.set_name(name);
    }

    /// This tensor is an in-place write's new value over `old` (the torch bridge's): it keeps
    /// `old`'s name, and its sync takes `old`'s buffer for it (core's `Tensor::take_place_of`).
    #[pyo3(name = "_take_place_of")]
    fn take_place_of(&self, old: &PyTensor) {
        self.t.take_place_of(&old.t);
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        dtype_name(self.t.dtype())
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.t.rank()
    }

    fn dim(&self) -> usize {
        self.t.rank()
    }

    fn numel(&self) -> usize {
        self.t.element_count()
    }

    #[pyo3(signature = (dim=None))]
    fn size<'py>(&self, py: Python<'py>, dim: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
        match dim {
            None => Ok(self.shape(py)?.into_any()),
            Some(d) => {
                let rank = self.t.rank() as i64;
                let i = if d < 0 { d + rank } else { d };
                let size = self.t.dims().get(i as usize).filter(|_| i >= 0).ok_or_else(|| {
                    pyo3::exceptions::PyIndexError::new_err(format!(
                        "dimension {d} is out of range for a tensor of rank {rank}"
                    ))
                })?;
                Ok(size.into_pyobject(py)?.into_any())
            }
        }
    }

    /// True while the value is IR that has not run yet.
    #[getter]
    fn is_pending(&self) -> bool {
        !self.t.is_materialized()
    }

    /// How the tensor is split over a mesh (`('data', None) over Mesh(data=4, ...)`), or None.
    #[getter]
    fn sharding(&self) -> Option<String> {
        self.t.sharding().map(|s| s.to_string())
    }

    /// Distinct IR nodes behind this value (1 once it is device data).
    #[getter]
    fn graph_size(&self) -> usize {
        graph_size(&self.t)
    }

    #[getter]
    fn requires_grad(&self) -> bool {
        self.t.requires_grad()
    }

    #[setter]
    fn set_requires_grad(&self, value: bool) {
        self.t.set_requires_grad(value);
    }

    /// Marks this tensor as a leaf whose gradient `backward` accumulates; returns it.
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_(slf: Py<Self>, requires_grad: bool) -> Py<Self> {
        slf.get().t.set_requires_grad(requires_grad);
        slf
    }

    #[getter]
    fn grad(&self) -> Option<PyTensor> {
        self.t.grad().map(PyTensor::new)
    }

    #[setter]
    fn set_grad(&self, value: Option<&PyTensor>) -> PyResult<()> {
        match value {
            None => {
                self.t.zero_grad();
                Ok(())
            }
            Some(g) => self.t.set_grad(g.t.clone()).map_err(engine_error),
        }
    }

    fn detach(&self) -> PyTensor {
        PyTensor::new(self.t.detach())
    }

    /// Back-propagates into every leaf that requires grad (the gradient is recorded, not run).
    /// `retain_graph` and `create_graph` are PyTorch's; only their defaults are supported.
    #[pyo3(signature = (gradient=None, retain_graph=None, create_graph=false))]
    fn backward(
        &self,
        py: Python<'_>,
        gradient: Option<&PyTensor>,
        retain_graph: Option<bool>,
        create_graph: bool,
    ) -> PyResult<()> {
        if retain_graph == Some(true) || create_graph {
            return Err(super::errors::Class::Autograd.err(
                "backward(retain_graph=True) and backward(create_graph=True) are not supported: \
                 xlaprof frees what backward saved, and does not record gradients of gradients",
            ));
        }
        match gradient {
            None => traced(py, "backward", || self.t.backward()),
            Some(g) => traced(py, "backward", || self.t.backward_with(&g.t)),
        }
    }

    /// The values as a NumPy array (runs what they need). `force` is accepted for PyTorch's
    /// sake: the array is always a copy.
    #[pyo3(signature = (*, force=false))]
    fn numpy<'py>(&self, py: Python<'py>, force: bool) -> PyResult<Bound<'py, PyAny>> {
        let _ = force;
        to_numpy(py, &self.t)
    }

    /// The device every tensor is on (see `xlaprof.device`).
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        engine_device(py)
    }

    /// PyTorch's `to`: `t.to(dtype)`, `t.to(device)`, `t.to(device, dtype)`, `t.to(other)` (its
    /// dtype), or keywords. The device is the one device every tensor is on, except `"cpu"`,
    /// which also computes the tensor (a sync when it is pending, as PyTorch/XLA's transfer to
    /// the CPU), so that reading it (`numpy()`, `item()`, `tolist()`) runs nothing more. Returns
    /// this tensor when nothing changes, unless `copy`.
    #[pyo3(signature = (*args, device=None, dtype=None, non_blocking=false, copy=false))]
    fn to<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        device: Option<&Bound<'py, PyAny>>,
        dtype: Option<&Bound<'py, PyAny>>,
        non_blocking: bool,
        copy: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = non_blocking;
        let py = slf.py();
        let (mut to_device, mut to_dtype) = (None::<String>, None::<DType>);
        if let Some(d) = device.filter(|d| !d.is_none()) {
            to_device = Some(device_type(d, true)?.ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "to(): device must be an xlaprof.device or a device name, not {}",
                    d.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?);
        }
        if let Some(d) = dtype.filter(|d| !d.is_none()) {
            to_dtype = Some(extract_dtype(d)?);
        }
        for arg in args.iter() {
            if let Ok(other) = arg.cast::<PyTensor>() {
                set_once(&mut to_dtype, other.get().t.dtype(), "dtype")?;
            } else if let Some(kind) = device_type(&arg, false)? {
                set_once(&mut to_device, kind, "device")?;
            } else {
                set_once(&mut to_dtype, extract_dtype(&arg)?, "dtype")?;
            }
        }
        let this = slf.get();
        let mut out: Option<PyTensor> = match to_dtype {
            Some(d) if d != this.t.dtype() => Some(record(py, "to", || this.t.cast(d))?),
            _ if copy => Some(clone_tensor(py, &this.t)?),
            _ => None,
        };
        if to_device.as_deref() == Some("cpu") {
            let t = out.as_ref().map_or(&this.t, |o| &o.t).clone();
            traced_detached(py, "to", move || t.data().map(drop))?;
        }
        match out.take() {
            Some(o) => Ok(Bound::new(py, o)?.into_any()),
            None => Ok(slf.clone().into_any()),
        }
    }

    /// `to("cpu")`: the tensor, computed (see `to`).
    fn cpu<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let t = slf.get().t.clone();
        traced_detached(slf.py(), "cpu", move || t.data().map(drop))?;
        Ok(slf.clone().into_any())
    }

    /// `copy.copy` and `copy.deepcopy`: a new tensor with the same values and `requires_grad`,
    /// cut from the autograd graph (a leaf), as PyTorch copies a leaf.
    fn __copy__(&self) -> PyTensor {
        let t = self.t.detach();
        t.set_requires_grad(self.t.requires_grad());
        PyTensor::new(t)
    }

    fn __deepcopy__(&self, memo: &Bound<'_, PyAny>) -> PyTensor {
        let _ = memo;
        self.__copy__()
    }

    /// Pickles the values (read to the host), dtype and `requires_grad`.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rebuild = py.import("xlaprof._api")?.getattr("_rebuild_tensor")?;
        let array = to_numpy(py, &self.t)?;
        let args = (array, dtype_name(self.t.dtype()), self.t.requires_grad());
        Ok((rebuild, args).into_pyobject(py)?.into_any())
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = copy;
        let array = to_numpy(py, &self.t)?;
        match dtype {
            Some(d) => array.call_method1("astype", (d,)),
            None => Ok(array),
        }
    }

    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy(py, &self.t)?.call_method0("tolist")
    }

    /// The single value, as a Python number (runs what it needs: a sync if pending).
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.t.element_count() != 1 {
            // The engine's message names the shape and the line.
            traced(py, "item", || self.t.item())?;
        }
        to_numpy(py, &self.t)?.call_method0("item")
    }

    fn __float__(&self, py: Python<'_>) -> PyResult<f64> {
        let t = self.t.clone();
        traced_detached(py, "float", move || t.item())
    }

    /// Read through `item`: an int64 above 2**53 keeps every digit (a read as f64 would not).
    fn __int__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.item(py)?.call_method0("__int__")
    }

    /// Branching on a tensor reads it: a hidden sync, as in PyTorch/XLA.
    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        let t = self.t.clone();
        traced_detached(py, "bool", move || t.item()).map(|v| v != 0.0)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.t
            .dims()
            .first()
            .map(|&d| d as usize)
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }

    fn __hash__(&self) -> u64 {
        self.t.id()
    }

    /// Shape, dtype and graph size: never runs anything.
    fn __repr__(&self) -> String {
        let node = self.t.node();
        let mut s = match &node.op {
            Op::Data(_) => format!("Tensor({}, device data", self.t.shape()),
            op => format!(
                "Tensor({}, pending {}, graph of {} nodes",
                self.t.shape(),
                op.name(),
                graph_size(&self.t)
            ),
        };
        if self.t.requires_grad() {
            s.push_str(", requires_grad");
        }
        s.push(')');
        s
    }

    /// The values, like `print(torch_tensor)`: this runs the pending graph.
    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        let array = to_numpy(py, &self.t)?;
        Ok(format!("tensor({}, dtype={})", array.str()?, dtype_name(self.t.dtype())))
    }
}

/// Sets an argument of `to` given once, positionally or by keyword.
fn set_once<T>(slot: &mut Option<T>, value: T, what: &str) -> PyResult<()> {
    if slot.is_some() {
        return Err(PyTypeError::new_err(format!("to() got the {what} twice")));
    }
    *slot = Some(value);
    Ok(())
}

/// A new tensor with `t`'s value, which later in-place changes of `t` do not reach; it is in the
/// autograd graph when `t` is (then it is two reshapes, which XLA removes).
pub(crate) fn clone_tensor(py: Python<'_>, t: &Tensor) -> PyResult<PyTensor> {
    if t.requires_grad() && super::trace::grad_enabled() {
        record(py, "clone", || t.unsqueeze(0)?.squeeze(0))
    } else {
        Ok(PyTensor::new(t.detach()))
    }
}
