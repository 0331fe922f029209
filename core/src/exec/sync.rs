//! Sync points: the pending graph collected, hashed and found compiled or compiled, then run;
//! steps, explicit syncs, value reads and waits.

use std::sync::atomic::AtomicBool;

use super::*;

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
    end_step(location, false);
    Ok(())
}

/// Ends a training step without a sync: for a front end whose steps the engine does not run (a
/// `torch.compile` program on another backend, its steps told by its optimizer). It does not
/// start the engine.
///
/// Such a step is inferred: a `step()` of the program's own right after it (no compiled graph
/// run between them, no sync but the step's own, which runs what the optimizer recorded)
/// closes the same iteration (the optimizer's step, then the loop's `xt.step()`) and is not
/// counted again.
pub fn mark_step(location: SourceLocation) {
    end_step(location, true);
}

/// The next step is the first of a new count (a profile starts): an iteration that ended
/// before, inferred or not, is not the one the next `step()` closes.
pub fn steps_start_afresh() {
    LAST_END.lock().unwrap_or_else(|p| p.into_inner()).inferred = false;
}

/// How the last step ended: one iteration ended twice counts once.
struct StepEnd {
    /// Syncs and compiled graphs run by then (`NEXT_SYNC`, [`events::captured_runs`]).
    syncs: u64,
    runs: u64,
    inferred: bool,
}

static LAST_END: Mutex<StepEnd> = Mutex::new(StepEnd { syncs: 0, runs: 0, inferred: false });

fn end_step(location: SourceLocation, inferred: bool) {
    let now = StepEnd {
        syncs: NEXT_SYNC.load(Ordering::Relaxed),
        runs: events::captured_runs(),
        inferred,
    };
    {
        let mut last = LAST_END.lock().unwrap_or_else(|p| p.into_inner());
        // The loop's `step()` after the optimizer's inferred one: its sync runs the optimizer's
        // own work on the device, part of the step that ended. And a step in which nothing ran
        // (a device loader's step right after the compiled step function's own) is no step.
        let after_inferred = last.inferred && now.syncs <= last.syncs + 1;
        let same_iteration = now.runs == last.runs && (after_inferred || now.syncs == last.syncs);
        let counted = STEPS.load(Ordering::Relaxed) > 0;
        *last = now;
        if counted && same_iteration {
            return;
        }
    }
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
pub(super) static STEPS: AtomicU64 = AtomicU64::new(0);

pub(super) static NEXT_SYNC: AtomicU64 = AtomicU64::new(1);

pub(super) fn sync_what(cause: SyncCause) -> &'static str {
    match cause {
        SyncCause::Explicit => "sync() ran a graph",
        SyncCause::ValueRead => "a value read ran a graph",
        SyncCause::StepEnd => "step() ran a graph",
        SyncCause::CompiledGraph => "a compiled graph ran",
    }
}

/// Full syncs so far: a compiled graph recorded into the trace (`Replay::recorded`) tells from it
/// whether the results of its last run have been computed since.
pub(crate) static FULL_SYNCS: AtomicU64 = AtomicU64::new(0);

/// Set while compiled graphs recorded into the trace wait for a sync: a value read then computes
/// every pending tensor, not a part, so that a step stays one program.
pub(crate) static REPLAYED: AtomicBool = AtomicBool::new(false);

