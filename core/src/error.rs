//! The one error type of `xlaprof-core`, grouped by where a failure comes from.

use std::path::PathBuf;

use crate::dtype::DType;
use crate::location::SourceLocation;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure that a user of the core crate can cause or meet. None of them panics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // ---- finding and loading the plugin ----
    #[error(
        "no PJRT plugin found. Install the official XLA CPU plugin with:\n    {install_hint}\n\
         or set XLAPROF_PJRT_PLUGIN to the path of a PJRT plugin (.so). Searched: {}",
        display_paths(searched)
    )]
    PluginNotFound { searched: Vec<PathBuf>, install_hint: &'static str },

    #[error(
        "no {device} PJRT plugin found (XLAPROF_DEVICE={device_env}). Looked for {} in: \
         {}.\nInstall one with:\n    {install_hint}\n\
         or set XLAPROF_PJRT_PLUGIN to the path of a PJRT plugin (.so).",
        looked_for.join(", "),
        display_paths(searched)
    )]
    DevicePluginNotFound {
        /// The device's name for people, e.g. "CUDA".
        device: &'static str,
        /// The value of `XLAPROF_DEVICE` that asked for it, e.g. "cuda".
        device_env: &'static str,
        /// Each package looked for, with where its library lies in site-packages.
        looked_for: Vec<String>,
        searched: Vec<PathBuf>,
        install_hint: &'static str,
    },

    #[error(
        "XLAPROF_DEVICE={value:?} is not a device xlaprof knows: use `cpu` (the default) or \
         `cuda`, or set XLAPROF_PJRT_PLUGIN to a PJRT plugin's path"
    )]
    UnknownDevice { value: String },

    #[error(
        "XLAPROF_PJRT_CREATE_OPTIONS: {message} (expected name=value pairs separated by commas, \
         e.g. memory_fraction=0.5,preallocate=false,visible_devices=[0,1],allocator=\"bfc\")"
    )]
    CreateOptions { message: String },

    #[error("cannot load the PJRT plugin {path}: {reason}")]
    PluginLoad { path: PathBuf, reason: String },

    #[error(
        "{path} is not a PJRT plugin: it does not export GetPjrtApi (set XLAPROF_PJRT_PLUGIN to a \
         PJRT plugin such as xla_cpu_pjrt.so)"
    )]
    NotAPjrtPlugin { path: PathBuf },

    #[error(
        "the PJRT plugin {path} speaks PJRT C API {plugin_major}.{plugin_minor}, but xlaprof was \
         built against {built_major}.{built_minor}; the major versions must match"
    )]
    ApiVersion {
        path: PathBuf,
        plugin_major: i32,
        plugin_minor: i32,
        built_major: i32,
        built_minor: i32,
    },

    // ---- errors reported by PJRT / XLA ----
    #[error("{call} failed ({code}): {message}")]
    Pjrt { call: &'static str, code: PjrtErrorCode, message: String },

    // ---- misuse of the runtime, caught before it reaches the plugin ----
    #[error("the executable takes {expected} inputs, but {given} were given")]
    InputCount { expected: usize, given: usize },

    #[error("input {index} of the executable must be {expected}, but {given} was given")]
    InputMismatch { index: usize, expected: String, given: String },

    #[error("host data has {given} elements, but shape {dims:?} needs {expected}")]
    HostDataSize { dims: Vec<i64>, expected: usize, given: usize },

    #[error("the buffer holds {actual} elements, not {requested}")]
    DTypeMismatch { actual: DType, requested: DType },

    #[error("the buffer was donated to an execution and can no longer be read")]
    BufferDeleted,

    #[error("device {index} does not exist: the client has {count} devices")]
    NoSuchDevice { index: usize, count: usize },

    // ---- tensor programs: caught when the op is recorded, at the user's line ----
    #[error("{op}: {message} (at {location})")]
    Shape { op: &'static str, message: String, location: SourceLocation },

    #[error("{message} (at {location})")]
    Autograd { message: String, location: SourceLocation },

    /// A sync inside `detect_anomalies()` computed a NaN or an Inf: the message names the op that
    /// made the first; `location` is the sync's line.
    #[error("detect_anomaly: {message} (found by the sync at {location})")]
    Anomaly { message: String, location: SourceLocation },

    /// A sync did what `XLAPROF_BREAK` breaks on (it ran to its end first); the message says what
    /// and why, at the user's line.
    #[error("{message}")]
    Break { message: String },

    /// A graph ran or a value was read inside `forbid_syncs()`.
    #[error("{what} at {location}, inside forbid_sync(): the block was not to run graphs or read values")]
    SyncForbidden { what: String, location: SourceLocation },

    /// A mesh or sharding that cannot be: the message names the mesh, the spec and the dims;
    /// the location is the user's line, where one is known (`mark_sharding`).
    #[error("{message}{}", location.as_ref().map(|l| format!(" (at {l})")).unwrap_or_default())]
    Sharding { message: String, location: Option<SourceLocation> },

    #[error(
        "the device ran out of memory running graph {graph:016x} (synced at {location}): \
         {message}\n  XLA's memory plan for the graph: {plan}\n  the device: {device}"
    )]
    OutOfMemory {
        graph: u64,
        location: SourceLocation,
        plan: String,
        device: String,
        message: String,
    },

    /// A program failed on the device after its sync had returned (the host runs ahead).
    #[error("graph {graph:016x}, synced at {location}, failed on the device: {source}")]
    DeviceFailed { graph: u64, location: SourceLocation, source: Box<Error> },

    #[error("the plugin returned a value xlaprof does not understand: {0}")]
    Unsupported(String),
}

/// PJRT's error codes (the absl status codes), kept as a value so callers can match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PjrtErrorCode {
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

impl PjrtErrorCode {
    pub(crate) fn from_raw(code: u32) -> Self {
        use PjrtErrorCode::*;
        match code {
            1 => Cancelled,
            3 => InvalidArgument,
            4 => DeadlineExceeded,
            5 => NotFound,
            6 => AlreadyExists,
            7 => PermissionDenied,
            8 => ResourceExhausted,
            9 => FailedPrecondition,
            10 => Aborted,
            11 => OutOfRange,
            12 => Unimplemented,
            13 => Internal,
            14 => Unavailable,
            15 => DataLoss,
            16 => Unauthenticated,
            _ => Unknown,
        }
    }
}

impl std::fmt::Display for PjrtErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

fn display_paths(paths: &[PathBuf]) -> String {
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    list.join(", ")
}
