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
use crate::ir::{DeviceData, Graph, Inputs, Node, NodeRef, Op};
use crate::location::SourceLocation;
use crate::lower;
use crate::runtime::{Buffer, Client, CompileOptions};
use crate::trace::{self, Trace, Value};

/// The process-wide engine: one PJRT client, one compiled-graph cache. One-device programs run
/// on `device`; a program partitioned over a mesh runs on the mesh's devices.
pub struct Engine {
    pub client: Client,
    pub device: usize,
    cache: Mutex<GraphCache>,
    disk: Option<disk_cache::DiskCache>,
    /// Keep XLA's optimized HLO of every compile (`XLAPROF_OPTIMIZED_HLO=1`).
    capture_optimized_hlo: bool,
    /// Device buffers of host scalars, reused while their values recur.
    scalars: Mutex<scalars::ScalarBuffers>,
    epoch: AtomicU64,
    /// A sync returns once its program is queued (`XLAPROF_RUN_AHEAD`; GPUs by default).
    run_ahead: bool,
    /// A captured graph's run returns once its program is queued (`replay.rs`): unless
    /// `XLAPROF_RUN_AHEAD=0`, on every device, the CPU's included.
    replay_ahead: bool,
    /// f32 sums accumulate in f64 (`XLAPROF_WIDE_SUMS`; the CPU's default).
    wide_sums: bool,
    /// Programs launched by a sync that returned before they finished, oldest first.
    in_flight: Mutex<std::collections::VecDeque<InFlight>>,
    /// False once the plugin said it keeps no memory figures (the CPU plugin): not asked again.
    memory_figures: std::sync::atomic::AtomicBool,
}

/// A program still running, perhaps, after its sync returned.
struct InFlight {
    graph: u64,
    location: SourceLocation,
    done: crate::runtime::Pending,
    /// For the memory plan an out-of-memory error shows.
    executable: Arc<crate::runtime::Executable>,
}

/// How many launched programs a sync leaves running when it returns: its own. The one before it
/// is waited for, so the host runs at most one step ahead of the device and the memory of at
/// most two steps' outputs is pending.
const IN_FLIGHT: usize = 1;

