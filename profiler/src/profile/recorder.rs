//! Recording: a listener on the engine's events that builds a [`Profile`] and, when asked,
//! streams it to a profile file as it happens.
//!
//! Start and stop from code ([`Recording::start`], [`Recording::to_file`], [`Recording::stop`]),
//! or for a whole program with `XLAPROF_PROFILE=FILE` and [`init_from_env`] at the top of `main`.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use xlaprof_core::events::{
    self, CapturedGraph, Counters, Direction, Event, GraphSummary, InputKind, Listener,
};
use xlaprof_core::SourceLocation;

use crate::error::{Error, Result};
use crate::file::Writer;
use crate::profile::Profile;
use crate::record::{
    Cause,
    CollectiveRec, CostRec, FunctionCompileRec, GraphDef, InputName, InputRec, Location, MemoryRec,
    Meta, NodeRec, PartitionRec, Record, ShapeRec,
};
use crate::variables::SourceFiles;

struct State {
    profile: Profile,
    writer: Option<Writer>,
    write_failed: bool,
    /// Framed records not yet written: they go out together, one syscall per sync or step.
    pending: Vec<u8>,
    pending_records: u64,
    /// Engine time (ns) of the profile's time zero.
    t0: u64,
    locations: HashMap<SourceLocation, u32>,
    graphs: HashSet<u64>,
    stablehlo: HashSet<u64>,
    /// Whether the platform is in the profile yet (see [`Record::Platform`]).
    platform_known: bool,
    /// The last sync that ended: an execution reported after its sync ended (the host ran
    /// ahead of the device) goes out at once, as the sync's end did.
    ended_sync: u64,
    /// The program's source, read to name graph inputs by the variables their lines assign.
    sources: SourceFiles,
}

struct Recorder(Mutex<State>);

impl State {
    fn emit(&mut self, record: Record) {
        if self.writer.is_some() {
            // Out at the end of each sync and step, before a compile (which may take long, or
            // crash), and whenever 64 KiB wait: a crash loses what happened since then.
            if let Record::SyncEnd { sync, .. } = record {
                self.ended_sync = self.ended_sync.max(sync);
            }
            let flush = match record {
                Record::SyncEnd { .. }
                | Record::Step { .. }
                | Record::DeviceMemory { .. }
                | Record::Meta(_)
                | Record::CacheLookup { hit: false, .. }
                // A front end's compiles and graph runs are its syncs: out as they happen.
                | Record::FunctionCompiled(_)
                | Record::GraphBreak { .. }
                // A catch comes before an error that may end the program.
                | Record::Caught { .. }
                | Record::CapturedRun { .. }
                // A collective entered shows at once: a job stuck in it shows where.
                | Record::CollectiveEnter { .. }
                | Record::JobRank { .. } => true,
                Record::Executed { sync, .. } => sync <= self.ended_sync,
                _ => false,
            } || self.pending.len() > 64 << 10;
            crate::file::frame_into(&mut self.pending, &record);
            self.pending_records += 1;
            if flush {
                self.flush();
            }
        }
        self.profile.apply(record);
    }

    fn flush(&mut self) {
        let Some(w) = &mut self.writer else { return };
        if self.pending.is_empty() {
            return;
        }
        if let Err(e) = w.append_frames(&self.pending, self.pending_records) {
            if !self.write_failed {
                eprintln!("xlaprof: the profile file can no longer be written ({e}); recording continues in memory");
                self.write_failed = true;
            }
        }
        self.pending.clear();
        self.pending_records = 0;
    }

    /// The platform, once the engine runs (a sync or a transfer says it does), if `Meta` could
    /// not say it.
    fn note_platform(&mut self) {
        if !self.platform_known {
            if let Some((platform, plugin)) = platform() {
                self.platform_known = true;
                self.emit(Record::Platform { platform, plugin });
            }
        }
    }

    fn t(&self, at_ns: u64) -> u64 {
        at_ns.saturating_sub(self.t0)
    }

