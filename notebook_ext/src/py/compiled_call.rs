//! The work a torch.compile graph's call does per argument, natively (`xlaprof/torch/_compile.py`
//! says what it is). Dynamo's guards and AOTAutograd's unwrapping ask each lazy argument for its
//! meta stand-in, and the backend takes the stand-ins back to their lazy tensors: a compiled
//! AdamW step has four arguments per parameter, where a few Python statements each were a
//! large part of the call.

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyType};

use super::torch_dispatch::{attributes, owns_its_value};

/// `LazyTensor._compile_meta`: the tensor's meta stand-in, carrying its value until a compiled
/// graph reads it (`_compile.meta_of`). The common case natively: a stand-in already made, for
/// a tensor that owns its value and is not traced; `slow` (`meta_of`) otherwise.
#[pyclass(name = "StandIn", module = "xlaprof", frozen)]
pub(crate) struct PyStandIn {
    slow: Py<PyAny>,
}

#[pymethods]
impl PyStandIn {
    #[new]
    fn new(slow: Py<PyAny>) -> Self {
        PyStandIn { slow }
    }

    fn __get__<'py>(
        slf: &Bound<'py, Self>,
        tensor: Option<Bound<'py, PyAny>>,
        _class: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(t) = tensor else { return Ok(slf.clone().into_any()) };
        let py = slf.py();
        let own = attributes(&t)?;
        if let Some(meta) = own.get_item(intern!(py, "_meta"))? {
            let traced = own.get_item(intern!(py, "_traced"))?;
            if !traced.map_or(Ok(false), |t| t.is_truthy())? && owns_its_value(&own)? {
                if let Some(value) = own.get_item(intern!(py, "_xp"))? {
                    attributes(&meta)?.set_item(intern!(py, "_xlaprof_value"), value)?;
                    return Ok(meta);
                }
            }
        }
        slf.get().slow.bind(py).call1((t,))
    }
}

/// A compiled graph's runtime arguments as it takes them (`_compile.CompiledGraph`'s call): a
/// meta stand-in becomes its lazy tensor (the user's own, which the graph may write), or a new
/// lazy tensor (`lazy`, the class) of the value it carries where AOTAutograd has let go of the
/// tensor; anything else (`tensor` is `torch.Tensor`, whose meta instances are the stand-ins)
/// is taken as it is.
#[pyfunction]
pub(crate) fn compiled_arguments<'py>(
    arguments: &Bound<'py, PyList>,
    tensor: &Bound<'py, PyType>,
    lazy: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyList>> {
    let py = arguments.py();
    let (owner_key, value_key) = (intern!(py, "_xlaprof_owner"), intern!(py, "_xlaprof_value"));
    let taken = PyList::empty(py);
    for a in arguments.iter() {
        if !a.get_type().is(tensor) || !a.getattr(intern!(py, "is_meta"))?.is_truthy()? {
            taken.append(a)?;
            continue;
        }
        let own = attributes(&a)?;
        let owner = own.get_item(owner_key)?;
        if let Some(owner) = &owner {
            let t = owner.call0()?;
            if !t.is_none() {
                if own.contains(value_key)? {
                    own.del_item(value_key)?;
                }
                taken.append(t)?;
                continue;
            }
        }
        // The tensor is gone (a gradient AOTAutograd passed on): its value, which the stand-in
        // of a tensor no longer there gives up (a stand-in a graph returned keeps its own).
        let value = own.get_item(value_key)?;
        let Some(value) = value.filter(|v| !v.is_none()) else {
            return Err(PyRuntimeError::new_err(
                "xlaprof: a compiled graph was given a meta tensor that stands for no tensor on \
                 the xlaprof device (its tensor is gone, and it carries no value); the backend \
                 takes tensors on the device (`xt.device()`) or the CPU",
            ));
        };
        if owner.is_some() {
            own.del_item(value_key)?;
        }
        taken.append(lazy.call1((value,))?)?;
    }
    Ok(taken)
}
