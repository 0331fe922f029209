//! Which device the user asks for (`XLAPROF_DEVICE`), and the plugin that runs it.

use std::path::PathBuf;

use super::locate;
use crate::error::Result;
use crate::Error;

/// Environment variable naming the device to run on: `cpu` (the default) or `cuda`.
pub const DEVICE_ENV: &str = "XLAPROF_DEVICE";

/// A kind of device xlaprof can find a plugin for by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Cuda,
}

impl DeviceKind {
    /// `cpu` or `cuda` (any case, spaces around ignored); anything else is
    /// [`Error::UnknownDevice`].
    pub fn parse(value: &str) -> Result<DeviceKind> {
        match value.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(DeviceKind::Cpu),
            "cuda" => Ok(DeviceKind::Cuda),
            _ => Err(Error::UnknownDevice { value: value.to_string() }),
        }
    }

    /// The device `XLAPROF_DEVICE` asks for; the CPU when it is unset or empty.
    pub fn from_env() -> Result<DeviceKind> {
        match std::env::var_os(DEVICE_ENV) {
            None => Ok(DeviceKind::Cpu),
            Some(v) if v.to_string_lossy().trim().is_empty() => Ok(DeviceKind::Cpu),
            Some(v) => DeviceKind::parse(&v.to_string_lossy()),
        }
    }

    /// The name `XLAPROF_DEVICE` gives this device.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        }
    }

    /// Finds this device's plugin in the Python environments of `project_roots` and the active
    /// one (see [`locate`]), or says what was looked for, where, and how to install it.
    pub fn find_plugin(self, project_roots: &[PathBuf]) -> Result<PathBuf> {
        match self {
            DeviceKind::Cpu => locate::find_cpu_plugin(project_roots)
                .map(|dir| dir.library())
                .map_err(|searched| Error::PluginNotFound {
                    searched,
                    install_hint: locate::INSTALL_HINT,
                }),
            DeviceKind::Cuda => locate::find_plugin_package(project_roots, locate::CUDA_PLUGINS)
                .map(|(_, path)| path)
                .map_err(cuda_not_found),
        }
    }
}

/// The error for a CUDA plugin that is nowhere in `searched`.
pub fn cuda_not_found(searched: Vec<PathBuf>) -> Error {
    Error::DevicePluginNotFound {
        device: "CUDA",
        device_env: "cuda",
        looked_for: locate::CUDA_PLUGINS
            .iter()
            .map(|p| format!("{} ({})", p.package, p.library))
            .collect(),
        searched,
        install_hint: locate::CUDA_INSTALL_HINT,
    }
}