    fn location(&mut self, location: &SourceLocation) -> u32 {
        if let Some(&id) = self.locations.get(location) {
            return id;
        }
        let id = self.locations.len() as u32;
        self.locations.insert(location.clone(), id);
        let caller = match location {
            SourceLocation::External(l) => l.caller.clone(),
            SourceLocation::Rust(_) => None,
        };
        let location = Location {
            file: location.file().to_string(),
            line: location.line(),
            function: location.function().unwrap_or_default().to_string(),
        };
        self.emit(Record::Location { id, location });
        if let Some(caller) = caller {
            let caller = self.location(&SourceLocation::External(caller));
            self.emit(Record::Called { id, caller });
        }
        id
    }

    fn graph(&mut self, hash: u64, summary: &GraphSummary) {
        if !self.graphs.insert(hash) {
            return;
        }
        let inputs = summary
            .inputs
            .iter()
            .enumerate()
            .map(|(i, input)| InputRec {
                shape: (&input.shape).into(),
                data: input.kind == InputKind::Data,
                location: self.location(&input.location),
                donated: summary.donated.iter().any(|d| d.0 == i),
                name: None,
            })
            .collect::<Vec<_>>();
        let names: Vec<(u32, InputName)> = summary
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, input)| input.kind == InputKind::Data)
            .filter_map(|(i, input)| {
                let name = match &input.name {
                    Some(given) => InputName::Given(given.to_string()),
                    None => InputName::Variable(
                        self.sources.assigned_at(input.location.file(), input.location.line())?,
                    ),
                };
                Some((i as u32, name))
            })
            .collect();
        let node_defs = summary
            .node_defs
            .iter()
            .map(|n| NodeRec {
                op: n.op.to_string(),
                attrs: n.attrs.iter().map(|(k, v)| (k.to_string(), v.into())).collect(),
                inputs: n.inputs.clone(),
                shape: (&n.shape).into(),
                location: self.location(&n.location),
                hash: n.hash,
            })
            .collect();
        let def = GraphDef {
            hash,
            nodes: summary.nodes as u32,
            ops: summary.ops.iter().map(|(name, n)| (name.to_string(), *n as u32)).collect(),
            inputs,
            outputs: summary.outputs.iter().map(ShapeRec::from).collect(),
            node_defs,
        };
        self.emit(Record::Graph(Box::new(def)));
        if !names.is_empty() {
            self.emit(Record::InputNames { hash, names });
        }
    }
}

impl State {
    /// A graph a front end's compiler captured, as a graph of the profile: its nodes with the
    /// front end's op names, each node's hash made from its op, type and operands' hashes.
    fn captured_graph(&mut self, hash: u64, graph: &CapturedGraph) {
        if !self.graphs.insert(hash) {
            return;
        }
        let mut node_defs: Vec<NodeRec> = Vec::with_capacity(graph.nodes.len());
        let mut ops: Vec<(String, u32)> = Vec::new();
        for (at, n) in graph.nodes.iter().enumerate() {
            let operands: Vec<u32> =
                n.operands.iter().copied().filter(|&o| (o as usize) < at).collect();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&*n.op, &*n.dtype, &n.dims).hash(&mut h);
            for &o in &operands {
                node_defs[o as usize].hash.hash(&mut h);
            }
            if at >= graph.inputs {
                match ops.iter_mut().find(|(name, _)| name.as_str() == &*n.op) {
                    Some((_, count)) => *count += 1,
                    None => ops.push((n.op.to_string(), 1)),
                }
            }
            node_defs.push(NodeRec {
                op: n.op.to_string(),
                attrs: Vec::new(),
                inputs: operands,
                shape: ShapeRec { dtype: n.dtype.to_string(), dims: n.dims.clone() },
                location: self.location(&n.location),
                hash: h.finish(),
            });
        }
        let inputs = node_defs
            .iter()
            .take(graph.inputs)
            .map(|n| InputRec {
                shape: n.shape.clone(),
                data: true,
                location: n.location,
                donated: false,
                name: None,
            })
            .collect();
        let def = GraphDef {
            hash,
            nodes: node_defs.len() as u32,
            ops,
            inputs,
            outputs: Vec::new(),
            node_defs,
        };
        self.emit(Record::Graph(Box::new(def)));
    }
}

