//! xlaprof for Python and Jupyter.
//!
//! - [`widget`]: the notebook widget, a self-contained HTML document drawn from a profile and its
//!   analysis (no server, no JavaScript). Pure Rust, tested without Python.
//! - `py` (feature `python`): the `xlaprof._native` extension module that the Python package
//!   `xlaprof` wraps: tensors, autograd, modules, optimizers, profiling.

pub mod widget;

#[cfg(feature = "python")]
mod py;
