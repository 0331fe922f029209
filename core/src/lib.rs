//! xlaprof's engine: a lazy-tensor execution engine in the style of PyTorch/XLA on the real XLA
//! compiler, and the PJRT runtime it runs on.
//!
//! Ops on [`Tensor`]s are recorded into an IR graph ([`ir`]); at a sync point ([`sync`], reading
//! a value) the pending graph is hashed, looked up in the compiled-graph cache, lowered to
//! StableHLO and compiled on a miss, and executed through PJRT. Every step emits an
//! [`events::Event`].

mod anomaly;
pub mod autograd;
pub mod breaks;
pub mod config;
mod debug;
pub mod dtype;
mod error;
pub mod events;
mod exec;
pub mod ir;
pub mod location;
mod lower;
pub mod nn;
mod ops;
mod replay;
pub mod runtime;
pub mod shape;
pub mod spmd;
mod tensor;
mod trace;

pub use anomaly::{check_all as check_anomalies, detect_anomalies, step, sync, DetectingAnomalies};
pub use autograd::no_grad;
pub use dtype::{DType, NativeType};
pub use error::{Error, PjrtErrorCode, Result};
pub use exec::{
    engine, engine_with_devices, forbid_syncs, mark_step, request_devices, started_engine,
    steps_start_afresh, wait, CacheStats, Engine, Explanation, SyncsForbidden,
};
pub use ir::{manual_seed, next_seed};
pub use location::SourceLocation;
pub use replay::{materialize, Replay};
pub use shape::Shape;
pub use tensor::{explain, Tensor};