/// The engine's counters as a profile records them: the names once (in `Meta`), the values in
/// the same order at every sync. Both come from `Counters::named` and nothing else, so every
/// counter the engine has reaches the profile, under its own name.
pub fn counter_names(c: &Counters) -> Vec<String> {
    c.named().into_iter().map(|(name, _)| name.to_string()).collect()
}

/// See [`counter_names`].
pub fn counter_values(c: &Counters) -> Vec<u64> {
    c.named().into_iter().map(|(_, value)| value).collect()
}

/// The running engine's platform and plugin file name; None before it starts (which recording
/// never causes: a mesh made later decides how many devices it starts with).
fn platform() -> Option<(String, String)> {
    let e = xlaprof_core::started_engine()?;
    let file = e.client.plugin().path().file_name().map(|n| n.to_string_lossy().into_owned());
    Some((
        format!("{} {}", e.client.platform_name(), e.client.platform_version()),
        file.unwrap_or_default(),
    ))
}

impl Listener for Recorder {
    fn on_event(&self, at_ns: u64, event: &Event) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let t = s.t(at_ns);
        let record = match event {
            Event::SyncBegin { sync_id, cause: c, location, tensors, left_pending } => {
                s.note_platform();
                let location = s.location(location);
                let cause: Cause = (*c).into();
                s.emit(Record::SyncBegin { t, sync: *sync_id, cause, location, tensors: *tensors as u32 });
                if cause != Cause::ValueRead {
                    return;
                }
                Record::LeftPending { sync: *sync_id, tensors: *left_pending as u32 }
            }
            Event::GraphBuilt { sync_id, hash, summary, duration_ns } => {
                s.graph(*hash, summary);
                Record::GraphBuilt { t, sync: *sync_id, hash: *hash, dur: *duration_ns }
            }
            Event::CacheLookup { sync_id, hash, hit, persistent_hit } => Record::CacheLookup {
                t,
                sync: *sync_id,
                hash: *hash,
                hit: *hit,
                persistent: *persistent_hit,
            },
            Event::Lowered { sync_id, hash, stablehlo, duration_ns } => {
                if s.stablehlo.insert(*hash) {
                    s.emit(Record::StableHlo { hash: *hash, text: stablehlo.to_string() });
                }
                Record::Lowered { t, sync: *sync_id, hash: *hash, dur: *duration_ns }
            }
            Event::Compiled { sync_id, hash, duration_ns, memory, cost, optimized_hlo } => {
                if let Some(text) = optimized_hlo {
                    s.emit(Record::OptimizedHlo { hash: *hash, text: text.to_string() });
                }
                Record::Compiled {
                    t,
                    sync: *sync_id,
                    hash: *hash,
                    dur: *duration_ns,
                    memory: memory.as_ref().map(MemoryRec::from),
                    cost: cost.as_ref().map(CostRec::from),
                }
            }
            Event::Transfer { sync_id, direction, bytes, duration_ns } => {
                s.note_platform();
                Record::Transfer {
                    t,
                    sync: *sync_id,
                    to_device: *direction == Direction::ToDevice,
                    bytes: *bytes,
                    dur: *duration_ns,
                }
            }
            Event::Executed { sync_id, hash, duration_ns } => {
                Record::Executed { t, sync: *sync_id, hash: *hash, dur: *duration_ns }
            }
            Event::SyncEnd { sync_id, duration_ns } => {
                let counters = counter_values(&events::counters());
                Record::SyncEnd { t, sync: *sync_id, dur: *duration_ns, counters }
            }
            Event::StepMarker { step, location } => {
                let location = s.location(location);
                Record::Step { t, step: *step, location }
            }
            Event::ScopeBegin { name, location } => {
                let location = s.location(location);
                Record::ScopeBegin { t, name: name.to_string(), location }
            }
            Event::ScopeEnd { name } => Record::ScopeEnd { t, name: name.to_string() },
            Event::Partitioned { hash, plan, .. } => {
                let collectives = plan
                    .collectives
                    .iter()
                    .map(|c| CollectiveRec {
                        kind: c.kind.clone(),
                        shapes: c.shapes.iter().map(ShapeRec::from).collect(),
                        bytes: c.bytes,
                        groups: c.groups.clone(),
                        location: c.location.as_ref().map(|l| s.location(l)),
                    })
                    .collect();
                Record::Partitioned(Box::new(PartitionRec {
                    hash: *hash,
                    mesh_axes: plan.mesh_axes.iter().map(|(a, n)| (a.clone(), *n as u32)).collect(),
                    devices: plan.devices.iter().map(|&d| d as u32).collect(),
                    inputs: plan.inputs.clone(),
                    outputs: plan.outputs.clone(),
                    collectives,
                }))
            }
            Event::DevicesFinished { sync_id, hash, after_launch_ns } => Record::DevicesFinished {
                sync: *sync_id,
                hash: *hash,
                after_launch: after_launch_ns.clone(),
            },
            Event::DeviceMemory { step, device, memory } => Record::DeviceMemory {
                t,
                step: *step,
                device: *device as u32,
                in_use: memory.in_use_bytes,
                peak: memory.peak_bytes,
                limit: memory.limit_bytes,
            },
            Event::HostFallback { op, location, duration_ns } => {
                let location = s.location(location);
                Record::HostFallback { t, op: op.to_string(), location, dur: *duration_ns }
            }
            Event::Traced { location, calls, duration_ns } => {
                let location = s.location(location);
                Record::Traced { t, location, calls: *calls, dur: *duration_ns }
            }
            Event::Caught { tool, message, location } => {
                let location = s.location(location);
                Record::Caught {
                    t,
                    tool: tool.name().to_string(),
                    message: message.to_string(),
                    location,
                }
            }
            Event::JobRank { rank, world } => Record::JobRank { rank: *rank, world: *world },
            Event::CollectiveEnter { group, seq, op, bytes, location } => {
                let location = s.location(location);
                Record::CollectiveEnter {
                    t,
                    group: group.to_string(),
                    seq: *seq,
                    op: op.to_string(),
                    bytes: *bytes,
                    location,
                }
            }
            Event::CollectiveLeave { group, seq } => {
                Record::CollectiveLeave { t, group: group.to_string(), seq: *seq }
            }
            Event::DataWait { location, duration_ns } => {
                let location = s.location(location);
                Record::DataWait { t, location, dur: *duration_ns }
            }
            Event::SizeRead { op, what, size, location, duration_ns } => {
                let location = s.location(location);
                Record::SizeRead {
                    t,
                    op: op.to_string(),
                    what: what.to_string(),
                    size: *size,
                    location,
                    dur: *duration_ns,
                }
            }
            Event::CapturedGraph { hash, graph } => {
                s.captured_graph(*hash, graph);
                return;
            }
            Event::FunctionCompiled(c) => {
                let function = s.location(&c.function);
                let caller = c.caller.as_ref().map(|l| s.location(l));
                let reason_location = c.reason_location.as_ref().map(|l| s.location(l));
                Record::FunctionCompiled(Box::new(FunctionCompileRec {
                    t,
                    id: c.id.to_string(),
                    function,
                    caller,
                    dur: c.duration_ns,
                    phases: c.phases.iter().map(|(name, ns)| (name.to_string(), *ns)).collect(),
                    graphs: c.graphs.clone(),
                    reason: c.reason.as_ref().map(|r| r.to_string()),
                    reason_location,
                    failure: c.failure.as_ref().map(|f| f.to_string()),
                }))
            }
            Event::GraphBreak { compile, reason, location } => {
                let location = s.location(location);
                Record::GraphBreak {
                    t,
                    compile: compile.to_string(),
                    reason: reason.to_string(),
                    location,
                }
            }
            Event::CapturedRun { hash, duration_ns } => {
                Record::CapturedRun { t, hash: *hash, dur: *duration_ns }
            }
            Event::ValueRead { location, shape: sh, bytes, duration_ns } => {
                let location = s.location(location);
                Record::ValueRead {
                    t,
                    location,
                    shape: sh.into(),
                    bytes: *bytes,
                    dur: *duration_ns,
                }
            }
        };
        s.emit(record);
    }
}

