//! The engine's ops as `Tensor` methods: reductions, shape and movement, indexing, linear algebra,
//! dtype conversions (elementwise ops and operators are `arith.rs`). Each is recorded (not run)
//! at the caller's Python line; shape errors are raised there, naming both shapes.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use xlaprof_core::{DType, Tensor};

use super::args::*;
use super::dtype::extract_dtype;
use super::tensor::{clone_tensor, PyTensor};
use super::trace::{record, traced};

type EngineResult = xlaprof_core::Result<Tensor>;

/// `sum` and `mean` over `dim` (None: every dim), as `t.sum(dim=None, keepdim=False, *,
/// dtype=None)`. As in PyTorch, `dtype` casts first, and the sum of integers or bools is int64.
macro_rules! typed_reductions {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    dim: Option<&Bound<'_, PyAny>>,
                    keepdim: bool,
                    dtype: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<PyTensor> {
                    let axes = axes(dim)?;
                    let dtype = optional_dtype(dtype)?.or_else(|| {
                        let d = self.t.dtype();
                        (stringify!($name) == "sum" && !d.is_float() && !d.is_complex())
                            .then_some(DType::S64)
                    });
                    record(py, stringify!($name), || match dtype {
                        Some(d) => self.t.cast(d)?.$name(&axes, keepdim),
                        None => self.t.$name(&axes, keepdim),
                    })
                }
            )*
        }
    };
}

typed_reductions!(sum, mean);

/// `max`/`min` as PyTorch has them: over everything (`t.max()`), along one dim with the
/// positions (`t.max(1)` is `(values, indices)`), or elementwise with another tensor.
fn extreme<'py>(
    py: Python<'py>,
    t: &Tensor,
    dim: Option<&Bound<'py, PyAny>>,
    keepdim: bool,
    max: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let what = if max { "max" } else { "min" };
    let Some(dim) = dim.filter(|d| !d.is_none()) else {
        let out =
            record(py, what, || if max { t.amax(&[], keepdim) } else { t.amin(&[], keepdim) })?;
        return Ok(Bound::new(py, out)?.into_any());
    };
    if let Ok(other) = dim.cast::<PyTensor>() {
        let other = other.get().t.clone();
        let out = record(py, what, || if max { t.maximum(&other) } else { t.minimum(&other) })?;
        return Ok(Bound::new(py, out)?.into_any());
    }
    let Ok(axis) = dim.extract::<i64>() else {
        return Err(PyTypeError::new_err(format!(
            "{what}(dim) takes one int dim (or a tensor, for the elementwise {what}imum), not {}; \
             a{what} reduces several dims at once",
            dim.repr()?
        )));
    };
    let values =
        record(py, what, || if max { t.amax(&[axis], keepdim) } else { t.amin(&[axis], keepdim) })?;
    let indices =
        record(py, what, || if max { t.argmax(axis, keepdim) } else { t.argmin(axis, keepdim) })?;
    py.import("xlaprof.return_types")?.getattr(what)?.call1((values, indices))
}

/// `argmax`/`argmin` along `dim`, or over the flattened tensor when `dim` is None.
fn arg_extreme(
    py: Python<'_>,
    what: &str,
    t: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    f: fn(&Tensor, i64, bool) -> EngineResult,
) -> PyResult<PyTensor> {
    record(py, what, || match dim {
        Some(d) => f(t, d, keepdim),
        None => {
            let index = f(&t.reshape(&[-1])?, 0, false)?;
            if keepdim {
                index.reshape(&vec![1; t.rank()])
            } else {
                Ok(index)
            }
        }
    })
}

#[pymethods]
impl PyTensor {
    /// The largest value (`t.max()`), the largest values along `dim` and where they are
    /// (`t.max(1)` is `(values, indices)`), or the elementwise maximum (`t.max(other)`).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn max<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        extreme(py, &self.t, dim, keepdim, true)
    }

    /// Like `max`, for the smallest.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn min<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        extreme(py, &self.t, dim, keepdim, false)
    }

    /// The largest values over `dim` (an int or a tuple; every dim when empty).
    #[pyo3(signature = (dim=None, keepdim=false), text_signature = "($self, dim=(), keepdim=False)")]
    fn amax(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        record(py, "amax", || self.t.amax(&axes, keepdim))
    }

    /// The smallest values over `dim` (an int or a tuple; every dim when empty).
    #[pyo3(signature = (dim=None, keepdim=false), text_signature = "($self, dim=(), keepdim=False)")]
    fn amin(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        record(py, "amin", || self.t.amin(&axes, keepdim))
    }

    #[pyo3(signature = (dim, keepdim=false))]
    fn logsumexp(
        &self,
        py: Python<'_>,
        dim: &Bound<'_, PyAny>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let axes = axes(Some(dim))?;
        record(py, "logsumexp", || self.t.logsumexp(&axes, keepdim))
    }
}

