//! The process-wide engine: its PJRT client, compiled-graph caches and settings, started once.

use super::*;

/// The process-wide engine: one PJRT client, one compiled-graph cache. One-device programs run
/// on `device`; a program partitioned over a mesh runs on the mesh's devices.
pub struct Engine {
    pub client: Client,
    pub device: usize,
    pub(super) cache: Mutex<GraphCache>,
    pub(super) disk: Option<disk_cache::DiskCache>,
    /// Keep XLA's optimized HLO of every compile (`XLAPROF_OPTIMIZED_HLO=1`).
    pub(super) capture_optimized_hlo: bool,
    /// Device buffers of host scalars, reused while their values recur.
    pub(super) scalars: Mutex<scalars::ScalarBuffers>,
    pub(super) epoch: AtomicU64,
    /// A sync returns once its program is queued (`XLAPROF_RUN_AHEAD`; GPUs by default).
    pub(super) run_ahead: bool,
    /// A captured graph's run, and a sync of the lazy code between compiled graphs (cause
    /// `CompiledGraph`), return once the program is queued (`replay.rs`, `sync.rs`): unless
    /// `XLAPROF_RUN_AHEAD=0`, on every device, the CPU's included.
    pub(super) replay_ahead: bool,
    /// f32 sums accumulate in f64 (`XLAPROF_WIDE_SUMS`; the CPU's default).
    pub(super) wide_sums: bool,
    /// Programs launched by a sync that returned before they finished, oldest first.
    pub(super) in_flight: Mutex<std::collections::VecDeque<InFlight>>,
    /// False once the plugin said it keeps no memory figures (the CPU plugin): not asked again.
    pub(super) memory_figures: std::sync::atomic::AtomicBool,
}

/// A program still running, perhaps, after its sync returned.
pub(super) struct InFlight {
    pub(super) graph: u64,
    pub(super) location: SourceLocation,
    /// Its end on each of its devices (one unless partitioned).
    pub(super) done: Vec<crate::runtime::Pending>,
    /// For the memory plan an out-of-memory error shows.
    pub(super) executable: Arc<crate::runtime::Executable>,
}

/// How many launched programs a lazy sync leaves running when it returns: its own. The one
/// before it is waited for, so the host runs at most one step ahead of the device and the memory
/// of at most two steps' outputs is pending.
pub(super) const IN_FLIGHT: usize = 1;

/// The same for a compiled graph's replay, and for the lazy code synced between two compiled
/// graphs. A compiled step is several graphs (forward, backward, the optimizer's, small ones
/// between them), each with the host's work of its call around it (guards, autograd): waiting
/// for the graph before each launch left the device idle while the host worked between two
/// graphs (a GPT-2 step on a GPU: 22 of its 111 ms). Eight lets the host run about one step
/// ahead, as the lazy path does.
pub(super) const REPLAYS_IN_FLIGHT: usize = 8;

pub(super) static ENGINE: OnceLock<Engine> = OnceLock::new();
pub(super) static INIT: Mutex<()> = Mutex::new(());
/// Devices asked for before the engine started (by a mesh): the CPU client gets at least these.
pub(super) static REQUESTED_DEVICES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The engine if it has started; never starts it (a profile asks what runs without deciding the
/// device count a later mesh needs).
pub fn started_engine() -> Option<&'static Engine> {
    ENGINE.get()
}

/// Asks for at least `count` devices when the engine starts (nothing once it has started).
pub fn request_devices(count: usize) {
    if ENGINE.get().is_none() {
        REQUESTED_DEVICES.fetch_max(count, Ordering::Relaxed);
    }
}

/// The engine, started with at least `count` devices (a mesh's) if it has not started yet.
///
/// The CPU plugin starts with one device unless asked for more (`XLAPROF_CPU_DEVICES`, or a mesh
/// made before the first tensor): with four, its one-device programs run about 20 % slower (the
/// MLP step of `xlaprof bench`: 2.6 ms with one device, 3.1 ms with four). Once started, the
/// device count is fixed, so a mesh larger than it is an error that says how to get more.
pub fn engine_with_devices(count: usize) -> Result<&'static Engine> {
    request_devices(count);
    let engine = engine()?;
    let have = engine.device_count();
    if have < count {
        let message = match engine.client.plugin().kind() {
            crate::runtime::PluginKind::Cpu => format!(
                "a mesh of {count} devices, but the engine started with {have}: set \
                 XLAPROF_CPU_DEVICES={count} before the program starts, or make the mesh before \
                 the first tensor"
            ),
            _ => format!("a mesh of {count} devices, but the plugin has {have}"),
        };
        return Err(crate::Error::Sharding { location: None, message });
    }
    Ok(engine)
}

