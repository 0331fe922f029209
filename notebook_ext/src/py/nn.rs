//! The engine's modules and optimizers as Python classes. Parameters are the engine's tensors,
//! shared with Python: an optimizer step rebinds them in place, and Python sees the new values.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use xlaprof_core::nn::{Adam, Conv2d, Embedding, LayerNorm, Linear, Optimizer, Sgd};
use xlaprof_core::Tensor;

use super::tensor::PyTensor;
use super::trace::{record, traced};

/// Seeds for modules created without one: distinct per module, the same in every run.
static NEXT_SEED: AtomicU64 = AtomicU64::new(1);

fn seed(given: Option<u64>) -> u64 {
    given.unwrap_or_else(|| NEXT_SEED.fetch_add(1, Ordering::Relaxed))
}

/// The methods every module shares: `forward` (and calling the module), `weight`, `parameters`.
macro_rules! module_methods {
    ($class:ident, $name:literal, $input:ident) => {
        #[pymethods]
        impl $class {
            fn forward(&self, py: Python<'_>, $input: &PyTensor) -> PyResult<PyTensor> {
                record(py, $name, || self.0.forward(&$input.t))
            }
            fn __call__(&self, py: Python<'_>, $input: &PyTensor) -> PyResult<PyTensor> {
                self.forward(py, $input)
            }
            #[getter]
            fn weight(&self) -> PyTensor {
                PyTensor::new(self.0.weight.clone())
            }
            fn parameters(&self) -> Vec<PyTensor> {
                wrap(xlaprof_core::nn::Module::parameters(&self.0))
            }
        }
    };
}

fn wrap(ts: Vec<Tensor>) -> Vec<PyTensor> {
    ts.into_iter().map(PyTensor::new).collect()
}

#[pyclass(name = "Linear", module = "xlaprof.nn", frozen)]
pub struct PyLinear(Linear);

#[pymethods]
impl PyLinear {
    #[new]
    #[pyo3(signature = (in_features, out_features, bias=true, seed=None))]
    fn new(
        py: Python<'_>,
        in_features: usize,
        out_features: usize,
        bias: bool,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let s = self::seed(seed);
        traced(py, "Linear", || Linear::new(in_features, out_features, bias, s)).map(PyLinear)
    }
    #[getter]
    fn bias(&self) -> Option<PyTensor> {
        self.0.bias.clone().map(PyTensor::new)
    }
    fn __repr__(&self) -> String {
        let d = self.0.weight.dims();
        format!("Linear({}, {}, bias={})", d[1], d[0], self.0.bias.is_some())
    }
}

module_methods!(PyLinear, "Linear", x);

#[pyclass(name = "Conv2d", module = "xlaprof.nn", frozen)]
pub struct PyConv2d(Conv2d);

#[pymethods]
impl PyConv2d {
    #[new]
    #[pyo3(signature = (in_channels, out_channels, kernel_size, stride=1, padding=0, seed=None))]
    fn new(
        py: Python<'_>,
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        stride: i64,
        padding: i64,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let s = self::seed(seed);
        traced(py, "Conv2d", || {
            Conv2d::new(in_channels, out_channels, kernel_size, stride, padding, s)
        })
        .map(PyConv2d)
    }
    #[getter]
    fn bias(&self) -> Option<PyTensor> {
        self.0.bias.clone().map(PyTensor::new)
    }
}

module_methods!(PyConv2d, "Conv2d", x);

#[pyclass(name = "LayerNorm", module = "xlaprof.nn", frozen)]
pub struct PyLayerNorm(LayerNorm);

#[pymethods]
impl PyLayerNorm {
    #[new]
    fn new(py: Python<'_>, normalized_shape: &Bound<'_, PyAny>) -> PyResult<Self> {
        let shape: Vec<i64> = match normalized_shape.extract::<i64>() {
            Ok(n) => vec![n],
            Err(_) => normalized_shape.extract()?,
        };
        traced(py, "LayerNorm", || LayerNorm::new(&shape)).map(PyLayerNorm)
    }
    #[getter]
    fn bias(&self) -> PyTensor {
        PyTensor::new(self.0.bias.clone())
    }
}

module_methods!(PyLayerNorm, "LayerNorm", x);

#[pyclass(name = "Embedding", module = "xlaprof.nn", frozen)]
pub struct PyEmbedding(Embedding);

#[pymethods]
impl PyEmbedding {
    #[new]
    #[pyo3(signature = (num_embeddings, embedding_dim, seed=None))]
    fn new(
        py: Python<'_>,
        num_embeddings: usize,
        embedding_dim: usize,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let s = self::seed(seed);
        traced(py, "Embedding", || Embedding::new(num_embeddings, embedding_dim, s))
            .map(PyEmbedding)
    }
}

module_methods!(PyEmbedding, "Embedding", ids);

fn params(list: Vec<PyRef<'_, PyTensor>>) -> Vec<Tensor> {
    list.iter().map(|p| p.t.clone()).collect()
}

/// SGD with optional momentum and weight decay (PyTorch's semantics).
#[pyclass(name = "SGD", module = "xlaprof.optim")]
pub struct PySgd(Sgd);

#[pymethods]
impl PySgd {
    #[new]
    #[pyo3(signature = (params, lr, momentum=0.0, weight_decay=0.0))]
    fn new(
        py: Python<'_>,
        params: Vec<PyRef<'_, PyTensor>>,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
    ) -> PyResult<Self> {
        let ps = self::params(params);
        traced(py, "SGD", || {
            let sgd = Sgd::new(ps, lr).with_weight_decay(weight_decay);
            if momentum != 0.0 {
                sgd.with_momentum(momentum)
            } else {
                Ok(sgd)
            }
        })
        .map(PySgd)
    }
    /// Records the update of every parameter that has a gradient (runs at the next sync).
    fn step(&mut self, py: Python<'_>) -> PyResult<()> {
        traced(py, "SGD.step", || self.0.step())
    }
    fn zero_grad(&self) {
        self.0.zero_grad();
    }
    /// The learning rate: a graph input, so changing it does not recompile.
    #[getter]
    fn lr(&self) -> f64 {
        self.0.lr
    }
    #[setter]
    fn set_lr(&mut self, lr: f64) {
        self.0.lr = lr;
    }
}

/// Adam, or AdamW (decoupled weight decay).
#[pyclass(name = "Adam", module = "xlaprof.optim")]
pub struct PyAdam(Adam);

#[pymethods]
impl PyAdam {
    #[new]
    #[pyo3(signature = (params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=false))]
    fn new(
        py: Python<'_>,
        params: Vec<PyRef<'_, PyTensor>>,
        lr: f64,
        betas: (f64, f64),
        eps: f64,
        weight_decay: f64,
        decoupled: bool,
    ) -> PyResult<Self> {
        let ps = self::params(params);
        traced(py, "Adam", || {
            let mut a = Adam::new(ps, lr)?;
            a.betas = betas;
            a.eps = eps;
            a.weight_decay = weight_decay;
            a.decoupled = decoupled;
            Ok(a)
        })
        .map(PyAdam)
    }
    fn step(&mut self, py: Python<'_>) -> PyResult<()> {
        traced(py, "Adam.step", || self.0.step())
    }
    fn zero_grad(&self) {
        self.0.zero_grad();
    }
    #[getter]
    fn lr(&self) -> f64 {
        self.0.lr
    }
    #[setter]
    fn set_lr(&mut self, lr: f64) {
        self.0.lr = lr;
    }
}