/// Computes every live pending tensor, from the trace that recorded them (see `trace`).
pub(crate) fn sync_all(cause: SyncCause, location: SourceLocation) -> Result<()> {
    let engine = engine()?;
    let _serial = trace::serialize();
    // Checked before the trace is taken: what is pending stays pending. The pending tensors
    // are looked at only inside a block.
    if forbid::is_open() && trace::has_pending() {
        forbid::check(sync_what(cause), &location)?;
    }
    trace::free_small_graveyard();
    let (holders, mut trace) = trace::take();
    FULL_SYNCS.fetch_add(1, Ordering::Relaxed);
    REPLAYED.store(false, Ordering::Relaxed);
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

/// Computes `tensors` (a value read: only what they need), and with them every live pending
/// tensor whose value their graph computes on the way.
///
/// Those would otherwise stay pending and be computed again by the next sync: the forward of a
/// step whose loss is read before `step()` ran twice, and an optimizer that reads values between
/// in-place updates (LBFGS's line search) had each read compute the parameters' whole history
/// again, a longer graph each time, each compiled anew (one step: 145 s, against 96 ms with
/// them made data). As outputs they cost no computation, only their buffers, which they hold
/// anyway once computed.
pub(crate) fn sync_tensors(
    tensors: &[&Value],
    cause: SyncCause,
    location: SourceLocation,
) -> Result<()> {
    let engine = engine()?;
    let _serial = trace::serialize();
    // Tensors synced by someone else while we waited are already data.
    let mut tensors: Vec<&Value> = tensors.iter().copied().filter(|t| !t.is_data()).collect();
    if tensors.is_empty() {
        return Ok(());
    }
    forbid::check(sync_what(cause), &location)?;
    trace::free_small_graveyard();
    let on_the_way = computed_on_the_way(engine, &tensors);
    tensors.extend(on_the_way.iter().map(|h| h.value()));
    run(engine, &tensors, None, cause, location)
}

/// For each node key (a node's address, held by [`crate::Tensor::node_handle`]), whether
/// computing `value` computes that node: what a read of it would run.
pub(crate) fn needs(value: &Value, keys: &[usize]) -> Result<Vec<bool>> {
    let engine = engine()?;
    let _serial = trace::serialize();
    let epoch = engine.epoch.fetch_add(1, Ordering::Relaxed);
    let needed: std::collections::HashSet<usize> = crate::ir::needed(&[value.node()], epoch)
        .into_iter()
        .map(|n| n as *const crate::ir::Node as usize)
        .collect();
    Ok(keys.iter().map(|k| needed.contains(k)).collect())
}

/// The live pending tensors, other than `tensors`, whose current node the graph of `tensors`
/// holds (oldest first, so that the graph's key does not depend on the registry's order).
fn computed_on_the_way(engine: &Engine, tensors: &[&Value]) -> Vec<Arc<dyn trace::Holder>> {
    let roots: Vec<NodeRef> = tensors.iter().map(|t| t.node()).collect();
    // A mark of its own: the sync's graph is laid out under another epoch.
    let epoch = engine.epoch.fetch_add(1, Ordering::Relaxed);
    crate::ir::needed(&roots, epoch);
    let read: Vec<u64> = tensors.iter().map(|t| t.id).collect();
    let mut on_the_way: Vec<_> = trace::pending()
        .into_iter()
        .filter(|h| {
            let value = h.value();
            !read.contains(&value.id) && value.node().visited_in(epoch).is_some()
        })
        .collect();
    on_the_way.sort_by_key(|h| h.value().id);
    on_the_way
}

/// One sync of `tensors`; `trace` when they are every live pending tensor and the trace that
/// recorded them.
pub(super) fn run(
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
        let left_pending = match cause {
            SyncCause::ValueRead => trace::pending_besides(tensors),
            _ => 0,
        };
        events::emit(Event::SyncBegin { sync_id, cause, location, tensors: tensors.len(), left_pending });
    }

    // 1-2: the graph and its structural key.
    // Donating is only safe when every live pending tensor is in this graph: a value read computes
    // a part, and a node it shares with a tensor left pending would still need the donated input.
    // Nor while anomalies are looked for: the graph may have to run again on the same inputs.
    let detecting = watch::detecting();
    let full = cause != SyncCause::ValueRead && !detecting;
    // Where it donates, each input goes first to the output that takes its place
    // (`graph::donations`): each tensor's node and the data it replaces, read together.
    let (roots, replaces): (Vec<_>, Vec<Replaces>) = match full {
        true => tensors.iter().map(|t| t.node_and_replaced()).unzip(),
        false => (tensors.iter().map(|t| t.node()).collect(), Vec::new()),
    };
    let donate = full.then_some(&replaces[..]);
    let epoch = engine.epoch.fetch_add(1, Ordering::Relaxed);
    let t = events::now_ns();
    let (mut graph, trace) = build_graph(&roots, trace, epoch, donate);
    // While anomalies are looked for, the program also computes whether its results are finite
    // (one more output): no op recorded for it, no second graph. Not for a graph over a mesh,
    // whose outputs come back as shards of its plan (a graph of its own checks them above).
    if detecting && graph.data.iter().all(|d| d.sharding().is_none()) {
        graph.check_finite = true;
        graph.key = checked_key(graph.key);
        graph.undonated_key = checked_key(graph.undonated_key);
    }

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
    // A value read needs its program's end anyway: it does not run ahead. The lazy code between
    // compiled graphs (a backward's seed, the zeros it takes for outputs with no gradient, a
    // loss computed outside the compiled model) is computed for the next graph, never read:
    // it runs ahead as the graphs around it do, on the CPU too, or the host would wait there
    // for the graphs launched before it.
    let ahead = match cause {
        SyncCause::ValueRead => None,
        SyncCause::CompiledGraph if engine.replay_ahead => Some(REPLAYS_IN_FLIGHT),
        _ => engine.run_ahead.then_some(IN_FLIGHT),
    };
    let outputs = execute(engine, &graph, &compiled, sync_id, &location, listening, ahead)?;
    // The program's verdict on its results, read by the check (`anomaly`). (A graph
    // partitioned for its sharding annotations returns its plan's outputs: checked above.)
    let marker = (graph.check_finite && compiled.partitioning.is_none())
        .then(|| outputs.last().cloned())
        .flatten();
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
            marker,
            ran_ahead: ahead.is_some(),
        });
    }
    drop(graph);
    drop(roots);
    if listening {
        events::emit(Event::SyncEnd { sync_id, duration_ns: events::now_ns() - sync_start });
    }
    Ok(())
}

/// The graph under `roots`: from the trace when it recorded exactly the nodes they need (no
/// walk; laid out only for a compile), else by walking it. Both give the same key (`graph::keys`).
pub(super) fn build_graph<'a>(
    roots: &'a [NodeRef],
    trace: Option<&'a mut Trace>,
    epoch: u64,
    donate: Option<&[Replaces]>,
) -> (Graph<'a>, Option<&'a Trace>) {
    let walked = match donate {
        Some(replaces) => Donate::Unheld(replaces),
        None => Donate::Nothing,
    };
    let Some(trace) = trace else {
        return (Graph::build(roots, epoch, walked), None);
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
    (Graph::build(roots, epoch, walked), None)
}

/// The key of a graph whose program also checks its results (`Graph::check_finite`): another
/// program than the same graph's unchecked one.
fn checked_key(key: u64) -> u64 {
    use std::hash::Hasher;
    let mut h = crate::ir::FastHasher::default();
    h.write_u64(key);
    h.write_u64(0x6368_6563_6b65_6421); // "checked!"
    h.finish()
}
