//! The torch bridge's dispatcher, natively for the common case (`xlaprof/torch/_dispatch.py`
//! is the whole of it; this is its first step).
//!
//! Every aten op on a lazy tensor reaches `LazyTensor.__torch_dispatch__`. The Python dispatcher
//! finds each op's route on its first call and, when the route is one of three plain kinds, notes
//! it in a table this reads: a functional lowering, a raw lowering (one that takes the lazy
//! tensors themselves: views, writes), or the in-place form of a functional lowering. For those,
//! with real arguments, this does what the Python routes do (unwrap the arguments, call the
//! lowering, wrap the engine tensors it returns, or write the result into the mutated argument)
//! without the Python frames in between, which cost more than the engine's own work. Anything
//! else (an op not in the table yet, complex or CPU tensors, arguments of other kinds, a lowering
//! that declines the call) goes to the Python dispatcher, which decides as it always did.
//!
//! The commonest views (`view`, `reshape`, `detach`, `transpose`, `t`, `permute`, `unsqueeze`) are
//! made here too, their steps to and from the base being [`ViewStep`]s instead of Python
//! closures; every view, these and `_tensor.make_view`'s, is linked to its root by [`link`].

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple, PyType};
use xlaprof_core::{DType, Tensor};

use super::arith::{binary, with_alpha};
use super::dtype::dtype_name;
use super::ops::squeezed;
use super::tensor::PyTensor;
use super::trace::record;

/// The route kinds in the table, exported to `_dispatch.py` as `DISPATCH_CODES` (see
/// [`dispatch_codes`]): one numbering, defined here.
const FUNCTIONAL: u8 = 0;
const RAW: u8 = 1;
const IN_PLACE: u8 = 2;
/// A view made here (the table's third number says which), else by its raw lowering.
const VIEW: u8 = 3;
const VIEW_RESHAPE: u8 = 1;
const VIEW_ALIAS: u8 = 2;
const VIEW_PERMUTE: u8 = 3;
const VIEW_TRANSPOSE: u8 = 4;
const VIEW_T: u8 = 5;
const VIEW_UNSQUEEZE: u8 = 6;
const VIEW_SLICE: u8 = 7;
const VIEW_SELECT: u8 = 8;
/// Functional lowerings that are one engine operator on a tensor and a tensor or number
/// (`a + b`, `a - b`, `a * b`, `a / b`): called here without the lowering's Python frame.
const OP_ADD: u8 = 1;
const OP_SUB: u8 = 2;
const OP_MUL: u8 = 3;
const OP_DIV: u8 = 4;

/// The numbers the Python dispatcher writes into the table, by name: `{"routes": {...},
/// "views": {...}, "operators": {...}}`, the module's `DISPATCH_CODES`.
pub(crate) fn dispatch_codes(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let group = |entries: &[(&str, u8)]| -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        for (name, code) in entries {
            d.set_item(name, code)?;
        }
        Ok(d)
    };
    let codes = PyDict::new(py);
    codes.set_item(
        "routes",
        group(&[("functional", FUNCTIONAL), ("raw", RAW), ("in_place", IN_PLACE), ("view", VIEW)])?,
    )?;
    codes.set_item(
        "views",
        group(&[
            ("reshape", VIEW_RESHAPE),
            ("alias", VIEW_ALIAS),
            ("permute", VIEW_PERMUTE),
            ("transpose", VIEW_TRANSPOSE),
            ("t", VIEW_T),
            ("unsqueeze", VIEW_UNSQUEEZE),
            ("slice", VIEW_SLICE),
            ("select", VIEW_SELECT),
        ])?,
    )?;
    codes.set_item(
        "operators",
        group(&[("add", OP_ADD), ("sub", OP_SUB), ("mul", OP_MUL), ("div", OP_DIV)])?,
    )?;
    Ok(codes)
}

fn engine_operator<'py>(op: u8, a: &PyTensor, b: &Bound<'py, PyAny>) -> Option<PyResult<PyTensor>> {
    let py = b.py();
    Some(match op {
        OP_ADD => with_alpha(py, "add", &a.t, b, 1.0, Tensor::add, Tensor::add_scalar),
        OP_SUB => with_alpha(py, "sub", &a.t, b, 1.0, Tensor::sub, Tensor::sub_scalar),
        OP_MUL => binary(py, "mul", &a.t, b, Tensor::mul, Tensor::mul_scalar),
        OP_DIV => binary(py, "div", &a.t, b, Tensor::div, Tensor::div_scalar),
        _ => return None,
    })
}