/// A profile being recorded. Only one recording runs in a process at a time.
pub struct Recording {
    recorder: Arc<Recorder>,
    listener: u64,
}

static ACTIVE: Mutex<bool> = Mutex::new(false);

impl Recording {
    /// Starts recording into memory.
    pub fn start() -> Result<Recording> {
        Recording::begin(None)
    }

    /// Starts recording, streaming every record to `path` as it happens.
    pub fn to_file(path: &Path) -> Result<Recording> {
        Recording::begin(Some(Writer::create(path)?))
    }

    fn begin(writer: Option<Writer>) -> Result<Recording> {
        let mut active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
        if *active {
            return Err(Error::AlreadyRecording);
        }
        let (recorder, listener) = listen(writer);
        *active = true;
        xlaprof_core::steps_start_afresh();
        Ok(Recording { recorder, listener })
    }

    /// A copy of the profile so far.
    pub fn snapshot(&self) -> Profile {
        self.recorder.0.lock().unwrap_or_else(|p| p.into_inner()).profile.clone()
    }

    /// The file it writes to, if any: the path asked for, or the one beside it where another
    /// process writes that one.
    pub fn file_path(&self) -> Option<std::path::PathBuf> {
        let s = self.recorder.0.lock().unwrap_or_else(|p| p.into_inner());
        s.writer.as_ref().map(|w| w.path().to_path_buf())
    }