#[pymethods]
impl PyTensor {
    // ---- shape and movement ----

    #[pyo3(signature = (*shape))]
    fn reshape(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let dims = dims_arg("reshape", shape)?;
        record(py, "reshape", || self.t.reshape(&dims))
    }

    #[pyo3(signature = (*shape))]
    fn view(&self, py: Python<'_>, shape: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<PyTensor> {
        self.reshape(py, shape)
    }

    #[pyo3(signature = (*dims))]
    fn permute(
        &self,
        py: Python<'_>,
        dims: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let rank = self.t.rank() as i64;
        let perm = dims_arg("permute", dims)?
            .into_iter()
            .map(|d| if d < 0 { d + rank } else { d }.max(0) as usize)
            .collect::<Vec<_>>();
        record(py, "permute", || self.t.permute(&perm))
    }

    fn transpose(&self, py: Python<'_>, dim0: i64, dim1: i64) -> PyResult<PyTensor> {
        record(py, "transpose", || self.t.transpose(dim0, dim1))
    }

    /// The transpose of a matrix; a tensor of fewer than two dims as it is (PyTorch's `t()`).
    #[pyo3(name = "t")]
    fn t_method(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        match this.t.rank() {
            0 | 1 => Ok(slf.clone().into_any().unbind()),
            2 => Ok(Bound::new(slf.py(), record(slf.py(), "t", || this.t.transpose(0, 1))?)?
                .into_any()
                .unbind()),
            r => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "t() expects a tensor of at most 2 dims, not {r}; use transpose(dim0, dim1)"
            ))),
        }
    }

    /// Flattens the dims from `start_dim` to `end_dim` into one.
    #[pyo3(signature = (start_dim=0, end_dim=-1), text_signature = "($self, start_dim=0, end_dim=-1)")]
    fn flatten(&self, py: Python<'_>, start_dim: i64, end_dim: i64) -> PyResult<PyTensor> {
        let dims = self.t.dims();
        if dims.is_empty() {
            return record(py, "flatten", || self.t.reshape(&[1]));
        }
        let (s, e) = (
            wrap_dim("flatten", start_dim, dims.len())?,
            wrap_dim("flatten", end_dim, dims.len())?,
        );
        if s > e {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "flatten: start_dim {start_dim} comes after end_dim {end_dim}"
            )));
        }
        let mut out: Vec<i64> = dims[..s].to_vec();
        out.push(dims[s..=e].iter().product());
        out.extend_from_slice(&dims[e + 1..]);
        record(py, "flatten", || self.t.reshape(&out))
    }

    /// The dims reversed, as NumPy's and PyTorch's `T` (a matrix's transpose).
    #[getter(T)]
    fn t_(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let reversed: Vec<usize> = (0..self.t.rank()).rev().collect();
        record(py, "T", || self.t.permute(&reversed))
    }

    fn unsqueeze(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        record(py, "unsqueeze", || self.t.unsqueeze(dim))
    }

    /// Removes the dims of size 1: all of them, or those of `dim` (an int or a tuple) that are 1.
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let dims = self.t.dims();
        let chosen: Vec<usize> = match dim.filter(|d| !d.is_none()) {
            None => (0..dims.len()).collect(),
            Some(d) => axes(Some(d))?
                .into_iter()
                .map(|a| wrap_dim("squeeze", a, dims.len()))
                .collect::<PyResult<_>>()?,
        };
        squeezed(py, &self.t, &chosen)
    }

    #[pyo3(signature = (*sizes))]
    fn expand(
        &self,
        py: Python<'_>,
        sizes: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<PyTensor> {
        let mut dims = dims_arg("expand", sizes)?;
        // -1 keeps a dim's size, as in PyTorch.
        let offset = dims.len().saturating_sub(self.t.rank());
        for (i, d) in dims.iter_mut().enumerate().skip(offset) {
            if *d == -1 {
                *d = self.t.dims()[i - offset];
            }
        }
        record(py, "expand", || self.t.broadcast_to(&dims))
    }

    fn expand_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "expand_as", || self.t.broadcast_to(other.t.dims()))
    }

    fn reshape_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "reshape_as", || self.t.reshape(other.t.dims()))
    }

    fn view_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "view_as", || self.t.reshape(other.t.dims()))
    }

    /// The tensor itself: every tensor is contiguous here.
    #[pyo3(signature = (memory_format=None))]
    fn contiguous(slf: Py<Self>, memory_format: Option<&Bound<'_, PyAny>>) -> Py<Self> {
        let _ = memory_format;
        slf
    }

    /// A copy that later in-place changes of this tensor do not reach; gradients flow through it.
    #[pyo3(signature = (*, memory_format=None))]
    fn clone(
        &self,
        py: Python<'_>,
        memory_format: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let _ = memory_format;
        clone_tensor(py, &self.t)
    }

    /// Fills the positions where `mask` is true with `value` (a number or a one-element tensor);
    /// `mask` is bool and broadcasts to this tensor's shape.
    fn masked_fill(
        &self,
        py: Python<'_>,
        mask: &PyTensor,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<PyTensor> {
        masked_fill(py, &self.t, &mask.t, value)
    }

    fn broadcast_to(&self, py: Python<'_>, shape: Vec<i64>) -> PyResult<PyTensor> {
        record(py, "broadcast_to", || self.t.broadcast_to(&shape))
    }

    fn flip(&self, py: Python<'_>, dims: Vec<i64>) -> PyResult<PyTensor> {
        record(py, "flip", || self.t.flip(&dims))
    }

    /// Pads with `(before, after)` pairs, one per dim, with a constant; `interior`, one per
    /// dim, puts that many values between neighbouring elements too.
    #[pyo3(signature = (pads, value=0.0, interior=None))]
    fn pad(
        &self,
        py: Python<'_>,
        pads: Vec<(i64, i64)>,
        value: f64,
        interior: Option<Vec<i64>>,
    ) -> PyResult<PyTensor> {
        record(py, "pad", || match &interior {
            None => self.t.pad(&pads, value),
            Some(interior) => {
                let low: Vec<i64> = pads.iter().map(|p| p.0).collect();
                let high: Vec<i64> = pads.iter().map(|p| p.1).collect();
                self.t.pad_general(&low, &high, interior, value)
            }
        })
    }

    fn index_select(&self, py: Python<'_>, dim: i64, index: &PyTensor) -> PyResult<PyTensor> {
        record(py, "index_select", || self.t.index_select(dim, &index.t))
    }

    fn index_add(
        &self,
        py: Python<'_>,
        dim: i64,
        index: &PyTensor,
        source: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "index_add", || self.t.index_add(dim, &index.t, &source.t))
    }

    #[pyo3(signature = (dim, index, source, reduce, *, include_self=true))]
    fn index_reduce(
        &self,
        py: Python<'_>,
        dim: i64,
        index: &PyTensor,
        source: &PyTensor,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<PyTensor> {
        record(py, "index_reduce", || {
            self.t.index_reduce_rows(dim, &index.t, &source.t, reduce, include_self)
        })
    }

    // ---- dtypes ----

    /// The same values in another dtype (`t.astype("float64")`, `t.astype(numpy.int32)`).
    fn astype(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let dtype = extract_dtype(dtype)?;
        record(py, "astype", || self.t.cast(dtype))
    }

    /// The values in the dtype of `other`.
    fn type_as(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "type_as", || self.t.cast(other.t.dtype()))
    }

    fn is_floating_point(&self) -> bool {
        self.t.dtype().is_float()
    }

    // ---- reductions (besides those above) ----

    /// The variance over `dim` (None: every dim) with Bessel's `correction`; the legacy
    /// `unbiased=False` is `correction=0`.
    #[pyo3(signature = (dim=None, *, correction=1, keepdim=false, unbiased=None))]
    fn var(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        correction: i64,
        keepdim: bool,
        unbiased: Option<bool>,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        let correction = unbiased.map_or(correction, i64::from);
        record(py, "var", || self.t.var(&axes, correction, keepdim))
    }

    /// The standard deviation: the square root of `var` with the same arguments.
    #[pyo3(signature = (dim=None, *, correction=1, keepdim=false, unbiased=None))]
    fn std(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        correction: i64,
        keepdim: bool,
        unbiased: Option<bool>,
    ) -> PyResult<PyTensor> {
        let axes = axes(dim)?;
        let correction = unbiased.map_or(correction, i64::from);
        record(py, "std", || self.t.var(&axes, correction, keepdim)?.sqrt())
    }

    /// Where the largest value is along `dim`, or in the flattened tensor when `dim` is None.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(&self, py: Python<'_>, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        arg_extreme(py, "argmax", &self.t, dim, keepdim, Tensor::argmax)
    }

    /// Where the smallest value is along `dim`, or in the flattened tensor when `dim` is None.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(&self, py: Python<'_>, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        arg_extreme(py, "argmin", &self.t, dim, keepdim, Tensor::argmin)
    }

    /// A stable sort along `dim`: `(values, indices)`, as `torch.sort` (NaN sorts last).
    #[pyo3(signature = (dim=-1, descending=false), text_signature = "($self, dim=-1, descending=False)")]
    fn sort<'py>(
        &self,
        py: Python<'py>,
        dim: i64,
        descending: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (values, indices) = traced(py, "sort", || self.t.sort(dim, descending))?;
        let (values, indices) = (PyTensor::new(values), PyTensor::new(indices));
        py.import("xlaprof.return_types")?.getattr("sort")?.call1((values, indices))
    }

    // ---- factorizations (`xlaprof.linalg` and the torch bridge build on these) ----

    /// The Cholesky factor: lower triangular, or upper if `upper`.
    fn _cholesky(&self, py: Python<'_>, upper: bool) -> PyResult<PyTensor> {
        record(py, "cholesky", || self.t.cholesky(upper))
    }

    /// Solves `op(self) X = b` (`left`) or `X op(self) = b` for triangular self.
    fn _triangular_solve(
        &self,
        py: Python<'_>,
        b: &PyTensor,
        left: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose: bool,
    ) -> PyResult<PyTensor> {
        record(py, "triangular_solve", || {
            self.t.triangular_solve(&b.t, left, lower, unit_diagonal, transpose)
        })
    }

    /// Householder QR in LAPACK's compact form: `(a, tau)`.
    fn _geqrf(&self, py: Python<'_>) -> PyResult<(PyTensor, PyTensor)> {
        let (a, tau) = traced(py, "geqrf", || self.t.geqrf())?;
        Ok((PyTensor::new(a), PyTensor::new(tau)))
    }

    /// Q's first columns from Householder reflectors and their scales.
    fn _householder_product(&self, py: Python<'_>, tau: &PyTensor) -> PyResult<PyTensor> {
        record(py, "householder_product", || self.t.householder_product(&tau.t))
    }

    /// A three-term recurrence per element (see `Tensor::three_term_recurrence`), one loop.
    fn _three_term(
        &self,
        py: Python<'_>,
        n: &PyTensor,
        p1: &PyTensor,
        coefficients: [i8; 8],
    ) -> PyResult<PyTensor> {
        record(py, "three_term_recurrence", || {
            self.t.three_term_recurrence(&n.t, &p1.t, coefficients)
        })
    }

    /// Each matrix squared its own number of times (see `Tensor::squarings`), one loop.
    fn _squarings(&self, py: Python<'_>, times: &PyTensor) -> PyResult<PyTensor> {
        record(py, "squarings", || self.t.squarings(&times.t))
    }

    /// The CTC loss's alpha recursion over time (see `Tensor::ctc_alphas`), one loop.
    fn _ctc_alphas(
        &self,
        py: Python<'_>,
        skip: &PyTensor,
        first: &PyTensor,
        start: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "ctc_alphas", || self.t.ctc_alphas(&skip.t, &first.t, &start.t))
    }

    /// An LSTM layer's recursion over time (see `Tensor::lstm_loop`), one loop.
    fn _lstm_loop(
        &self,
        py: Python<'_>,
        w_hh: &PyTensor,
        h0: &PyTensor,
        c0: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "lstm_loop", || self.t.lstm_loop(&w_hh.t, &h0.t, &c0.t))
    }

    /// Its gradient (see `Tensor::lstm_loop_backward`), one loop.
    #[allow(clippy::too_many_arguments)]
    fn _lstm_loop_backward(
        &self,
        py: Python<'_>,
        w_hh: &PyTensor,
        h0: &PyTensor,
        c0: &PyTensor,
        states: &PyTensor,
        d_hiddens: &PyTensor,
        d_last_cell: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "lstm_loop_backward", || {
            self.t.lstm_loop_backward(
                &w_hh.t,
                &h0.t,
                &c0.t,
                &states.t,
                &d_hiddens.t,
                &d_last_cell.t,
            )
        })
    }

    /// A GRU layer's recursion over time (see `Tensor::gru_loop`), one loop.
    fn _gru_loop(
        &self,
        py: Python<'_>,
        w_hh: &PyTensor,
        b_hh: &PyTensor,
        h0: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "gru_loop", || self.t.gru_loop(&w_hh.t, &b_hh.t, &h0.t))
    }

    /// Its gradient (see `Tensor::gru_loop_backward`), one loop.
    fn _gru_loop_backward(
        &self,
        py: Python<'_>,
        w_hh: &PyTensor,
        b_hh: &PyTensor,
        h0: &PyTensor,
        hiddens: &PyTensor,
        d_hiddens: &PyTensor,
    ) -> PyResult<PyTensor> {
        record(py, "gru_loop_backward", || {
            self.t.gru_loop_backward(&w_hh.t, &b_hh.t, &h0.t, &hiddens.t, &d_hiddens.t)
        })
    }

    /// An Elman RNN layer's recursion over time (see `Tensor::rnn_loop`), one loop.
    fn _rnn_loop(
        &self,
        py: Python<'_>,
        w_hh: &PyTensor,
        h0: &PyTensor,
        relu: bool,
    ) -> PyResult<PyTensor> {
        record(py, "rnn_loop", || self.t.rnn_loop(&w_hh.t, &h0.t, relu))
    }

    /// Its gradient (see `Tensor::rnn_loop_backward`), one loop; `self` the loop's result.
    fn _rnn_loop_backward(
        &self,
        py: Python<'_>,
        w_hh: &PyTensor,
        d_hiddens: &PyTensor,
        relu: bool,
    ) -> PyResult<PyTensor> {
        record(py, "rnn_loop_backward", || self.t.rnn_loop_backward(&w_hh.t, &d_hiddens.t, relu))
    }

    /// `(eigenvalues, eigenvectors)` of symmetric matrices, from the lower (or upper) triangle.
    fn _eigh(&self, py: Python<'_>, upper: bool) -> PyResult<(PyTensor, PyTensor)> {
        let (w, v) = traced(py, "eigh", || self.t.eigh(upper))?;
        Ok((PyTensor::new(w), PyTensor::new(v)))
    }

    /// LU with partial pivoting: `(lu, pivots, permutation)`, pivots 1-based (int32).
    fn _lu(&self, py: Python<'_>) -> PyResult<(PyTensor, PyTensor, PyTensor)> {
        let (lu, pivots, perm) = traced(py, "lu", || self.t.lu())?;
        Ok((PyTensor::new(lu), PyTensor::new(pivots), PyTensor::new(perm)))
    }

    /// The permutation of `rows` rows that 1-based LAPACK pivots make.
    fn _lu_pivots_to_permutation(&self, py: Python<'_>, rows: usize) -> PyResult<PyTensor> {
        record(py, "lu_pivots_to_permutation", || self.t.lu_pivots_to_permutation(rows))
    }

    // ---- complex numbers (the torch bridge's `real`, `imag`, `complex` and FFTs) ----

    /// The real part (a real number is its own).
    fn _real(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "real", || self.t.real())
    }

    /// The imaginary part (zero for a real number).
    fn _imag(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "imag", || self.t.imag())
    }

    /// `self + other i`.
    fn _complex(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "complex", || self.t.complex(&other.t))
    }

    /// XLA's FFT over the last `lengths.len()` dims: kind "FFT", "IFFT", "RFFT" or "IRFFT".
    fn _fft(&self, py: Python<'_>, kind: &str, lengths: Vec<i64>) -> PyResult<PyTensor> {
        use xlaprof_core::ir::FftKind;
        let kind = match kind {
            "FFT" => FftKind::Fft,
            "IFFT" => FftKind::Ifft,
            "RFFT" => FftKind::Rfft,
            "IRFFT" => FftKind::Irfft,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown FFT kind {other:?}; the kinds are FFT, IFFT, RFFT, IRFFT"
                )))
            }
        };
        record(py, "fft", || self.t.fft(kind, &lengths))
    }

    // ---- neural-network ops ----

    /// Softmax along `dim`, computed in `dtype` when given.
    #[pyo3(signature = (dim, dtype=None))]
    fn softmax(
        &self,
        py: Python<'_>,
        dim: i64,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dtype = optional_dtype(dtype)?;
        record(py, "softmax", || match dtype {
            Some(d) => self.t.cast(d)?.softmax(dim),
            None => self.t.softmax(dim),
        })
    }

    /// Log-softmax along `dim`, computed in `dtype` when given.
    #[pyo3(signature = (dim, dtype=None))]
    fn log_softmax(
        &self,
        py: Python<'_>,
        dim: i64,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dtype = optional_dtype(dtype)?;
        record(py, "log_softmax", || match dtype {
            Some(d) => self.t.cast(d)?.log_softmax(dim),
            None => self.t.log_softmax(dim),
        })
    }

    #[pyo3(signature = (min=None, max=None))]
    fn clamp(&self, py: Python<'_>, min: Option<f64>, max: Option<f64>) -> PyResult<PyTensor> {
        let (lo, hi) = (min.unwrap_or(f64::NEG_INFINITY), max.unwrap_or(f64::INFINITY));
        record(py, "clamp", || self.t.clamp(lo, hi))
    }

    /// `clamp` under its NumPy name.
    #[pyo3(signature = (min=None, max=None))]
    fn clip(&self, py: Python<'_>, min: Option<f64>, max: Option<f64>) -> PyResult<PyTensor> {
        self.clamp(py, min, max)
    }

    fn logical_and(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "logical_and", || self.t.logical_and(&other.t))
    }

    fn logical_or(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "logical_or", || self.t.logical_or(&other.t))
    }

    fn bitwise_and(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "bitwise_and", || self.t.bitwise_and(&other.t))
    }

    fn bitwise_or(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "bitwise_or", || self.t.bitwise_or(&other.t))
    }

    fn bitwise_xor(&self, py: Python<'_>, other: &PyTensor) -> PyResult<PyTensor> {
        record(py, "bitwise_xor", || self.t.bitwise_xor(&other.t))
    }

    fn bitwise_not(&self, py: Python<'_>) -> PyResult<PyTensor> {
        record(py, "bitwise_not", || self.t.bitwise_not())
    }

    fn one_hot(&self, py: Python<'_>, num_classes: i64) -> PyResult<PyTensor> {
        record(py, "one_hot", || self.t.one_hot(num_classes, DType::F32))
    }
}