struct Bridge {
    /// `LazyTensor`: the wrapper subclass.
    lazy: Py<PyType>,
    /// aten op -> (route kind, lowering, engine operator or 0), written by the Python dispatcher.
    routes: Py<PyDict>,
    /// The Python dispatcher: `dispatch(func, args, kwargs)`.
    python: Py<PyAny>,
    /// `_tensor.value(t)` (a view's value, recomputed) and `_tensor.assign(t, new)` (a write).
    value: Py<PyAny>,
    assign: Py<PyAny>,
    /// The exception by which a lowering declines a call (`lowerings.common.Unsupported`).
    unsupported: Py<PyType>,
    /// Types passed to a lowering as they are (numbers, strings, torch dtypes and devices).
    plain: Vec<Py<PyType>>,
    /// `torch.Tensor._make_wrapper_subclass`, and its keyword arguments for each real engine
    /// dtype (`dtype=..., device=...`).
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
    routes: Py<PyDict>,
    python: Py<PyAny>,
    value: Py<PyAny>,
    assign: Py<PyAny>,
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
    let bridge = Bridge {
        lazy,
        routes,
        python,
        value,
        assign,
        unsupported,
        plain,
        make_wrapper,
        wrapper_kwargs,
    };
    BRIDGE
        .set(py, bridge)
        .map_err(|_| PyRuntimeError::new_err("the torch bridge is registered once per process"))
}

/// `LazyTensor.__torch_dispatch__` (a class method): an aten op on lazy tensors.
#[pyfunction]
#[pyo3(signature = (_cls, func, _types, args=None, kwargs=None))]
pub(crate) fn torch_dispatch<'py>(
    py: Python<'py>,
    _cls: &Bound<'py, PyAny>,
    func: &Bound<'py, PyAny>,
    _types: &Bound<'py, PyAny>,
    args: Option<&Bound<'py, PyTuple>>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let bridge = bridge(py)?;
    let empty = PyTuple::empty(py);
    let args = args.unwrap_or(&empty);
    let kwargs = kwargs.filter(|k| !k.is_empty());
    let here = || super::location::current(py);
    super::trace::timed(here, || match bridge.native(func, args, kwargs)? {
        Some(result) => Ok(result),
        None => {
            let kwargs = kwargs.cloned().unwrap_or_else(|| PyDict::new(py));
            bridge.python.bind(py).call1((func, args, kwargs))
        }
    })
}

fn bridge(py: Python<'_>) -> PyResult<&Bridge> {
    BRIDGE.get(py).ok_or_else(|| {
        PyRuntimeError::new_err("the torch bridge is not registered (import xlaprof.torch)")
    })
}

/// The `view` ("slice" or "select") of `args` made natively, as the dispatcher makes it, or
/// `None` where the Python lowering must make it: for the lowerings that make several views
/// (`split`, `unbind`).
#[pyfunction]
pub(crate) fn torch_view<'py>(
    py: Python<'py>,
    view: &str,
    args: &Bound<'py, PyTuple>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let which = match view {
        "slice" => VIEW_SLICE,
        "select" => VIEW_SELECT,
        _ => return Err(PyValueError::new_err(format!("no native view {view:?}"))),
    };
    bridge(py)?.view(which, args, None)
}