    /// Bytes written to the profile file so far, and records.
    pub fn file_stats(&self) -> Option<(u64, u64)> {
        let s = self.recorder.0.lock().unwrap_or_else(|p| p.into_inner());
        s.writer.as_ref().map(|w| (w.bytes_written(), w.records_written()))
    }

    /// This process is rank `rank` of a job of `world` processes, as it learnt when it joined
    /// the job's process group: its profile says so, and its file takes the rank's name beside
    /// the one asked for, where the job's readers look (see [`Writer::move_to_rank`]).
    pub fn join_job(&self, rank: u32, world: u32) {
        {
            let mut s = self.recorder.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(w) = &mut s.writer {
                if let Err(e) = w.move_to_rank(rank) {
                    eprintln!("xlaprof: the profile {} keeps its name: {e}", w.path().display());
                }
            }
        }
        xlaprof_core::events::job_rank(rank, world);
    }

    /// Writes out what waits to be written (the program ends: what happened since the last
    /// sync, step or collective).
    pub fn flush(&self) {
        events::flush_traced();
        self.recorder.0.lock().unwrap_or_else(|p| p.into_inner()).flush();
    }

    /// Stops recording and returns the profile.
    pub fn stop(self) -> Profile {
        // Programs still running on the device (the host runs ahead) are in the profile too; a
        // failure among them is the program's to see at its next read, not the profile's.
        let _ = xlaprof_core::wait();
        events::flush_traced(); // what was recorded after the last sync
        events::remove_listener(self.listener);
        *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = false;
        let mut s = self.recorder.0.lock().unwrap_or_else(|p| p.into_inner());
        s.flush();
        s.writer = None;
        std::mem::take(&mut s.profile)
    }
}

