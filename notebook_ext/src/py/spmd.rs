//! Many devices from Python, PyTorch/XLA's way: `xp.Mesh(device_ids, mesh_shape, axis_names)`,
//! `xp.mark_sharding(t, mesh, ("data", None))`, a global mesh, `xp.devices()`.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use xlaprof_core::spmd::{self, Mesh};

use super::errors::{engine_error, guarded, Class};
use super::tensor::PyTensor;
use super::trace::traced_detached;

/// Devices laid out along named axes. `xp.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))`.
///
/// The CPU plugin starts with as many devices as the first mesh needs when the mesh is made
/// before the first tensor (or with `XLAPROF_CPU_DEVICES`).
#[pyclass(name = "Mesh", module = "xlaprof", frozen, eq)]
#[derive(PartialEq)]
pub(crate) struct PyMesh {
    pub(crate) mesh: Arc<Mesh>,
}

#[pymethods]
impl PyMesh {
    #[new]
    #[pyo3(signature = (device_ids, mesh_shape, axis_names = None))]
    fn new(
        py: Python<'_>,
        device_ids: Vec<usize>,
        mesh_shape: Vec<usize>,
        axis_names: Option<Vec<String>>,
    ) -> PyResult<PyMesh> {
        let names = axis_names
            .unwrap_or_else(|| (0..mesh_shape.len()).map(|i| format!("axis_{i}")).collect());
        let needed = device_ids.iter().max().map_or(0, |m| m + 1);
        guarded("Mesh", || {
            let mesh = py.detach(|| {
                let engine = xlaprof_core::engine_with_devices(needed)?;
                Mesh::new(device_ids, mesh_shape, names, engine.device_count())
            });
            Ok(PyMesh { mesh: Arc::new(mesh.map_err(engine_error)?) })
        })
    }

    #[getter]
    fn device_ids(&self) -> Vec<usize> {
        self.mesh.device_ids().to_vec()
    }

    #[getter]
    fn mesh_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.mesh.shape())
    }

    #[getter]
    fn axis_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.mesh.axis_names())
    }

    fn size(&self) -> usize {
        self.mesh.size()
    }

    fn __len__(&self) -> usize {
        self.mesh.size()
    }

    fn __repr__(&self) -> String {
        let tuple = |items: Vec<String>| match items.len() {
            1 => format!("({},)", items[0]),
            _ => format!("({})", items.join(", ")),
        };
        format!(
            "Mesh(device_ids={:?}, mesh_shape={}, axis_names={})",
            self.mesh.device_ids(),
            tuple(self.mesh.shape().iter().map(|n| n.to_string()).collect()),
            tuple(self.mesh.axis_names().iter().map(|a| format!("'{a}'")).collect())
        )
    }
}

/// A 1-d mesh over the first `devices` devices (all of them when None: the engine's, or 4 CPU
/// devices if it has not started), named `axis_name`.
#[pyfunction]
#[pyo3(signature = (axis_name = "data", devices = None))]
pub(crate) fn get_1d_mesh(
    py: Python<'_>,
    axis_name: &str,
    devices: Option<usize>,
) -> PyResult<PyMesh> {
    let count = py.detach(|| -> xlaprof_core::Result<usize> {
        match devices {
            Some(n) => xlaprof_core::engine_with_devices(n).map(|_| n),
            None => {
                // A CPU engine not started yet starts with 4; else all the devices it has.
                xlaprof_core::request_devices(4);
                xlaprof_core::engine().map(|e| e.device_count())
            }
        }
    });
    let count = count.map_err(engine_error)?;
    PyMesh::new(py, (0..count).collect(), vec![count], Some(vec![axis_name.to_string()]))
}

/// One partition-spec entry: None (not split), an axis name, or a tuple of axis names.
fn spec_entry(entry: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if entry.is_none() {
        return Ok(Vec::new());
    }
    if let Ok(name) = entry.extract::<String>() {
        return Ok(vec![name]);
    }
    if let Ok(names) = entry.extract::<Vec<String>>() {
        return Ok(names);
    }
    Err(PyTypeError::new_err(format!(
        "mark_sharding: each entry of the partition spec is None, an axis name or a tuple of axis \
         names, not {}",
        entry.repr()?
    )))
}

/// Splits `t` over `mesh` (the global mesh when None) as `partition_spec` says: one entry per
/// dimension, None (whole), an axis name, or a tuple of names (split over both, the first
/// major). Device data is split now and its shards sent to the devices; a pending tensor is
/// computed split. Returns `t`.
#[pyfunction]
#[pyo3(signature = (t, mesh, partition_spec))]
pub(crate) fn mark_sharding<'py>(
    py: Python<'py>,
    t: Bound<'py, PyTensor>,
    mesh: Option<PyRef<'py, PyMesh>>,
    partition_spec: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTensor>> {
    let mesh = match mesh {
        Some(m) => m.mesh.clone(),
        None => spmd::global_mesh().ok_or_else(|| {
            Class::Sharding
                .err("mark_sharding: no mesh given and no global mesh set (xp.set_global_mesh)")
        })?,
    };
    let entries: Vec<Bound<'py, PyAny>> = match partition_spec.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter().collect(),
        Err(_) => match partition_spec.cast::<PyList>() {
            Ok(list) => list.iter().collect(),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "mark_sharding: the partition spec is a tuple with one entry per dimension, \
                     not {}",
                    partition_spec.repr()?
                )))
            }
        },
    };
    let spec = entries.iter().map(spec_entry).collect::<PyResult<Vec<_>>>()?;
    let tensor = t.borrow().t.clone();
    traced_detached(py, "mark_sharding", move || tensor.mark_sharding(&mesh, &spec))?;
    Ok(t)
}

/// Splits `t` as `like` is split, if `like` is (the torch bridge's `zeros_like` of a split
/// parameter: an optimizer's state follows its parameter).
#[pyfunction]
pub(crate) fn shard_like(
    py: Python<'_>,
    t: PyRef<'_, PyTensor>,
    like: PyRef<'_, PyTensor>,
) -> PyResult<()> {
    let (t, like) = (t.t.clone(), like.t.clone());
    traced_detached(py, "shard_like", move || t.shard_like(&like))
}

/// Makes `mesh` the one `mark_sharding` uses when given None.
#[pyfunction]
pub(crate) fn set_global_mesh(mesh: Option<PyRef<'_, PyMesh>>) {
    spmd::set_global_mesh(mesh.map(|m| m.mesh.clone()));
}

#[pyfunction]
pub(crate) fn get_global_mesh() -> Option<PyMesh> {
    spmd::global_mesh().map(|mesh| PyMesh { mesh })
}

/// How many devices the engine has, or None before it starts (it starts with as many as its
/// settings or a mesh ask for: asking `devices()` would start it).
#[pyfunction]
pub(crate) fn started_device_count() -> Option<usize> {
    xlaprof_core::started_engine().map(|engine| engine.device_count())
}

/// The engine's devices, as `xp.device`s (`device(type='cpu', index=0)`, ...).
#[pyfunction]
pub(crate) fn devices(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyAny>>> {
    let engine = py.detach(xlaprof_core::engine).map_err(engine_error)?;
    let device = py.import("xlaprof._device")?.getattr("engine_device_at")?;
    (0..engine.device_count()).map(|i| device.call1((i,))).collect()
}