impl Bridge {
    /// The op's result, or `None` where the Python dispatcher must decide.
    fn native<'py>(
        &self,
        func: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = func.py();
        let Some(route) = self.routes.bind(py).get_item(func)? else {
            return Ok(None);
        };
        let (mut kind, lowering, operator): (u8, Bound<'py, PyAny>, u8) = route.extract()?;
        if kind == VIEW {
            if let Some(view) = self.view(operator, args, kwargs)? {
                return Ok(Some(view));
            }
            kind = RAW;
        }
        let result = if kind == RAW {
            // The lazy tensors themselves, unless one is complex (`_dispatch._real_only`).
            for a in args.iter().chain(kwargs.iter().flat_map(|k| k.values())) {
                if self.any_complex(&a)? {
                    return Ok(None);
                }
            }
            lowering.call(args, kwargs)
        } else {
            let mut unwrapped = Vec::with_capacity(args.len());
            for a in args.iter() {
                match self.unwrap(&a, true)? {
                    Some(v) => unwrapped.push(v),
                    None => return Ok(None),
                }
            }
            let direct = match (unwrapped.as_slice(), kwargs) {
                ([a, b], None) => {
                    a.cast::<PyTensor>().ok().and_then(|a| engine_operator(operator, a.get(), b))
                }
                _ => None,
            };
            if let Some(tensor) = direct {
                let tensor = Bound::new(py, tensor?)?.into_any();
                return match kind {
                    IN_PLACE => self.write(args, tensor),
                    _ => self.wrap(&tensor).map(Some),
                };
            }
            let unwrapped_kwargs = match kwargs {
                None => None,
                Some(k) => {
                    let d = PyDict::new(py);
                    for (name, v) in k.iter() {
                        match self.unwrap(&v, true)? {
                            Some(v) => d.set_item(name, v)?,
                            None => return Ok(None),
                        }
                    }
                    Some(d)
                }
            };
            lowering.call(PyTuple::new(py, unwrapped)?, unwrapped_kwargs.as_ref())
        };
        let result = match result {
            Ok(r) => r,
            Err(e) if e.is_instance(py, self.unsupported.bind(py)) => return Ok(None),
            Err(e) => return Err(e),
        };
        match kind {
            RAW => Ok(Some(result)),
            FUNCTIONAL => self.wrap(&result).map(Some),
            IN_PLACE => self.write(args, result),
            _ => Ok(None),
        }
    }