/// A recorder listening to the engine from now on, streaming to `writer` if given.
fn listen(writer: Option<Writer>) -> (Arc<Recorder>, u64) {
    // File names only: a profile is shared, and should not carry this machine's folders.
    let file_name =
        |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (platform, plugin) = platform().unwrap_or_default();
    let mut args = std::env::args();
    let program = args.next().map(|a| file_name(Path::new(&a))).unwrap_or_default();
    let program = std::iter::once(program).chain(args).collect::<Vec<_>>().join(" ");
    let counters = events::counters();
    let meta = Meta {
        program,
        pid: std::process::id(),
        start_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        platform,
        plugin,
        counter_names: counter_names(&counters),
        counters: counter_values(&counters),
    };
    let mut state = State {
        profile: Profile::default(),
        writer,
        write_failed: false,
        pending: Vec::new(),
        pending_records: 0,
        t0: events::now_ns(),
        locations: HashMap::new(),
        graphs: HashSet::new(),
        stablehlo: HashSet::new(),
        platform_known: !meta.platform.is_empty(),
        ended_sync: 0,
        sources: SourceFiles::default(),
    };
    let to_file = state.writer.is_some();
    state.emit(Record::Meta(meta));
    let recorder = Arc::new(Recorder(Mutex::new(state)));
    let listener = events::add_listener(recorder.clone());
    if to_file {
        write_behind(Arc::downgrade(&recorder));
    }
    (recorder, listener)
}

/// How long a record waits at most before it is written: records that do not go out at once (a
/// collective left, a wait for data) go out with the next that does, or after this.
const WRITE_BEHIND: std::time::Duration = std::time::Duration::from_millis(200);

/// Writes out what waits, every [`WRITE_BEHIND`], while the recorder lives: a viewer following
/// the file (or a job read while it hangs) sees a rank's last collective left, though the rank
/// then went quiet.
fn write_behind(recorder: std::sync::Weak<Recorder>) {
    let spawned = std::thread::Builder::new().name("xlaprof-write-behind".into()).spawn(move || loop {
        std::thread::sleep(WRITE_BEHIND);
        let Some(recorder) = recorder.upgrade() else { return };
        let mut state = recorder.0.lock().unwrap_or_else(|p| p.into_inner());
        if state.writer.is_none() {
            return;
        }
        state.flush();
    });
    // Without the thread, records still go out at each sync, step and collective entered.
    drop(spawned);
}

/// A recording in memory beside any other (the one a tool such as `breaks` reads), ended when
/// dropped. The process's own recording (`Recording`, `XLAPROF_PROFILE`) is one at a time.
pub struct SideRecording {
    recorder: Arc<Recorder>,
    listener: u64,
}

impl SideRecording {
    pub fn start() -> SideRecording {
        let (recorder, listener) = listen(None);
        SideRecording { recorder, listener }
    }

    /// A copy of the profile so far.
    pub fn snapshot(&self) -> Profile {
        self.recorder.0.lock().unwrap_or_else(|p| p.into_inner()).profile.clone()
    }
}

impl Drop for SideRecording {
    fn drop(&mut self) {
        events::remove_listener(self.listener);
    }
}

/// Records the whole program to the file named by `XLAPROF_PROFILE`, if it is set. Call it at
/// the top of `main`; the recording runs until the process exits (every record is on disk as soon
/// as it happens, so nothing needs to be flushed at exit). Returns whether recording started.
pub fn init_from_env() -> Result<bool> {
    let Some(path) = std::env::var_os(xlaprof_core::config::PROFILE) else { return Ok(false) };
    if WHOLE_PROGRAM.get().is_some() {
        return Ok(true);
    }
    let asked = job_path(Path::new(&path));
    let recording = Recording::to_file(&asked)?;
    if let Some((rank, world)) = job_rank() {
        xlaprof_core::events::job_rank(rank, world);
    }
    if let Some(written) = recording.file_path().filter(|w| *w != asked) {
        eprintln!(
            "xlaprof: another process writes the profile {}; this process's is {}",
            asked.display(),
            written.display()
        );
    }
    let _ = WHOLE_PROGRAM.set(recording);
    Ok(true)
}