/// The engine, created on first use from the default plugin (see `runtime::Plugin::from_env`).
pub fn engine() -> Result<&'static Engine> {
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let _guard = INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let config = EngineConfig::from_env();
    let client = Client::new(
        crate::runtime::Plugin::from_env()?,
        &crate::runtime::ClientOptions::default()
            .cpu_device_count(
                config.cpu_devices.max(REQUESTED_DEVICES.load(Ordering::Relaxed) as i64),
            )
            // A GPU's memory grows as programs need it rather than 75 % taken at start: the
            // engine shares the GPU with torch's allocator in the same process and with other
            // processes (a benchmark's child, JAX), and the profile's memory figures then show
            // what the program uses. `XLAPROF_PJRT_CREATE_OPTIONS=preallocate=true` restores it.
            .gpu_preallocate(false),
    )?;
    let wide_sums =
        config.wide_sums.unwrap_or(client.plugin().kind() == crate::runtime::PluginKind::Cpu);
    let disk = config.cache_dir.as_ref().and_then(|dir| {
        disk_cache::open(dir, &client, 0, wide_sums)
            .map_err(|why| eprintln!("xlaprof: persistent compile cache off: {why}"))
            .ok()
    });
    let engine = Engine {
        disk,
        capture_optimized_hlo: config.optimized_hlo,
        device: 0,
        cache: Mutex::new(GraphCache::new(config.cache_capacity)),
        scalars: Mutex::default(),
        epoch: AtomicU64::new(1),
        run_ahead: config
            .run_ahead
            .unwrap_or(client.plugin().kind() != crate::runtime::PluginKind::Cpu),
        replay_ahead: config.run_ahead.unwrap_or(true),
        wide_sums,
        in_flight: Mutex::default(),
        memory_figures: std::sync::atomic::AtomicBool::new(true),
        client,
    };
    crate::debug::install(&config);
    Ok(ENGINE.get_or_init(|| engine))
}

impl Engine {
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).stats()
    }

    /// The StableHLO text of a compiled graph still in the cache.
    pub fn stablehlo(&self, graph_hash: u64) -> Option<Arc<str>> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(graph_hash).map(|c| c.stablehlo)
    }

    /// How many devices the engine's client has (meshes are made of them).
    pub fn device_count(&self) -> usize {
        self.client.devices().len()
    }

    /// Whether syncs return before their programs finish (see `XLAPROF_RUN_AHEAD`).
    pub fn runs_ahead(&self) -> bool {
        self.run_ahead
    }

    /// Leaves a launched program running, then waits until at most `keep` are.
    pub(super) fn leave_running(&self, program: InFlight, keep: usize) -> Result<()> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).push_back(program);
        self.wait_in_flight(keep)
    }

    /// Waits for every program still running; the first failure, named by its graph and sync.
    pub(super) fn wait_in_flight(&self, keep: usize) -> Result<()> {
        let mut queue = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let mut status = Ok(());
        while queue.len() > keep {
            let Some(f) = queue.pop_front() else { break };
            if let Err(e) = crate::runtime::Pending::wait_all(f.done) {
                // Its sync has returned: the error names the graph and the line that ran it.
                let e = match self.device_error(e, f.graph, &f.location, &f.executable) {
                    e @ crate::Error::OutOfMemory { .. } => e,
                    e => crate::Error::DeviceFailed {
                        graph: f.graph,
                        location: f.location.clone(),
                        source: Box::new(e),
                    },
                };
                status = status.and(Err(e));
            }
        }
        status
    }

    /// `e`, from running `graph` (compiled as `executable`) synced at `location`, told as the
    /// user needs it: out of memory with the graph's memory plan and the device's figures.
    pub(super) fn device_error(
        &self,
        e: crate::Error,
        graph: u64,
        location: &SourceLocation,
        executable: &crate::runtime::Executable,
    ) -> crate::Error {
        let exhausted =
            matches!(&e, crate::Error::Pjrt { code: crate::PjrtErrorCode::ResourceExhausted, .. })
                || e.to_string().to_lowercase().contains("out of memory");
        if exhausted {
            let mib = |b: i64| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
            let plan = match executable.memory_stats() {
                Ok(m) => format!(
                    "arguments {}, outputs {}, temporaries {}, peak {}",
                    mib(m.argument_bytes),
                    mib(m.output_bytes),
                    mib(m.temp_bytes),
                    mib(m.peak_memory_bytes)
                ),
                Err(_) => "not reported by the plugin".to_string(),
            };
            let device = match self.client.device_memory(self.device) {
                Ok(Some(m)) => format!(
                    "{} in use{}{}",
                    mib(m.in_use_bytes),
                    m.peak_bytes.map(|p| format!(", peak {}", mib(p))).unwrap_or_default(),
                    m.limit_bytes.map(|l| format!(", limit {}", mib(l))).unwrap_or_default()
                ),
                _ => "no memory figures from the plugin".to_string(),
            };
            return crate::Error::OutOfMemory {
                graph,
                location: location.clone(),
                plan,
                device,
                message: e.to_string(),
            };
        }
        e
    }

    /// The device's memory now, as an event for the profiler (at the end of a step).
    pub(super) fn note_memory(&self, step: u64) {
        if !self.memory_figures.load(Ordering::Relaxed) {
            return;
        }
        match self.client.device_memory(self.device) {
            Ok(Some(memory)) => {
                events::emit(Event::DeviceMemory { step, device: self.device, memory })
            }
            _ => self.memory_figures.store(false, Ordering::Relaxed),
        }
    }

    /// Sets how many compiled graphs the in-memory cache keeps (least recently used go first).
    pub fn set_cache_capacity(&self, capacity: usize) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).set_capacity(capacity);
    }
}