    /// `x.add_(y)`: the functional op's value written into `x` (`_dispatch.in_place`).
    fn write<'py>(
        &self,
        args: &Bound<'py, PyTuple>,
        value: Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ok(target) = args.get_item(0) else {
            return Ok(None);
        };
        let py = args.py();
        // The common write, an optimizer's `p.add_(...)`: a tensor that owns its value gets a
        // value of its own dtype and shape. `_tensor.assign` then only rebinds it; anything else
        // (a view, a cast, a broadcast) is `assign`'s.
        if target.get_type().is(self.lazy.bind(py)) {
            let own = attributes(&target)?;
            if owns_its_value(&own)? {
                let old = own.get_item(intern!(py, "_xp"))?;
                if let (Ok(new), Some(Ok(old))) =
                    (value.cast::<PyTensor>(), old.as_ref().map(|o| o.cast::<PyTensor>()))
                {
                    let (t, o) = (&new.get().t, &old.get().t);
                    if t.dtype() == o.dtype() && t.dims() == o.dims() {
                        rebind_owner(&own, old.get(), &new)?;
                        return Ok(Some(target));
                    }
                }
            }
        }
        self.assign.bind(py).call1((&target, value))?;
        Ok(Some(target))
    }

    /// The view `which` of `args[0]` (see [`VIEW`]), made as `lowerings/views.py` and
    /// `_tensor.make_view` make it, or `None` where its raw lowering must (other arguments, a
    /// complex tensor, a value that is not an engine tensor).
    fn view<'py>(
        &self,
        which: u8,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = args.py();
        if kwargs.is_some() || args.is_empty() {
            return Ok(None);
        }
        let base = args.get_item(0)?;
        if !base.get_type().is(self.lazy.bind(py)) {
            return Ok(None);
        }
        // The base's layout in its root: a view laid out otherwise than contiguously from 0
        // reports it (`_layout`), any other tensor is contiguous from 0.
        let strided = match attributes(&base)?.get_item(intern!(py, "_strided"))? {
            Some(s) => s.is_truthy()?,
            None => false,
        };
        let Some(base_value) = self.unwrap(&base, false)? else {
            return Ok(None);
        };
        let Ok(tensor) = base_value.cast::<PyTensor>() else {
            return Ok(None);
        };
        let dims = tensor.get().t.dims().to_vec();
        let rank = dims.len() as i64;
        let int = |i: usize| args.get_item(i).and_then(|a| a.extract::<i64>()).ok();
        let ints = |i: usize| args.get_item(i).and_then(|a| a.extract::<Vec<i64>>()).ok();
        let (step, inverse) = match (which, args.len()) {
            (VIEW_RESHAPE, 2) => {
                let Some(size) = ints(1) else { return Ok(None) };
                // Sizes that fit no reshape: the lowering's error, at the user's line.
                let total = dims.iter().product();
                let Some(size) = xlaprof_core::shape::infer_dims(total, &size) else {
                    return Ok(None);
                };
                (ViewStep::Reshape(size), ViewStep::Reshape(dims.clone()))
            }
            (VIEW_ALIAS, 1) => (ViewStep::Identity, ViewStep::Identity),
            (VIEW_PERMUTE, 2) if rank > 0 => {
                let Some(order) = ints(1) else { return Ok(None) };
                let order: Vec<usize> = order.iter().map(|d| d.rem_euclid(rank) as usize).collect();
                let mut inverse = vec![usize::MAX; order.len()];
                for (i, &d) in order.iter().enumerate() {
                    match inverse.get_mut(d) {
                        Some(slot) if *slot == usize::MAX => *slot = i,
                        _ => return Ok(None), // not a permutation: the lowering's error
                    }
                }
                if inverse.contains(&usize::MAX) {
                    return Ok(None);
                }
                (ViewStep::Permute(order), ViewStep::Permute(inverse))
            }
            (VIEW_TRANSPOSE, 3) => match (int(1), int(2)) {
                (Some(_), Some(_)) if rank == 0 => (ViewStep::Identity, ViewStep::Identity),
                (Some(a), Some(b)) => (ViewStep::Transpose(a, b), ViewStep::Transpose(a, b)),
                _ => return Ok(None),
            },
            (VIEW_T, 1) if rank == 2 => (ViewStep::Transpose(0, 1), ViewStep::Transpose(0, 1)),
            (VIEW_T, 1) => (ViewStep::Identity, ViewStep::Identity),
            (VIEW_UNSQUEEZE, 2) => {
                let Some(dim) = int(1) else { return Ok(None) };
                let dim = dim.rem_euclid(rank + 1);
                (ViewStep::Unsqueeze(dim), ViewStep::Squeeze(dim as usize))
            }
            // `slice.Tensor(self, dim=0, start=None, end=None, step=1)`: a slice of unit step
            // that keeps an element (a strided or an empty one is the Python lowering's).
            (VIEW_SLICE, 1..=5) if rank > 0 => {
                let bound = |i: usize| match args.get_item(i) {
                    Err(_) => Some(None),
                    Ok(a) if a.is_none() => Some(None),
                    Ok(a) => a.extract::<i64>().ok().map(Some),
                };
                let (Some(dim), Some(start), Some(end)) =
                    (if args.len() > 1 { int(1) } else { Some(0) }, bound(2), bound(3))
                else {
                    return Ok(None);
                };
                if args.len() > 4 && int(4) != Some(1) {
                    return Ok(None);
                }
                let axis = dim.rem_euclid(rank) as usize;
                let n = dims[axis];
                let clamp = |i: i64| if i < 0 { (i + n).max(0) } else { i.min(n) };
                let (start, end) = (clamp(start.unwrap_or(0)), clamp(end.unwrap_or(n)));
                if end <= start {
                    return Ok(None);
                }
                let slice = || ViewStep::Slice { axis, start, len: end - start };
                (slice(), slice()) // its way back writes it into the base (`apply_back`)
            }
            (VIEW_SELECT, 3) if rank > 0 => {
                let (Some(dim), Some(index)) = (int(1), int(2)) else { return Ok(None) };
                let axis = dim.rem_euclid(rank) as usize;
                let n = dims[axis];
                if index < -n || index >= n {
                    return Ok(None); // torch's IndexError, from the lowering
                }
                let index = index.rem_euclid(n);
                (ViewStep::Select { axis, index }, ViewStep::Select { axis, index })
            }
            _ => return Ok(None),
        };
        let reads_base = step.back_reads_base();
        let layout = if strided {
            let strides: Vec<i64> = base.call_method0(intern!(py, "stride"))?.extract()?;
            let offset: i64 = base.call_method0(intern!(py, "storage_offset"))?.extract()?;
            Layout { strides, offset }
        } else {
            Layout::contiguous(&dims)
        };
        // A reshape that torch could not make a view of this layout: the Python lowering's
        // (a copy of the values, `_layout`).
        let Some(laid_out) = step.layout(&dims, &layout) else {
            return Ok(None);
        };
        let value = step.apply(&base_value)?;
        let view = if laid_out.is_contiguous(&value.cast::<PyTensor>()?.get().t.dims()) {
            self.wrap(&value)?
        } else {
            self.wrap_strided(&value, laid_out)?
        };
        link(&view, &base, Step::Native(step), Step::Native(inverse), reads_base)?;
        Ok(Some(view))
    }

    /// An argument as a lowering takes it (`_dispatch._unwrap`), or `None` where the Python
    /// dispatcher must decide. Lists and tuples are looked into one level deep.
    fn unwrap<'py>(
        &self,
        a: &Bound<'py, PyAny>,
        look_inside: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = a.py();
        let ty = a.get_type();
        if ty.is(self.lazy.bind(py)) {
            if a.getattr(intern!(py, "_complex"))?.is_truthy()? {
                return Ok(None);
            }
            let root = a.getattr(intern!(py, "_root"))?;
            if root.is_none() {
                return Ok(Some(a.getattr(intern!(py, "_xp"))?));
            }
            // A view: its value, recomputed when its root was written since (`_tensor.value`).
            return Ok(Some(self.value.bind(py).call1((a,))?));
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
            return sequence(py, is_list, items).map(Some);
        }
        Ok(None)
    }

    /// Whether an argument is, or (one level deep) holds, a complex lazy tensor.
    fn any_complex(&self, a: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = a.py();
        let complex = |t: &Bound<'_, PyAny>| -> PyResult<bool> {
            Ok(t.get_type().is(self.lazy.bind(py))
                && t.getattr(intern!(py, "_complex"))?.is_truthy()?)
        };
        if complex(a)? {
            return Ok(true);
        }
        if a.is_exact_instance_of::<PyList>() || a.is_exact_instance_of::<PyTuple>() {
            for item in a.try_iter()? {
                if complex(&item?)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// A view's wrapper, of an engine tensor of a real dtype, reporting `layout` in its root.
    fn wrap_strided<'py>(
        &self,
        x: &Bound<'py, PyAny>,
        layout: Layout,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = x.py();
        let tensor = &x.cast::<PyTensor>()?.get().t;
        let Some((_, kwargs)) = self.wrapper_kwargs.iter().find(|(d, _)| *d == tensor.dtype())
        else {
            return self.lazy.bind(py).call1((x,));
        };
        let kwargs = kwargs.bind(py).copy()?;
        kwargs.set_item(intern!(py, "strides"), PyTuple::new(py, layout.strides)?)?;
        kwargs.set_item(intern!(py, "storage_offset"), layout.offset)?;
        let shape = PyTuple::new(py, tensor.dims().iter().copied())?;
        let wrapper =
            self.make_wrapper.bind(py).call((self.lazy.bind(py), shape), Some(&kwargs))?;
        let own = attributes(&wrapper)?;
        own.set_item(intern!(py, "_xp"), x)?;
        own.set_item(intern!(py, "_strided"), true)?;
        Ok(wrapper)
    }

    /// A lowering's result as torch gets it (`_dispatch._wrap`): engine tensors in lazy ones.
    fn wrap<'py>(&self, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = x.py();
        if let Ok(t) = x.cast::<PyTensor>() {
            let tensor = &t.get().t;
            let Some((_, kwargs)) = self.wrapper_kwargs.iter().find(|(d, _)| *d == tensor.dtype())
            else {
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
        let is_list = x.is_exact_instance_of::<PyList>();
        if is_list || x.is_exact_instance_of::<PyTuple>() {
            let items = x.try_iter()?.map(|v| self.wrap(&v?)).collect::<PyResult<Vec<_>>>()?;
            return sequence(py, is_list, items);
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

/// A list or a tuple of `items`, as the argument or result it rebuilds was.
fn sequence<'py>(
    py: Python<'py>,
    list: bool,
    items: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(if list { PyList::new(py, items)?.into_any() } else { PyTuple::new(py, items)?.into_any() })
}

/// One step of a view made natively, applied to an engine tensor: what the Python view lowerings
/// do with `r.reshape(...)`, `r.permute(...)`, ... (the same engine ops, so the same graph).
enum ViewStep {
    Reshape(Vec<i64>),
    Permute(Vec<usize>),
    Transpose(i64, i64),
    Unsqueeze(i64),
    /// Back from `Unsqueeze`: the dim, if it has size 1, taken out (`Tensor.squeeze(dim)`).
    Squeeze(usize),
    /// `len` elements from `start` along `axis` (unit step); back (`apply_back`): the base's
    /// values with the slice's in their place.
    Slice {
        axis: usize,
        start: i64,
        len: i64,
    },
    /// The element `index` along `axis`, the axis taken out; back as a slice of one.
    Select {
        axis: usize,
        index: i64,
    },
    Identity,
}

/// Where a tensor's elements are in its root's values, as torch reports it (`stride()`,
/// `storage_offset()`): a view of a view is laid out as torch would lay it out on any device.
struct Layout {
    strides: Vec<i64>,
    offset: i64,
}

impl Layout {
    /// A tensor of `dims` laid out contiguously from 0 (torch's strides: a dim of size 0
    /// counts as 1).
    fn contiguous(dims: &[i64]) -> Layout {
        let mut strides = vec![1; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1].max(1);
        }
        Layout { strides, offset: 0 }
    }

    fn is_contiguous(&self, dims: &[i64]) -> bool {
        self.offset == 0 && self.strides == Layout::contiguous(dims).strides
    }
}

/// The strides torch gives a view of `new` sizes of a tensor of `old` sizes and strides, or
/// `None` where no view has them (torch then copies: `reshape`, or refuses: `view`). A run of
/// old dims each of which steps over the next one whole is one chunk; the new dims must split
/// each chunk, strides scaled by the chunk's innermost stride.
fn view_strides(old: &[i64], old_strides: &[i64], new: &[i64]) -> Option<Vec<i64>> {
    let numel: i64 = old.iter().product();
    if numel == 0 || old.is_empty() {
        // No element to address (or one, a scalar): any strides do; torch's are contiguous.
        return Some(Layout::contiguous(new).strides);
    }
    let mut strides = vec![0; new.len()];
    let mut view_d = new.len() as isize - 1;
    let mut chunk_stride = *old_strides.last()?;
    let (mut chunk_numel, mut view_numel) = (1, 1);
    for d in (0..old.len()).rev() {
        chunk_numel *= old[d];
        let chunk_ends =
            d == 0 || (old[d - 1] != 1 && old_strides[d - 1] != chunk_numel * chunk_stride);
        if !chunk_ends {
            continue;
        }
        while view_d >= 0 && (view_numel < chunk_numel || new[view_d as usize] == 1) {
            strides[view_d as usize] = view_numel * chunk_stride;
            view_numel *= new[view_d as usize];
            view_d -= 1;
        }
        if view_numel != chunk_numel {
            return None;
        }
        if d > 0 {
            chunk_stride = old_strides[d - 1];
            chunk_numel = 1;
            view_numel = 1;
        }
    }
    (view_d == -1).then_some(strides)
}

impl ViewStep {
    /// The layout torch gives the step's result, from a base of `dims` laid out as `base` is;
    /// `None` for a reshape no view of that layout can make.
    fn layout(&self, dims: &[i64], base: &Layout) -> Option<Layout> {
        let rank = dims.len() as i64;
        let mut strides = base.strides.clone();
        match self {
            ViewStep::Identity => {}
            ViewStep::Permute(order) => strides = order.iter().map(|&d| base.strides[d]).collect(),
            ViewStep::Transpose(a, b) => {
                strides.swap(a.rem_euclid(rank) as usize, b.rem_euclid(rank) as usize)
            }
            ViewStep::Unsqueeze(dim) => {
                let d = *dim as usize;
                let stride = if d < dims.len() { dims[d] * base.strides[d] } else { 1 };
                strides.insert(d, stride);
            }
            ViewStep::Squeeze(dim) if dims.get(*dim) == Some(&1) => {
                strides.remove(*dim);
            }
            ViewStep::Squeeze(_) => {}
            ViewStep::Reshape(new) => strides = view_strides(dims, &base.strides, new)?,
            ViewStep::Slice { axis, start, .. } => {
                return Some(Layout { strides, offset: base.offset + start * base.strides[*axis] });
            }
            ViewStep::Select { axis, index } => {
                strides.remove(*axis);
                return Some(Layout { strides, offset: base.offset + index * base.strides[*axis] });
            }
        }
        Some(Layout { strides, offset: base.offset })
    }

    /// Whether the step back needs the base's old value (it writes into part of it).
    fn back_reads_base(&self) -> bool {
        matches!(self, ViewStep::Slice { .. } | ViewStep::Select { .. })
    }

    fn apply<'py>(&self, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = x.py();
        let t = &x.cast::<PyTensor>()?.get().t;
        let out = match self {
            ViewStep::Identity => return Ok(x.clone()),
            ViewStep::Reshape(dims) => record(py, "reshape", || t.reshape(dims)),
            ViewStep::Permute(order) => record(py, "permute", || t.permute(order)),
            ViewStep::Transpose(a, b) => record(py, "transpose", || t.transpose(*a, *b)),
            ViewStep::Unsqueeze(dim) => record(py, "unsqueeze", || t.unsqueeze(*dim)),
            ViewStep::Squeeze(dim) => squeezed(py, t, &[*dim]),
            ViewStep::Slice { axis, start, len } => {
                record(py, "slice", || t.slice(*axis as i64, *start, start + len, 1))
            }
            ViewStep::Select { axis, index } => {
                let mut dims = t.dims().to_vec();
                dims.remove(*axis);
                let a = *axis as i64;
                record(py, "select", || t.slice(a, *index, index + 1, 1)?.reshape(&dims))
            }
        }?;
        Ok(Bound::new(py, out)?.into_any())
    }

    /// The step back of a view into part of its base: `old`, the base's value, with `new`, the
    /// view's new value, in the view's place (the engine's values are immutable: `new` is
    /// padded to the base's shape and chosen by a mask, as `lowerings.views` writes a slice).
    fn apply_back<'py>(
        &self,
        old: &Bound<'py, PyAny>,
        new: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = old.py();
        let (base, part) = (&old.cast::<PyTensor>()?.get().t, &new.cast::<PyTensor>()?.get().t);
        let (axis, start, part) = match self {
            ViewStep::Slice { axis, start, .. } => (*axis, *start, part.clone()),
            ViewStep::Select { axis, index } => {
                let mut dims = part.dims().to_vec();
                dims.insert(*axis, 1);
                (*axis, *index, record(py, "unsqueeze", || part.reshape(&dims))?.t)
            }
            _ => return self.apply(new),
        };
        let out = record(py, "slice_scatter", || {
            let mut pads = vec![(0, 0); base.rank()];
            pads[axis] = (start, base.dims()[axis] - start - part.dims()[axis]);
            let part = if part.dtype() == base.dtype() { part } else { part.cast(base.dtype())? };
            let placed = part.pad(&pads, 0.0)?;
            let mask = Tensor::ones(part.dims(), DType::Pred).pad(&pads, 0.0)?;
            Tensor::where_(&mask, &placed, base)
        })?;
        Ok(Bound::new(py, out)?.into_any())
    }
}

