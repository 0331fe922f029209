//! Every environment variable xlaprof reads, in one table ([`VARS`], which the table of `docs/environment.md`
//! mirrors and a test holds it to), and the engine's settings, read from them when it starts.

use std::path::PathBuf;

/// An environment variable and what it does.
pub struct Var {
    pub name: &'static str,
    pub effect: &'static str,
}

pub const PJRT_PLUGIN: &str = crate::runtime::locate::PLUGIN_ENV;
pub const DEVICE: &str = crate::runtime::DEVICE_ENV;
pub const PJRT_CREATE_OPTIONS: &str = crate::runtime::CREATE_OPTIONS_ENV;
pub const CPU_DEVICES: &str = "XLAPROF_CPU_DEVICES";
pub const CACHE_DIR: &str = "XLAPROF_CACHE_DIR";
pub const CACHE_CAPACITY: &str = "XLAPROF_CACHE_CAPACITY";
pub const DEBUG: &str = "XLAPROF_DEBUG";
pub const DEBUG_FILE: &str = "XLAPROF_DEBUG_FILE";
pub const OPTIMIZED_HLO: &str = "XLAPROF_OPTIMIZED_HLO";
pub const PROFILE: &str = "XLAPROF_PROFILE";
pub const RUN_AHEAD: &str = "XLAPROF_RUN_AHEAD";
pub const WIDE_SUMS: &str = "XLAPROF_WIDE_SUMS";
/// Read by the torch bridge (`xlaprof.torch`), listed here so that one table has every variable.
pub const STRICT: &str = "XLAPROF_STRICT";
/// Read by the torch bridge, likewise.
pub const CHECK: &str = "XLAPROF_CHECK";
pub const DEBUG_NANS: &str = "XLAPROF_DEBUG_NANS";
/// Read by the torch bridge's torch.compile backend, likewise.
pub const FUSED_STEPS: &str = "XLAPROF_FUSED_STEPS";

/// Every variable, in the order `docs/environment.md` lists them.
pub const VARS: &[Var] = &[
    Var { name: PJRT_PLUGIN, effect: "path of the PJRT plugin to load (any plugin: CPU, CUDA, ...)" },
    Var { name: DEVICE, effect: "the device whose plugin is looked for when XLAPROF_PJRT_PLUGIN is unset: cpu (default) or cuda" },
    Var { name: PJRT_CREATE_OPTIONS, effect: "create options for the plugin, name=value,name=value; only the CPU plugin gets cpu_device_count" },
    Var { name: CPU_DEVICES, effect: "how many devices the CPU plugin makes (default 1, or as many as a mesh made before the first tensor needs); one-device programs run on the first" },
    Var { name: CACHE_DIR, effect: "persistent compile cache: compiled graphs are written here and loaded by later processes instead of compiling" },
    Var { name: CACHE_CAPACITY, effect: "how many compiled graphs the in-memory cache keeps (default 1024, least recently used evicted)" },
    Var { name: DEBUG, effect: "1: a compile analysis on every compile; 2: also an execution analysis on every execution" },
    Var { name: DEBUG_FILE, effect: "write the XLAPROF_DEBUG analyses to this file instead of stderr" },
    Var { name: OPTIMIZED_HLO, effect: "1: keep XLA's optimized HLO text of every compile" },
    Var { name: PROFILE, effect: "record the whole program to this profile file (each rank of a job of several processes beside it: FILE.rankN; a process that finds another writing the file writes beside it)" },
    Var { name: RUN_AHEAD, effect: "1: a sync returns once its program is queued on the device, and the host traces the next step while it runs (the default on GPUs); 0: a sync waits for its program (the default on the CPU, where torch.compile's graphs and the lazy code between them still run ahead unless this is 0)" },
    Var { name: WIDE_SUMS, effect: "1: float32 sums (and means, norms, variances) accumulate in float64 and round once, as exact as torch's (the default on the CPU, whose XLA sums a dimension element after element); 0: in float32 (the default on GPUs, which sum in trees)" },
    Var { name: STRICT, effect: "torch bridge: 1 makes an aten op with no lowering an error instead of a CPU fallback" },
    Var { name: DEBUG_NANS, effect: "1: every sync is checked for NaN and Inf, and the op that made the first is named (detect_anomaly() for the whole program)" },
    Var { name: CHECK, effect: "torch bridge: the bounds of every index checked on the device, read with the next sync's results, an index out of range an IndexError naming the op's line (the default, lazily); 0 leaves XLA's clamping, silent" },
    Var { name: FUSED_STEPS, effect: "torch.compile (backend=\"xlaprof\"): 1 records each run of a captured graph into the lazy trace, so a step's graphs and the lazy code between them run as one program (less device time, no overlap of the host with the device)" },
];

/// The engine's settings.
#[derive(Debug, Clone)]
pub(crate) struct EngineConfig {
    pub cpu_devices: i64,
    pub cache_dir: Option<PathBuf>,
    pub cache_capacity: usize,
    pub optimized_hlo: bool,
    /// 0: off; 1: compile analyses; 2: also execution analyses.
    pub debug_level: u8,
    pub debug_file: Option<PathBuf>,
    /// `XLAPROF_RUN_AHEAD`: `None` leaves it to the device.
    pub run_ahead: Option<bool>,
    /// `XLAPROF_WIDE_SUMS`: `None` leaves it to the device.
    pub wide_sums: Option<bool>,
}

impl EngineConfig {
    pub fn from_env() -> EngineConfig {
        let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string());
        EngineConfig {
            cpu_devices: var(CPU_DEVICES)
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .unwrap_or(1),
            cache_dir: std::env::var_os(CACHE_DIR).map(PathBuf::from),
            cache_capacity: var(CACHE_CAPACITY).and_then(|v| v.parse().ok()).unwrap_or(1024),
            optimized_hlo: var(OPTIMIZED_HLO).as_deref() == Some("1"),
            debug_level: match var(DEBUG).as_deref() {
                Some("1") => 1,
                Some("2") => 2,
                _ => 0,
            },
            debug_file: std::env::var_os(DEBUG_FILE).map(PathBuf::from),
            run_ahead: switch(var(RUN_AHEAD)),
            wide_sums: switch(var(WIDE_SUMS)),
        }
    }
}

/// A variable that is "1" (on), "0" (off) or anything else (the default).
fn switch(value: Option<String>) -> Option<bool> {
    match value.as_deref() {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    }
}
