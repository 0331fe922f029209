//! xlaprof's engine: the PJRT runtime that runs programs with the real XLA compiler, and (built on
//! it) the lazy-tensor engine.

pub mod dtype;
mod error;
pub mod runtime;

pub use dtype::{DType, NativeType};
pub use error::{Error, PjrtErrorCode, Result};