/// One step between a view and its base: made natively, or a Python function of `make_view`
/// (forward: `fwd(base_value)`; back: `bwd(base_value, new)`, the base's new value).
enum Step {
    Native(ViewStep),
    Python(Py<PyAny>),
}

/// Makes `view` a view of `base`: the one place a view is linked to its root, for the views
/// made here and for `_tensor.make_view`'s. A view of a view reaches the root through its
/// base's steps; `back_reads_base` says whether the step back needs the base's old value (a
/// Python step that writes into part of it; a reshape or a transpose does not).
fn link(
    view: &Bound<'_, PyAny>,
    base: &Bound<'_, PyAny>,
    forward: Step,
    back: Step,
    back_reads_base: bool,
) -> PyResult<()> {
    let py = view.py();
    let root = base.getattr(intern!(py, "_root"))?;
    let (root, base_forward, base_backward) = if root.is_none() {
        (base.clone(), None, None)
    } else {
        let forward = base.getattr(intern!(py, "_fwd"))?.unbind();
        (root, Some(forward), Some(base.getattr(intern!(py, "_bwd"))?.unbind()))
    };
    let backward = ViewBackward {
        step: back,
        reads_base: back_reads_base,
        base_forward: base_forward.as_ref().map(|f| f.clone_ref(py)),
        base: base_backward,
    };
    view.setattr(intern!(py, "_fwd"), ViewForward { step: forward, base: base_forward })?;
    view.setattr(intern!(py, "_bwd"), backward)?;
    view.setattr(intern!(py, "_seen"), root.getattr(intern!(py, "_gen"))?)?;
    view.setattr(intern!(py, "_root"), root)?;
    Ok(())
}