static ENGINE: OnceLock<Engine> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());
/// Devices asked for before the engine started (by a mesh): the CPU client gets at least these.
static REQUESTED_DEVICES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

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

    /// Waits for every program still running; the first failure, named by its graph and sync.
    fn wait_in_flight(&self, keep: usize) -> Result<()> {
        let mut queue = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let mut status = Ok(());
        while queue.len() > keep {
            let Some(f) = queue.pop_front() else { break };
            if let Err(e) = f.done.wait() {
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
    fn device_error(
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
    fn note_memory(&self, step: u64) {
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

/// Computes every live pending tensor in one graph and makes each device data
/// (torch_xla's `mark_step`).
#[track_caller]
pub fn sync() -> Result<()> {
    let location = SourceLocation::caller();
    sync_all(SyncCause::Explicit, location)
}

/// Like [`sync`], marking the end of a training step.
#[track_caller]
pub fn step() -> Result<()> {
    let location = SourceLocation::caller();
    sync_all(SyncCause::StepEnd, location.clone())?;
    mark_step(location);
    Ok(())
}

/// Ends a training step without a sync: for a front end whose steps the engine does not run (a
/// `torch.compile` program on another backend, its steps told by its optimizer). It does not
/// start the engine.
pub fn mark_step(location: SourceLocation) {
    let step = STEPS.fetch_add(1, Ordering::Relaxed) + 1;
    if events::enabled() {
        events::emit(Event::StepMarker { step, location });
        // An engine not started yet has no memory to report (and a step must not start it:
        // a mesh made later could not have its devices).
        if let Some(engine) = started_engine() {
            engine.note_memory(step);
        }
    }
}

/// Waits until every program launched so far has finished on the device (torch_xla's
/// `wait_device_ops`): what a sync does not do when the host runs ahead (`XLAPROF_RUN_AHEAD`).
/// The first failure is returned, named by its graph and the line of its sync.
pub fn wait() -> Result<()> {
    match started_engine() {
        Some(engine) => engine.wait_in_flight(0),
        None => Ok(()),
    }
}

/// Training steps ended so far (`step()` calls).
static STEPS: AtomicU64 = AtomicU64::new(0);

static NEXT_SYNC: AtomicU64 = AtomicU64::new(1);

fn sync_what(cause: SyncCause) -> &'static str {
    match cause {
        SyncCause::Explicit => "sync() ran a graph",
        SyncCause::ValueRead => "a value read ran a graph",
        SyncCause::StepEnd => "step() ran a graph",
        SyncCause::CompiledGraph => "a compiled graph ran",
    }
}

/// Computes every live pending tensor, from the trace that recorded them (see `trace`).
fn sync_all(cause: SyncCause, location: SourceLocation) -> Result<()> {
    let engine = engine()?;
    let _serial = trace::serialize();
    // Checked before the trace is taken: what is pending stays pending. The pending tensors
    // are looked at only inside a block.
    if forbid::is_open() && trace::has_pending() {
        forbid::check(sync_what(cause), &location)?;
    }
    trace::free_small_graveyard();
    let (holders, mut trace) = trace::take();
    let tensors: Vec<&Value> = holders.iter().map(|h| h.value()).collect();
    let result = if tensors.is_empty() {
        Ok(())
    } else {
        run(engine, &tensors, Some(&mut trace), cause, location)
    };
    // The synced graph is freed while the next sync's program runs (see `trace`).
    trace::bury(trace);
    result
}

/// Computes `tensors` (a value read: only what they need).
pub(crate) fn sync_tensors(
    tensors: &[&Value],
    cause: SyncCause,
    location: SourceLocation,
) -> Result<()> {
    let engine = engine()?;
    let _serial = trace::serialize();
    // Tensors synced by someone else while we waited are already data.
    let tensors: Vec<&Value> = tensors.iter().copied().filter(|t| !t.is_data()).collect();
    if tensors.is_empty() {
        return Ok(());
    }
    forbid::check(sync_what(cause), &location)?;
    trace::free_small_graveyard();
    run(engine, &tensors, None, cause, location)
}

/// One sync of `tensors`; `trace` when they are every live pending tensor and the trace that
/// recorded them.
fn run(
    engine: &Engine,
    tensors: &[&Value],
    trace: Option<&mut Trace>,
    cause: SyncCause,
    location: SourceLocation,
) -> Result<()> {
    let listening = events::enabled();
    let sync_id = NEXT_SYNC.fetch_add(1, Ordering::Relaxed);
    let sync_start = events::now_ns();
    bump(&counter::syncs, 1);
    if listening {
        events::flush_traced();
        let location = location.clone();
        events::emit(Event::SyncBegin { sync_id, cause, location, tensors: tensors.len() });
    }

    // 1-2: the graph and its structural key.
    let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
    let epoch = engine.epoch.fetch_add(1, Ordering::Relaxed);
    let t = events::now_ns();
    // Donating is only safe when every live pending tensor is in this graph: a value read computes
    // a part, and a node it shares with a tensor left pending would still need the donated input.
    // Nor while anomalies are looked for: the graph may have to run again on the same inputs.
    let detecting = watch::detecting();
    let full = cause != SyncCause::ValueRead && !detecting;
    let (mut graph, trace) = build_graph(&roots, trace, epoch, full);

    // 3: cache lookup (memory, then disk), 4-5: lower and compile on a miss.
    let cached = {
        let mut cache = engine.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(graph.key).or_else(|| {
            // Compiled before with other donations: run that, keeping what is held now.
            let (key, donated, kept, c) =
                cache.get_same_graph(graph.undonated_key, &graph.donated)?;
            graph.key = key;
            graph.donated = donated;
            graph.kept = kept;
            Some(c)
        })
    };
    let summary = match (&cached, listening) {
        // Inputs kept from donation this time: the donations that take place, as they are.
        (Some(c), true) if !graph.kept.is_empty() => Some(Arc::new(events::GraphSummary {
            donated: graph.donated.clone(),
            ..(*c.summary).clone()
        })),
        (Some(c), true) => Some(c.summary.clone()),
        (None, _) => {
            if let Some(trace) = trace {
                trace.lay_out(&mut graph, &roots, epoch);
            }
            Some(Arc::new(summary::summary(&graph)))
        }
        _ => None,
    };
    if let (true, Some(summary)) = (listening, &summary) {
        let duration_ns = events::now_ns() - t;
        events::emit(Event::GraphBuilt {
            sync_id,
            hash: graph.key,
            summary: summary.clone(),
            duration_ns,
        });
    }
    let compiled = match cached {
        Some(c) => {
            bump(&counter::cache_hits, 1);
            if listening {
                events::emit(Event::CacheLookup {
                    sync_id,
                    hash: graph.key,
                    hit: true,
                    persistent_hit: false,
                });
            }
            c
        }
        None => {
            bump(&counter::cache_misses, 1);
            let summary = summary.unwrap_or_default();
            let c = compile(engine, &graph, summary, sync_id, listening)?;
            let mut cache = engine.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.insert(graph.key, c.clone(), graph.undonated_key, &graph.donated);
            c
        }
    };

    // 6: inputs (device data, then the host scalars, each in its own dtype) and execute;
    // 7: every synced tensor becomes device data.
    let outputs = match &compiled.partitioning {
        // A value read needs its program's end anyway: it does not run ahead.
        None => {
            let ahead = engine.run_ahead && cause != SyncCause::ValueRead;
            execute(engine, &graph, &compiled, sync_id, &location, listening, ahead)?
        }
        Some(p) => execute_partitioned(engine, &graph, &compiled, p, sync_id, listening)?,
    };
    let mut synced = Vec::new();
    for (tensor, &slot) in tensors.iter().zip(&graph.root_outputs) {
        let root = tensor.node();
        let data = Node::new(
            Op::Data(outputs[slot].clone()),
            root.shape.clone(),
            Inputs::new(),
            root.location.clone(),
        );
        if detecting {
            synced.push(data.clone());
        }
        tensor.set_data(data);
    }
    if detecting {
        watch::keep(watch::Synced {
            roots: roots.clone(),
            outputs: synced,
            location: location.clone(),
        });
    }
    drop(graph);
    drop(roots);
    if listening {
        events::emit(Event::SyncEnd { sync_id, duration_ns: events::now_ns() - sync_start });
    }
    Ok(())
}

/// Runs a one-device graph: its outputs, in order.
pub(crate) fn execute(
    engine: &Engine,
    graph: &Graph,
    compiled: &CachedGraph,
    sync_id: u64,
    location: &SourceLocation,
    listening: bool,
    run_ahead: bool,
) -> Result<Vec<Arc<DeviceData>>> {
    let t = events::now_ns();
    let (scalars, uploaded) = engine.scalars.lock().unwrap_or_else(|p| p.into_inner()).get(
        &engine.client,
        engine.device,
        &graph.scalars,
    )?;
    note_scalar_upload(uploaded, t, sync_id, listening);
    let mut inputs: Vec<&Buffer> = Vec::with_capacity(graph.data.len() + scalars.len());
    for data in &graph.data {
        inputs.push(data.on_device(&engine.client, engine.device)?);
    }
    inputs.extend(scalars.iter().map(|b| b.as_ref()));
    let t = events::now_ns();
    let exe = &compiled.executable;
    let launched = exe
        .launch_keeping(&inputs, &graph.kept)
        .map_err(|e| engine.device_error(e, graph.key, location, exe))?;
    bump(&counter::executions, 1);
    let mut done = launched.done;
    if listening && run_ahead {
        // Timed when the device says it finished, after this sync has returned.
        let hash = graph.key;
        let _ = done.on_done(move |at, _| {
            let duration_ns = at.saturating_sub(t);
            events::emit(Event::Executed { sync_id, hash, duration_ns });
        });
    }
    // While it runs, the host frees earlier graphs (see `trace`).
    while !done.is_done() && trace::reap_while_executing() {}
    if run_ahead {
        let mut queue = engine.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let executable = compiled.executable.clone();
        queue.push_back(InFlight {
            graph: graph.key,
            location: location.clone(),
            done,
            executable,
        });
        drop(queue);
        engine.wait_in_flight(IN_FLIGHT)?;
    } else {
        done.wait().map_err(|e| engine.device_error(e, graph.key, location, exe))?;
        if listening {
            let duration_ns = events::now_ns() - t;
            events::emit(Event::Executed { sync_id, hash: graph.key, duration_ns });
        }
    }
    Ok(launched.outputs.into_iter().map(|b| Arc::new(DeviceData::single(b))).collect())
}

/// Runs a graph partitioned over a mesh: every partition's shards in, in one launch; each output
/// comes back as one shard per partition, with the sharding the plan gave it.
fn execute_partitioned(
    engine: &Engine,
    graph: &Graph,
    compiled: &CachedGraph,
    partitioning: &partition::Partitioning,
    sync_id: u64,
    listening: bool,
) -> Result<Vec<Arc<DeviceData>>> {
    let mesh = &partitioning.mesh;
    let devices = mesh.partitions();
    let t = events::now_ns();
    let mut scalars = Vec::with_capacity(devices.len());
    let mut uploaded = 0;
    {
        let mut cache = engine.scalars.lock().unwrap_or_else(|p| p.into_inner());
        for &device in devices {
            let (buffers, bytes) = cache.get(&engine.client, device, &graph.scalars)?;
            scalars.push(buffers);
            uploaded += bytes;
        }
    }
    let per_data: Vec<crate::ir::OnMesh> =
        graph.data.iter().map(|d| d.on_mesh(&engine.client, mesh)).collect::<Result<_>>()?;
    note_scalar_upload(uploaded, t, sync_id, listening);
    let inputs: Vec<Vec<&Buffer>> = (0..devices.len())
        .map(|p| {
            per_data
                .iter()
                .map(|data| data.get(p))
                .chain(scalars[p].iter().map(|b| b.as_ref()))
                .collect()
        })
        .collect();
    let t = events::now_ns();
    let run = compiled.executable.execute_partitioned(&inputs, listening)?;
    bump(&counter::executions, 1);
    if listening {
        let duration_ns = events::now_ns() - t;
        events::emit(Event::Executed { sync_id, hash: graph.key, duration_ns });
        let after_launch_ns = run.device_done_ns.iter().map(|&d| d.saturating_sub(t)).collect();
        events::emit(Event::DevicesFinished { sync_id, hash: graph.key, after_launch_ns });
    }
    let mut outputs = run.outputs;
    // outputs[partition][output] -> per output, its shards in partition order.
    let count = compiled.executable.num_outputs();
    let mut shards: Vec<Vec<crate::runtime::Buffer>> = (0..count).map(|_| Vec::new()).collect();
    for partition in outputs.iter_mut() {
        for (o, buffer) in partition.drain(..).enumerate() {
            shards[o].push(buffer);
        }
    }
    Ok(shards
        .into_iter()
        .zip(&partitioning.outputs)
        .map(|(shards, sharding)| Arc::new(DeviceData::sharded(shards, sharding.clone())))
        .collect())
}

fn note_scalar_upload(uploaded: u64, start: u64, sync_id: u64, listening: bool) {
    if uploaded > 0 {
        bump(&counter::bytes_to_device, uploaded);
        if listening {
            let duration_ns = events::now_ns() - start;
            events::emit(Event::Transfer {
                sync_id,
                direction: Direction::ToDevice,
                bytes: uploaded,
                duration_ns,
            });
        }
    }
}

/// The graph under `roots`: from the trace when it recorded exactly the nodes they need (no
/// walk; laid out only for a compile), else by walking it. Both give the same key (`graph::keys`).
fn build_graph<'a>(
    roots: &'a [NodeRef],
    trace: Option<&'a mut Trace>,
    epoch: u64,
    donate: bool,
) -> (Graph<'a>, Option<&'a Trace>) {
    let Some(trace) = trace else {
        return (Graph::build(roots, epoch, donate), None);
    };
    if trace.covers(roots) {
        let outputs = trace.settle(roots);
        if trace.is_exact() {
            let trace = &*trace;
            return (trace.graph(roots, outputs, donate), Some(trace));
        }
    }
    // The walk judges donation by reference counts: the trace's own must go.
    trace.release_params();
    (Graph::build(roots, epoch, donate), None)
}

pub(crate) fn compile(
    engine: &Engine,
    graph: &Graph,
    summary: Arc<events::GraphSummary>,
    sync_id: u64,
    listening: bool,
) -> Result<CachedGraph> {
    let partitioning = partition::plan(graph)?.map(Arc::new);
    let t = events::now_ns();
    let spmd = partitioning.as_ref().map(|p| (&*p.mesh, p.outputs.as_slice()));
    let text: Arc<str> = lower::stablehlo(graph, spmd, engine.wide_sums).into();
    if listening {
        let duration_ns = events::now_ns() - t;
        events::emit(Event::Lowered {
            sync_id,
            hash: graph.key,
            stablehlo: text.clone(),
            duration_ns,
        });
    }
    // Partitioned programs are not kept on disk: their compile options are not in the entry.
    let disk = engine.disk.as_ref().filter(|_| partitioning.is_none());
    let persisted = disk.and_then(|disk| {
        let found = disk.load(&engine.client, graph.key);
        bump(
            if found.is_some() {
                &counter::persistent_cache_hits
            } else {
                &counter::persistent_cache_misses
            },
            1,
        );
        found
    });
    if listening {
        let persistent_hit = persisted.is_some();
        events::emit(Event::CacheLookup { sync_id, hash: graph.key, hit: false, persistent_hit });
    }
    let executable = match persisted {
        Some(exe) => exe,
        None => {
            let t = events::now_ns();
            let options = CompileOptions {
                device: engine.device,
                partitions: partitioning
                    .as_ref()
                    .map(|p| p.mesh.partitions().to_vec())
                    .unwrap_or_default(),
                ..Default::default()
            };
            // XLAPROF_OPTIMIZED_HLO=1: also keep XLA's optimized HLO (for profiles and debugging).
            // A partitioned program's optimized HLO is where its collectives are found.
            let (executable, optimized_hlo) =
                if engine.capture_optimized_hlo || (partitioning.is_some() && listening) {
                    let (exe, hlo) = engine
                        .client
                        .compile_with_optimized_hlo(&text, &options)
                        .map_err(|e| with_program_line(e, &text))?;
                    (exe, Some(Arc::<str>::from(hlo)))
                } else {
                    let exe = engine
                        .client
                        .compile(&text, &options)
                        .map_err(|e| with_program_line(e, &text))?;
                    (exe, None)
                };
            bump(&counter::compiles, 1);
            if listening {
                let duration_ns = events::now_ns() - t;
                let plan = match (&partitioning, &optimized_hlo) {
                    (Some(p), Some(hlo)) => Some(Arc::new(partition_plan(graph, p, hlo))),
                    _ => None,
                };
                events::emit(Event::Compiled {
                    sync_id,
                    hash: graph.key,
                    duration_ns,
                    memory: executable.memory_stats().ok(),
                    cost: executable.cost_analysis().ok(),
                    // Kept for a partitioned program's collectives; shown only when asked for.
                    optimized_hlo: optimized_hlo.filter(|_| engine.capture_optimized_hlo),
                });
                if let Some(plan) = plan {
                    events::emit(Event::Partitioned { sync_id, hash: graph.key, plan });
                }
            }
            if let Some(disk) = disk {
                disk.store(graph.key, &executable);
            }
            executable
        }
    };
    Ok(CachedGraph { executable: Arc::new(executable), summary, stablehlo: text, partitioning })
}

/// What the profiler is told of a partitioned graph: the mesh, each input's and output's
/// sharding, and the collectives in XLA's program (`hlo`).
fn partition_plan(graph: &Graph, p: &partition::Partitioning, hlo: &str) -> events::PartitionPlan {
    let split = |s: &crate::spmd::Sharding| (!s.is_replicated()).then(|| s.spec());
    let mut inputs: Vec<Option<String>> = graph
        .data
        .iter()
        .map(|d| d.sharding().filter(|s| *s.mesh == *p.mesh).and_then(|s| split(s)))
        .collect();
    inputs.extend(graph.scalars.iter().map(|_| None));
    let mesh_axes =
        p.mesh.axis_names().iter().cloned().zip(p.mesh.shape().iter().copied()).collect();
    events::PartitionPlan {
        mesh_axes,
        devices: p.mesh.partitions().to_vec(),
        inputs,
        outputs: p.outputs.iter().map(|s| split(s)).collect(),
        collectives: collectives::collectives(hlo, |n| {
            graph.order.get(n).map(|node| node.location.clone())
        }),
    }
}

/// XLA reports parse errors as `-:LINE:COL: ...`; a program we generated that XLA rejects is our
/// bug, so the error carries the offending line of the program.
fn with_program_line(error: crate::Error, program: &str) -> crate::Error {
    let crate::Error::Pjrt { call, code, message } = error else {
        return error;
    };
    let line = message
        .strip_prefix("-:")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| program.lines().nth(n.saturating_sub(1)));
    match line {
        Some(line) => crate::Error::Pjrt {
            call,
            code,
            message: format!("{message}in generated StableHLO: {}", line.trim()),
        },
        None => crate::Error::Pjrt { call, code, message },
    }
}
