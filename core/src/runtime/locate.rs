//! Where the PJRT plugin lives on this machine.
//!
//! Shared by the build script (which needs the `pjrt_c_api.h` shipped beside the plugin to generate
//! bindings) and by the runtime (which loads the plugin), so both always agree on one wheel.
//! Only `std` is used here because the build script includes this file too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable naming any PJRT plugin shared library (CPU, CUDA, ...).
pub const PLUGIN_ENV: &str = "XLAPROF_PJRT_PLUGIN";

/// The command that installs the official XLA CPU plugin where xlaprof looks first.
pub const INSTALL_HINT: &str = "python3 -m venv .venv && .venv/bin/pip install xla-cpu-pjrt==0.0.1";

/// The commands that install a CUDA plugin xlaprof finds by itself.
pub const CUDA_INSTALL_HINT: &str = "pip install xla-cuda12-pjrt   (CUDA 12; \
                                     `pip install xla-cuda13-pjrt` for CUDA 13)";

/// Path of the plugin package inside a site-packages folder.
const PACKAGE_DIR: &str = "xla_plugins/xla_cpu_pjrt";
const LIBRARY_NAME: &str = "xla_cpu_pjrt.so";
const HEADER_NAME: &str = "include/pjrt_c_api.h";

/// A plugin package that can be installed into a Python environment: its name on PyPI and where
/// its shared library lies inside `site-packages` (checked against the published wheels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginPackage {
    pub package: &'static str,
    pub library: &'static str,
}

/// The CUDA plugins looked for when a GPU is asked for, in this order in each environment: the
/// official OpenXLA packages, then JAX's, the newer CUDA first.
pub const CUDA_PLUGINS: &[PluginPackage] = &[
    PluginPackage {
        package: "xla-cuda13-pjrt",
        library: "xla_plugins/xla_cuda13_pjrt/xla_gpu_pjrt.so",
    },
    PluginPackage {
        package: "xla-cuda12-pjrt",
        library: "xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so",
    },
    PluginPackage {
        package: "jax-cuda13-pjrt",
        library: "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
    },
    PluginPackage {
        package: "jax-cuda12-pjrt",
        library: "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
    },
];

/// The folder of an installed `xla-cpu-pjrt` wheel: it holds the plugin and its C header.
#[derive(Debug, Clone)]
pub struct CpuPluginDir(pub PathBuf);

impl CpuPluginDir {
    pub fn library(&self) -> PathBuf {
        self.0.join(LIBRARY_NAME)
    }
    pub fn header(&self) -> PathBuf {
        self.0.join(HEADER_NAME)
    }
}

/// Finds the installed CPU plugin: first in the `.venv` of each project root (and of their
/// ancestors), then in an active virtual environment, then in the site-packages of the `python3`
/// on PATH. Returns the places searched when none holds it, so the error can list them.
pub fn find_cpu_plugin(project_roots: &[PathBuf]) -> Result<CpuPluginDir, Vec<PathBuf>> {
    search(project_roots, |site| {
        let dir = CpuPluginDir(site.join(PACKAGE_DIR));
        dir.library().is_file().then_some(dir)
    })
}

/// Finds the first of `packages` installed in the same places, in the same order, as
/// [`find_cpu_plugin`]; within one environment the order of `packages` decides. Returns the
/// library's path, or the places searched.
pub fn find_plugin_package(
    project_roots: &[PathBuf],
    packages: &[PluginPackage],
) -> Result<(PluginPackage, PathBuf), Vec<PathBuf>> {
    search(project_roots, |site| find_in_site(site, packages))
}

/// The first of `packages` whose library is a file under this `site-packages` folder.
pub fn find_in_site(site: &Path, packages: &[PluginPackage]) -> Option<(PluginPackage, PathBuf)> {
    packages.iter().map(|p| (*p, site.join(p.library))).find(|(_, path)| path.is_file())
}

/// Probes each site-packages folder in order of preference until `probe` finds something.
fn search<T>(
    project_roots: &[PathBuf],
    mut probe: impl FnMut(&Path) -> Option<T>,
) -> Result<T, Vec<PathBuf>> {
    let mut searched = Vec::new();
    let mut venvs: Vec<PathBuf> = Vec::new();
    for root in project_roots {
        for dir in root.ancestors() {
            venvs.push(dir.join(".venv"));
        }
    }
    if let Some(active) = std::env::var_os("VIRTUAL_ENV") {
        venvs.push(PathBuf::from(active));
    }
    for venv in venvs {
        for site in venv_site_packages(&venv) {
            if let Some(found) = probe(&site) {
                return Ok(found);
            }
            searched.push(site);
        }
        if searched.last() != Some(&venv) && !venv.exists() {
            // Record the venv itself once so the error shows where a .venv was expected.
            searched.push(venv);
        }
    }
    for site in python_site_packages() {
        if let Some(found) = probe(&site) {
            return Ok(found);
        }
        searched.push(site);
    }
    let mut seen = std::collections::HashSet::new();
    searched.retain(|p| seen.insert(p.clone()));
    Err(searched)
}

/// `lib/python3.X/site-packages` folders of a virtual environment (any Python minor version).
fn venv_site_packages(venv: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(venv.join("lib")) else {
        return Vec::new();
    };
    let mut sites: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    sites.sort();
    sites
}

/// The import path of the `python3` on PATH; empty when there is no such interpreter.
fn python_site_packages() -> Vec<PathBuf> {
    let script = "import site, sys\n\
                  dirs = site.getsitepackages() + [site.getusersitepackages()] + sys.path\n\
                  print('\\n'.join(d for d in dirs if d))";
    let Ok(out) = Command::new("python3").args(["-c", script]).output() else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from).filter(|p| p.is_dir()).collect()
}
