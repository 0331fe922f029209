//! The executor: at a sync point, the pending graph is collected, hashed, looked up in the
//! compiled-graph cache, lowered and compiled on a miss, and executed; then every synced tensor
//! becomes device data. One event at every step.

mod cache;
mod collectives;
mod disk_cache;
mod explain;
mod forbid;
mod partition;
mod replay;
mod scalars;
mod summary;
pub(crate) mod watch;

mod compile;
mod engine;
mod launch;
mod sync;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use cache::CacheStats;
use cache::{CachedGraph, GraphCache};
pub(crate) use explain::explain;
pub use explain::Explanation;
pub(crate) use forbid::check as check_sync_allowed;
pub use forbid::{forbid_syncs, SyncsForbidden};
pub(crate) use replay::{materialize, Replay};
pub use watch::{detect_anomalies, DetectingAnomalies};

use crate::config::EngineConfig;
use crate::error::Result;
use crate::events::{self, bump, counter, Direction, Event, SyncCause};
use crate::ir::{DeviceData, Donate, Graph, Inputs, Node, NodeRef, Op, Replaces};
use crate::location::SourceLocation;
use crate::lower;
use crate::runtime::{Buffer, Client, CompileOptions};
use crate::trace::{self, Trace, Value};

pub(crate) use compile::compile;
pub use engine::{engine, engine_with_devices, request_devices, started_engine, Engine};
pub(crate) use launch::execute;
pub use sync::{mark_step, step, steps_start_afresh, sync, wait};
pub(crate) use sync::{needs, sync_all, sync_tensors, FULL_SYNCS, REPLAYED};

use engine::*;
use sync::*;