/// In a job of several processes (`WORLD_SIZE` over 1 and a `RANK`, as torchrun sets them),
/// each rank's profile beside the others': `job.rank1.xlaprof` for `job.xlaprof`.
fn job_path(path: &Path) -> std::path::PathBuf {
    match job_rank() {
        Some((rank, _)) => crate::record::file::beside(path, &format!("rank{rank}")),
        None => path.to_path_buf(),
    }
}

/// This process's rank and the job's size, where it is one of several (`RANK`, `WORLD_SIZE`).
fn job_rank() -> Option<(u32, u32)> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
    match (var("RANK"), var("WORLD_SIZE")) {
        (Some(rank), Some(world)) if world > 1 && rank < world => Some((rank, world)),
        _ => None,
    }
}

static WHOLE_PROGRAM: OnceLock<Recording> = OnceLock::new();

/// The recording of the whole program that [`init_from_env`] started, if it did: what the
/// process's metrics are read from (PyTorch/XLA's metrics report).
pub fn whole_program() -> Option<&'static Recording> {
    WHOLE_PROGRAM.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlaprof_core::events::{CapturedNode, FunctionCompile, PartitionPlan, SyncCause, Tool};
    use xlaprof_core::{DType, Shape};

    /// Its name, by a match with no catch-all: an engine event added without a place in
    /// `every_engine_event_becomes_a_record` fails to compile here.
    fn variant(e: &Event) -> &'static str {
        match e {
            Event::SyncBegin { .. } => "SyncBegin",
            Event::GraphBuilt { .. } => "GraphBuilt",
            Event::CacheLookup { .. } => "CacheLookup",
            Event::Lowered { .. } => "Lowered",
            Event::Compiled { .. } => "Compiled",
            Event::Transfer { .. } => "Transfer",
            Event::Executed { .. } => "Executed",
            Event::SyncEnd { .. } => "SyncEnd",
            Event::StepMarker { .. } => "StepMarker",
            Event::DeviceMemory { .. } => "DeviceMemory",
            Event::ScopeBegin { .. } => "ScopeBegin",
            Event::ScopeEnd { .. } => "ScopeEnd",
            Event::ValueRead { .. } => "ValueRead",
            Event::Partitioned { .. } => "Partitioned",
            Event::DevicesFinished { .. } => "DevicesFinished",
            Event::HostFallback { .. } => "HostFallback",
            Event::DataWait { .. } => "DataWait",
            Event::JobRank { .. } => "JobRank",
            Event::CollectiveEnter { .. } => "CollectiveEnter",
            Event::CollectiveLeave { .. } => "CollectiveLeave",
            Event::SizeRead { .. } => "SizeRead",
            Event::CapturedGraph { .. } => "CapturedGraph",
            Event::FunctionCompiled(_) => "FunctionCompiled",
            Event::GraphBreak { .. } => "GraphBreak",
            Event::CapturedRun { .. } => "CapturedRun",
            Event::Traced { .. } => "Traced",
            Event::Caught { .. } => "Caught",
        }
    }

    #[track_caller]
    fn here() -> SourceLocation {
        SourceLocation::caller()
    }

    /// One of each engine event, in an order a program could emit them.
    fn every_event() -> Vec<Event> {
        let (sync_id, hash) = (1, 0xfeed);
        let summary = Arc::new(GraphSummary { nodes: 1, ..GraphSummary::default() });
        let node = CapturedNode {
            op: "aten.add".into(),
            operands: Vec::new(),
            dtype: "f32".into(),
            dims: vec![2],
            location: here(),
        };
        let compile = FunctionCompile {
            id: "0/0".into(),
            function: here(),
            caller: None,
            duration_ns: 5,
            phases: vec![("Dynamo".into(), 5)],
            graphs: vec![7],
            reason: None,
            reason_location: None,
            failure: None,
        };
        let memory = xlaprof_core::runtime::DeviceMemory {
            in_use_bytes: 1,
            peak_bytes: None,
            limit_bytes: None,
        };
        vec![
            Event::ScopeBegin { name: "epoch".into(), location: here() },
            Event::Traced { location: here(), calls: 3, duration_ns: 9 },
            Event::SyncBegin { sync_id, cause: SyncCause::StepEnd, location: here(), tensors: 1, left_pending: 0 },
            Event::GraphBuilt { sync_id, hash, summary, duration_ns: 1 },
            Event::CacheLookup { sync_id, hash, hit: false, persistent_hit: false },
            Event::Lowered { sync_id, hash, stablehlo: "module {}".into(), duration_ns: 1 },
            Event::Compiled {
                sync_id,
                hash,
                duration_ns: 1,
                memory: None,
                cost: None,
                optimized_hlo: None,
            },
            Event::Partitioned { sync_id, hash, plan: Arc::new(PartitionPlan::default()) },
            Event::Transfer { sync_id, direction: Direction::ToDevice, bytes: 8, duration_ns: 1 },
            Event::Executed { sync_id, hash, duration_ns: 1 },
            Event::DevicesFinished { sync_id, hash, after_launch_ns: vec![1, 2] },
            Event::SyncEnd { sync_id, duration_ns: 4 },
            Event::ValueRead {
                location: here(),
                shape: Shape::new(DType::F32, [2]),
                bytes: 8,
                duration_ns: 1,
            },
            Event::HostFallback { op: "aten::erfinv".into(), location: here(), duration_ns: 2 },
            Event::DataWait { location: here(), duration_ns: 3 },
            Event::JobRank { rank: 1, world: 2 },
            Event::CollectiveEnter {
                group: "default".into(),
                seq: 1,
                op: "all_reduce".into(),
                bytes: 64,
                location: here(),
            },
            Event::CollectiveLeave { group: "default".into(), seq: 1 },
            Event::SizeRead {
                op: "aten::nonzero".into(),
                what: "nonzero entries".into(),
                size: 5,
                location: here(),
                duration_ns: 2,
            },
            Event::CapturedGraph {
                hash: 7,
                graph: Arc::new(CapturedGraph { nodes: vec![node], inputs: 0 }),
            },
            Event::FunctionCompiled(Arc::new(compile)),
            Event::GraphBreak { compile: "0/0".into(), reason: "print".into(), location: here() },
            Event::CapturedRun { hash: 7, duration_ns: 2 },
            Event::Caught { tool: Tool::Anomaly, message: "NaN".into(), location: here() },
            Event::StepMarker { step: 1, location: here() },
            Event::DeviceMemory { step: 1, device: 0, memory },
            Event::ScopeEnd { name: "epoch".into() },
        ]
    }

    #[test]
    fn every_engine_event_becomes_a_record() {
        let (recorder, id) = listen(None);
        events::remove_listener(id); // fed by hand below, not by the engine
        let events = every_event();
        let mut seen: HashSet<&str> = HashSet::new();
        for (t, e) in events.iter().enumerate() {
            let before = recorder.0.lock().unwrap().profile.records;
            recorder.on_event(t as u64 + 1, e);
            let after = recorder.0.lock().unwrap().profile.records;
            assert!(after > before, "{} made no record", variant(e));
            seen.insert(variant(e));
        }
        assert_eq!(seen.len(), events.len(), "each event once");
        // And the profile holds what they said.
        let s = recorder.0.lock().unwrap();
        let p = &s.profile;
        assert_eq!((p.syncs.len(), p.steps.len(), p.scopes.len()), (1, 1, 1));
        assert_eq!((p.host_fallbacks.len(), p.data_waits.len(), p.caught.len()), (1, 1, 1));
        assert_eq!(p.size_reads.len(), 1);
        assert_eq!(p.job, Some(crate::profile::JobRank { rank: 1, world: 2 }));
        assert_eq!(p.collectives.len(), 1);
        assert!(p.collectives[0].end_ns.is_some(), "entered and left");
        assert_eq!(
            (p.graph_breaks.len(), p.captured_runs.len(), p.function_compiles.len()),
            (1, 1, 1)
        );
        assert_eq!(p.traced.values().map(|t| t.calls).sum::<u64>(), 3);
        assert!(p.graphs.contains_key(&7));
    }
}
