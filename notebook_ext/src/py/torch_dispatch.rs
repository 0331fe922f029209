//! The torch bridge's dispatcher, natively for the common case (`xlaprof/torch/_dispatch.py`
//! is the whole of it; this is its first step).
//!
//! Every aten op on a lazy tensor reaches `LazyTensor.__torch_dispatch__`. When the op has a
//! functional lowering and its arguments are lazy tensors that own their values (no views, no
//! complex numbers), real numbers and plain values, this does what the Python dispatcher does for
//! it (unwrap the arguments, call the lowering, wrap the engine tensors it returns) without the
//! Python frames in between, which cost more than the engine's own work. Anything else (keyword
//! arguments, views, complex tensors, CPU tensors, a lowering that declines the call) goes to
//! the Python dispatcher, which decides as it always did.

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple, PyType};
use xlaprof_core::DType;

use super::dtype::dtype_name;
use super::tensor::PyTensor;

struct Bridge {
    /// `LazyTensor`: the wrapper subclass.
    lazy: Py<PyType>,
    /// aten op -> its functional lowering, for the ops whose route is that lowering alone.
    lowerings: Py<PyDict>,
    /// The Python dispatcher: `dispatch(func, args, kwargs)`.
    python: Py<PyAny>,
    /// The exception by which a lowering declines a call (`_lowerings._Unsupported`).
    unsupported: Py<PyType>,
    /// Types passed to a lowering as they are (numbers, strings, torch dtypes and devices).
    plain: Vec<Py<PyType>>,
    /// `torch.Tensor._make_wrapper_subclass`, and its keyword arguments for each engine dtype
    /// (`dtype=..., device=...`).
    make_wrapper: Py<PyAny>,
    wrapper_kwargs: Vec<(DType, Py<PyDict>)>,
}

static BRIDGE: PyOnceLock<Bridge> = PyOnceLock::new();

/// Registers the bridge's classes and tables (once per process; `xlaprof.torch` does it).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn torch_bridge_init(
    py: Python<'_>,
    lazy: Py<PyType>,
    lowerings: Py<PyDict>,
    python: Py<PyAny>,
    unsupported: Py<PyType>,
    plain: Vec<Py<PyType>>,
    make_wrapper: Py<PyAny>,
    torch_dtypes: &Bound<'_, PyDict>,
    device: Py<PyAny>,
) -> PyResult<()> {
    let mut wrapper_kwargs = Vec::new();
    for d in DType::ALL {
        if matches!(d, DType::C64 | DType::C128) {
            // A complex result is made by `LazyTensor(...)`, which notes that it is complex.
            continue;
        }
        if let Some(torch_dtype) = torch_dtypes.get_item(dtype_name(d))? {
            let kwargs = PyDict::new(py);
            kwargs.set_item(intern!(py, "dtype"), torch_dtype)?;
            kwargs.set_item(intern!(py, "device"), device.bind(py))?;
            wrapper_kwargs.push((d, kwargs.unbind()));
        }
    }
    let bridge = Bridge { lazy, lowerings, python, unsupported, plain, make_wrapper, wrapper_kwargs };
    BRIDGE
        .set(py, bridge)
        .map_err(|_| PyRuntimeError::new_err("the torch bridge is registered once per process"))
}