/// `_tensor.make_view`'s linking: `view` (already holding its value) a view of `base` through
/// `fwd` and `bwd` (see [`link`]).
#[pyfunction]
pub(crate) fn link_view(
    view: &Bound<'_, PyAny>,
    base: &Bound<'_, PyAny>,
    fwd: Py<PyAny>,
    bwd: Py<PyAny>,
    bwd_reads_base: bool,
) -> PyResult<()> {
    link(view, base, Step::Python(fwd), Step::Python(bwd), bwd_reads_base)
}

/// A view's `_fwd`: its root's value to its own (through its base's `_fwd`, if any).
#[pyclass(frozen)]
struct ViewForward {
    step: Step,
    base: Option<Py<PyAny>>,
}

#[pymethods]
impl ViewForward {
    fn __call__<'py>(&self, root: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let base_value = match &self.base {
            None => root.clone(),
            Some(base) => base.bind(root.py()).call1((root,))?,
        };
        match &self.step {
            Step::Native(step) => step.apply(&base_value),
            Step::Python(fwd) => fwd.bind(root.py()).call1((base_value,)),
        }
    }
}

/// A view's `_bwd`: the root's new value after a write of `new` through the view. A step back
/// from a view into part of its base (a slice's, a select's, a Python step's) may need the
/// base's old value (`reads_base`), recomputed from the root through the base's `_fwd`; a
/// reshape's or a transpose's needs only the new value.
#[pyclass(frozen)]
struct ViewBackward {
    step: Step,
    reads_base: bool,
    base_forward: Option<Py<PyAny>>,
    base: Option<Py<PyAny>>,
}