/// The dtype conversions PyTorch names by method (`t.double()`, `t.long()`, ...).
macro_rules! conversions {
    ($($name:ident => $dtype:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[pyo3(signature = (memory_format=None))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    memory_format: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<PyTensor> {
                    let _ = memory_format;
                    record(py, stringify!($name), || self.t.cast(DType::$dtype))
                }
            )*
        }
    };
}

conversions!(
    float => F32, double => F64, half => F16, bfloat16 => BF16, long => S64, int => S32,
    bool => Pred, byte => U8, char => S8,
);

/// `t` without those of the dims `chosen` that have size 1 (`Tensor.squeeze`; the way back of the
/// torch bridge's native `unsqueeze` views).
pub(crate) fn squeezed(py: Python<'_>, t: &Tensor, chosen: &[usize]) -> PyResult<PyTensor> {
    let kept = t.dims().iter().enumerate().filter(|&(i, &n)| !(n == 1 && chosen.contains(&i)));
    let out: Vec<i64> = kept.map(|(_, &n)| n).collect();
    record(py, "squeeze", || t.reshape(&out))
}

/// `t` with `value` where `mask` is true (`mask` must broadcast to `t`'s shape, not beyond).
pub(crate) fn masked_fill(
    py: Python<'_>,
    t: &Tensor,
    mask: &Tensor,
    value: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let value = Operand::extract(py, "masked_fill", value)?;
    if let Operand::Tensor(v) = &value {
        if v.rank() != 0 {
            return Err(super::errors::Class::Shape.err(format!(
                "masked_fill only supports a 0-dimension value tensor, not {}",
                v.shape()
            )));
        }
    }
    let fits = mask.rank() <= t.rank()
        && mask.dims().iter().rev().zip(t.dims().iter().rev()).all(|(&m, &d)| m == d || m == 1);
    if !fits {
        return Err(super::errors::Class::Shape.err(format!(
            "masked_fill: the mask {} does not broadcast to the tensor's shape {}",
            mask.shape(),
            t.shape()
        )));
    }
    record(py, "masked_fill", || {
        let fill = match &value {
            Operand::Scalar(v) => Tensor::scalar(*v, t.dtype()),
            Operand::Tensor(v) => v.cast(t.dtype())?,
        };
        Tensor::where_(mask, &fill, t)
    })
}