/// `LazyTensor.__torch_dispatch__` (a class method): an aten op on lazy tensors.
#[pyfunction]
#[pyo3(signature = (cls, func, types, args=None, kwargs=None))]
pub(crate) fn torch_dispatch<'py>(
    py: Python<'py>,
    cls: &Bound<'py, PyAny>,
    func: &Bound<'py, PyAny>,
    types: &Bound<'py, PyAny>,
    args: Option<&Bound<'py, PyTuple>>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let _ = (cls, types);
    let empty = PyTuple::empty(py);
    let args = args.unwrap_or(&empty);
    let bridge = BRIDGE
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("the torch bridge is not registered (import xlaprof.torch)"))?;
    let python = || {
        let kwargs = match kwargs {
            Some(k) => k.clone(),
            None => PyDict::new(py),
        };
        bridge.python.bind(py).call1((func, args, kwargs))
    };
    if kwargs.is_some_and(|k| !k.is_empty()) {
        return python();
    }
    let Some(lowering) = bridge.lowerings.bind(py).get_item(func)? else {
        return python();
    };
    let mut unwrapped = Vec::with_capacity(args.len());
    for a in args.iter() {
        match bridge.unwrap(&a, true)? {
            Some(v) => unwrapped.push(v),
            None => return python(),
        }
    }
    let result = match lowering.call1(PyTuple::new(py, unwrapped)?) {
        Ok(r) => r,
        Err(e) if e.is_instance(py, bridge.unsupported.bind(py)) => return python(),
        Err(e) => return Err(e),
    };
    bridge.wrap(&result)
}

impl Bridge {
    /// An argument as a lowering takes it (`_dispatch._unwrap`), or `None` where the Python
    /// dispatcher must decide. Lists and tuples are looked into one level deep.
    fn unwrap<'py>(&self, a: &Bound<'py, PyAny>, look_inside: bool) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = a.py();
        let ty = a.get_type();
        if ty.is(self.lazy.bind(py)) {
            if !a.getattr(intern!(py, "_root"))?.is_none() || a.getattr(intern!(py, "_complex"))?.is_truthy()? {
                return Ok(None);
            }
            return Ok(Some(a.getattr(intern!(py, "_xp"))?));
        }
        if self.plain.iter().any(|p| ty.is(p.bind(py))) {
            return Ok(Some(a.clone()));
        }
        let is_list = a.is_exact_instance_of::<PyList>();
        if look_inside && (is_list || a.is_exact_instance_of::<PyTuple>()) {
            let mut items = Vec::new();
            for item in a.try_iter()? {
                match self.unwrap(&item?, false)? {
                    Some(v) => items.push(v),
                    None => return Ok(None),
                }
            }
            return Ok(Some(if is_list {
                PyList::new(py, items)?.into_any()
            } else {
                PyTuple::new(py, items)?.into_any()
            }));
        }
        Ok(None)
    }

    /// A lowering's result as torch gets it (`_dispatch._wrap`): engine tensors in lazy ones.
    fn wrap<'py>(&self, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = x.py();
        if let Ok(t) = x.cast::<PyTensor>() {
            let tensor = &t.get().t;
            let Some((_, kwargs)) = self.wrapper_kwargs.iter().find(|(d, _)| *d == tensor.dtype()) else {
                return self.lazy.bind(py).call1((x,));
            };
            // What `LazyTensor.__new__` does, for a real dtype.
            let shape = PyTuple::new(py, tensor.dims().iter().copied())?;
            let wrapper = self
                .make_wrapper
                .bind(py)
                .call((self.lazy.bind(py), shape), Some(kwargs.bind(py)))?;
            wrapper.setattr(intern!(py, "_xp"), x)?;
            return Ok(wrapper);
        }
        if x.is_exact_instance_of::<PyTuple>() {
            let items = x.try_iter()?.map(|v| self.wrap(&v?)).collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any());
        }
        if x.is_exact_instance_of::<PyList>() {
            let items = x.try_iter()?.map(|v| self.wrap(&v?)).collect::<PyResult<Vec<_>>>()?;
            return Ok(PyList::new(py, items)?.into_any());
        }
        if x.is_none()
            || x.get_type().is(self.lazy.bind(py))
            || x.is_exact_instance_of::<PyBool>()
            || x.is_exact_instance_of::<PyInt>()
            || x.is_exact_instance_of::<PyFloat>()
        {
            return Ok(x.clone());
        }
        self.lazy.bind(py).call1((x,))
    }
}