#[pymethods]
impl ViewBackward {
    fn __call__<'py>(
        &self,
        root: &Bound<'py, PyAny>,
        new: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = root.py();
        let old = || match (&self.base_forward, self.reads_base) {
            (None, _) => Ok(root.clone()), // the base is the root: its value is at hand
            (Some(_), false) => Ok(py.None().into_bound(py)),
            (Some(forward), true) => forward.bind(py).call1((root,)),
        };
        let base_value = match &self.step {
            Step::Native(inverse) if self.reads_base => inverse.apply_back(&old()?, new)?,
            Step::Native(inverse) => inverse.apply(new)?,
            Step::Python(bwd) => bwd.bind(py).call1((old()?, new))?,
        };
        match &self.base {
            None => Ok(base_value),
            Some(base) => base.bind(py).call1((root, base_value)),
        }
    }
}

/// A tensor's own attributes (`LazyTensor`'s `_xp`, `_root`, ...; a stand-in's), read and
/// written in its instance dictionary directly: each attribute of a torch tensor costs a tenth
/// of a microsecond through `getattr`, where a dictionary's item costs a few nanoseconds. An
/// attribute absent there is the class's default (`_root` None, `_traced` False, `_gen` 0).
pub(crate) fn attributes<'py>(tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    Ok(tensor.getattr(intern!(tensor.py(), "__dict__"))?.cast_into::<PyDict>()?)
}

/// Whether a lazy tensor (its `attributes`) owns its value: no root, so not a view.
pub(crate) fn owns_its_value(attributes: &Bound<'_, PyDict>) -> PyResult<bool> {
    Ok(attributes.get_item(intern!(attributes.py(), "_root"))?.is_none_or(|r| r.is_none()))
}

/// `_tensor.rebind` of a lazy tensor that owns its value (its `attributes`; its value `old`)
/// to `new`, of the same dtype and shape: `new` takes the old value's place (its name, and its
/// buffer to donate), and the tensor's generation moves on, which its views read.
pub(crate) fn rebind_owner(
    attributes: &Bound<'_, PyDict>,
    old: &PyTensor,
    new: &Bound<'_, PyTensor>,
) -> PyResult<()> {
    let py = attributes.py();
    new.get().t.take_place_of(&old.t);
    attributes.set_item(intern!(py, "_xp"), new)?;
    let generation = intern!(py, "_gen");
    let g: u64 = attributes.get_item(generation)?.map_or(Ok(0), |g| g.extract())?;
    attributes.set_item(generation, g + 1)
}
