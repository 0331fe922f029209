//! The PJRT runtime: load a plugin, make a client, move buffers, compile StableHLO and execute.
//!
//! All `unsafe` code of xlaprof lives in this module. Each PJRT handle has one owner that releases
//! it exactly once on drop; buffers and executables keep their client alive. Every PJRT error
//! becomes an [`Error::Pjrt`](crate::Error::Pjrt) with XLA's code and message.

mod buffer;
mod client;
mod device;
mod executable;
#[doc(hidden)]
pub mod ffi;
pub mod locate;
mod options;
mod plugin;
mod proto;
mod quiet;
mod signature;

pub(crate) use buffer::typed_from_bytes;
pub use buffer::Buffer;
pub use client::{Client, Device, DeviceMemory};
pub use device::{DeviceKind, DEVICE_ENV};
pub use executable::{
    CompileOptions, CostAnalysis, Executable, Launched, LaunchedPartitioned, MemoryStats, Pending,
};
pub use options::{
    env_create_options, parse_create_options, ClientOptions, CreateOption, OptionValue, PluginKind,
    CREATE_OPTIONS_ENV,
};
pub use plugin::{default_plugin_path, Plugin};
pub use proto::Override;
pub use signature::{Signature, TensorType};
