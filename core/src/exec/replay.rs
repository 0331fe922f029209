//! A graph captured once and run again on new inputs with nothing recorded: how a front end's
//! own compiler (torch.compile) runs its graphs on the engine.
//!
//! The front end records its graph lazily once, on real inputs, as any program would; the
//! capture lays out the graph under the outputs, compiles it (through the same compiled-graph
//! and persistent caches as a sync) and notes where each input of the program comes from: an
//! argument of the function (matched by its device buffer), a constant the recording made, a
//! host scalar (a fixed value), or a random seed (drawn afresh at every run, or every run would
//! repeat the first one's random numbers). A run then costs the launch alone: no node is
//! recorded, hashed or walked.
//!
//! A graph over a mesh (an argument split by `mark_sharding`) is captured the same way: XLA
//! partitions the program once and each run launches it on every device of the mesh. How the
//! arguments are split is part of the program, so a run whose arguments are split otherwise than
//! at the capture runs nothing and says so: the front end captures the graph again for that split.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::cache::CachedGraph;
use super::engine::REPLAYS_IN_FLIGHT;
use super::{compile, engine, execute, summary, sync_all, sync_tensors, NEXT_SYNC};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::events::{self, bump, counter, Event, SyncCause};
use crate::ir::{DeviceData, Donate, Graph, Node, Op, Replaces};
use crate::location::SourceLocation;
use crate::shape::Shape;
use crate::spmd::Sharding;
use crate::trace::{self, Value};

/// A captured graph (see the module's comment).
pub(crate) struct Replay {
    /// None when every output is an argument or a constant: nothing to run.
    compiled: Option<CachedGraph>,
    key: u64,
    /// The shape each argument had at the capture: a run checks its arguments against them.
    arguments: Vec<Shape>,
    /// How each argument was split at the capture (None: whole on one device, or replicated).
    splits: Vec<Option<Arc<Sharding>>>,
    /// Where each device-data parameter of the program comes from.
    inputs: Vec<Source>,
    /// Each host-scalar parameter: its value, or `None` for a seed drawn at every run.
    scalars: Vec<(Option<f64>, DType)>,
    outputs: Vec<(Source, Shape)>,
    /// The arguments the graph writes, whose buffers the program takes for their new values:
    /// `(parameter, argument)`, the parameter compiled to alias its own update's output.
    donated: Vec<(usize, usize)>,
    location: SourceLocation,
}

#[derive(Clone)]
enum Source {
    /// An argument of the function, by position.
    Argument(usize),
    /// Data the recording made (a constant): the same at every run.
    Constant(Arc<DeviceData>),
    /// An output of the compiled program, by position.
    Computed(usize),
}

/// Makes the pending values among `values` device data: a captured graph's arguments must be
/// data, before the capture records on them and before each run. Where one is pending, every
/// live pending tensor is computed with it, in one program, as a step's sync computes them:
/// the lazy code around a compiled graph (a loss computed outside the compiled model, whose
/// gradient the backward graph takes) then costs one program, and a later read of another of
/// its values (the loss) finds it computed instead of running a program of its own.
pub(crate) fn materialize(values: &[&Value], location: &SourceLocation) -> Result<()> {
    if values.iter().all(|v| v.is_data()) {
        return Ok(());
    }
    sync_all(SyncCause::CompiledGraph, location.clone())?;
    // (A value that no live tensor holds is not in the trace.)
    let pending: Vec<&Value> = values.iter().copied().filter(|v| !v.is_data()).collect();
    if pending.is_empty() {
        return Ok(());
    }
    sync_tensors(&pending, SyncCause::CompiledGraph, location.clone())
}

impl Replay {
    /// Captures the graph that computes `outputs` from `arguments` (device data: see
    /// [`materialize`]) and runs it once: the replay and the outputs' values.
    pub fn capture(
        arguments: &[&Value],
        outputs: &[&Value],
        location: SourceLocation,
    ) -> Result<(Replay, Vec<Arc<DeviceData>>)> {
        let engine = engine()?;
        let by_buffer: HashMap<*const DeviceData, usize> = arguments
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match &a.node().op {
                Op::Data(d) => Some((Arc::as_ptr(d), i)),
                _ => None,
            })
            .collect();
        if arguments.iter().any(|a| !a.is_data()) {
            return Err(Error::Unsupported(
                "a captured graph's arguments must be device data".into(),
            ));
        }
        let shapes: Vec<Shape> = arguments.iter().map(|a| a.node().shape.clone()).collect();
        let splits: Vec<_> = arguments.iter().map(|a| split_of(a)).collect();
        let source_of = |d: &Arc<DeviceData>| match by_buffer.get(&Arc::as_ptr(d)) {
            Some(&i) => Source::Argument(i),
            None => Source::Constant(d.clone()),
        };

        let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
        let roots: Vec<_> =
            nodes.iter().filter(|n| !matches!(n.op, Op::Data(_))).cloned().collect();
        if roots.is_empty() {
            // A graph that computes nothing: its outputs are its arguments or constants.
            let outputs = nodes
                .iter()
                .map(|n| match &n.op {
                    Op::Data(d) => (source_of(d), n.shape.clone()),
                    _ => unreachable!("every output is data"),
                })
                .collect();
            let replay = Replay {
                compiled: None,
                key: 0,
                arguments: shapes,
                splits,
                inputs: Vec::new(),
                scalars: Vec::new(),
                outputs,
                donated: Vec::new(),
                location,
            };
            let results = replay.passed_through(arguments)?;
            return Ok((replay, results));
        }
        let _serial = trace::serialize();
        let (sync_id, sync_start, listening) = begin(&location, outputs.len());
        let epoch = engine.epoch.fetch_add(1, Ordering::Relaxed);
        let t = events::now_ns();
        // An argument the graph writes (an output takes its place: the front end's in-place
        // update) gives its buffer to its new value where its caller hands it over at a run
        // (`run`), as a sync donates an updated parameter's: without it, a compiled optimizer
        // step wrote every parameter and moment to new memory, twice a model's state at a time.
        // Not over a mesh, where partitioned programs donate nothing.
        // (Only arguments: an argument that is also an output as it is keeps its buffer.)
        let passed: HashSet<*const DeviceData> = nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Data(d) => Some(Arc::as_ptr(d)),
                _ => None,
            })
            .collect();
        let replaces: Vec<Replaces> = outputs
            .iter()
            .zip(&nodes)
            .filter(|(_, n)| !matches!(n.op, Op::Data(_)))
            .map(|(t, _)| t.replaced().filter(|d| by_buffer.contains_key(d) && !passed.contains(d)))
            .collect();
        let donate = match splits.iter().all(Option::is_none) {
            true => Donate::Replaced(&replaces),
            false => Donate::Nothing,
        };
        let graph = Graph::build(&roots, epoch, donate);
        let summary = Arc::new(summary::summary(&graph));
        if listening {
            events::emit(Event::GraphBuilt {
                sync_id,
                hash: graph.key,
                summary: summary.clone(),
                duration_ns: events::now_ns() - t,
            });
        }
        let cached = engine.cache.lock().unwrap_or_else(|p| p.into_inner()).get(graph.key);
        if listening {
            events::emit(Event::CacheLookup {
                sync_id,
                hash: graph.key,
                hit: cached.is_some(),
                persistent_hit: false,
            });
        }
        let compiled = match cached {
            Some(c) => {
                bump(&counter::cache_hits, 1);
                c
            }
            None => {
                bump(&counter::cache_misses, 1);
                let c = compile(engine, &graph, summary, sync_id, listening)?;
                let mut cache = engine.cache.lock().unwrap_or_else(|p| p.into_inner());
                cache.insert(graph.key, c.clone(), graph.undonated_key, &graph.donated);
                c
            }
        };

        let seeds: HashSet<*const Node> = graph
            .order
            .iter()
            .filter(|n| matches!(n.op, Op::Random { .. }))
            .map(|n| Arc::as_ptr(&n.inputs[0]))
            .collect();
        let mut seed_slots = HashSet::new();
        for (node, &slot) in graph.order.iter().zip(&graph.slot) {
            if matches!(node.op, Op::Scalar(_)) && seeds.contains(&(*node as *const Node)) {
                seed_slots.insert(slot as usize);
            }
        }
        let scalars = graph
            .scalars
            .iter()
            .enumerate()
            .map(|(slot, &(v, dtype))| {
                (if seed_slots.contains(&slot) { None } else { Some(v) }, dtype)
            })
            .collect();
        let mut computed = graph.root_outputs.iter();
        let outputs = nodes
            .iter()
            .map(|n| {
                let source = match &n.op {
                    Op::Data(d) => source_of(d),
                    _ => Source::Computed(*computed.next().expect("one output per root")),
                };
                (source, n.shape.clone())
            })
            .collect();
        let inputs: Vec<Source> = graph.data.iter().map(source_of).collect();
        let donated = graph
            .donated
            .iter()
            .filter_map(|&(param, _)| match inputs[param] {
                Source::Argument(i) => Some((param, i)),
                _ => None,
            })
            .collect();
        let replay = Replay {
            key: graph.key,
            arguments: shapes,
            splits,
            inputs,
            scalars,
            outputs,
            donated,
            location,
            compiled: Some(compiled),
        };
        drop(graph);
        drop(roots);
        // The first run: the capture's own, on the same arguments (its seeds drawn afresh, as at
        // every run: the recording's seeds were drawn from the same stream).
        let data = replay.data(arguments)?;
        let scalars = replay.scalar_values();
        let location = replay.location.clone();
        // (Nothing is handed over: the front end still holds this call's arguments.)
        let kept = replay.kept(arguments, &data, &[]);
        let results =
            replay.launch(engine, arguments, data, scalars, kept, sync_id, &location, listening)?;
        if listening {
            events::emit(Event::SyncEnd { sync_id, duration_ns: events::now_ns() - sync_start });
        }
        Ok((replay, results))
    }

    /// The structural key of the captured graph (its compiled-graph cache key).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Runs the captured graph on `arguments` (shaped as at the capture; pending ones are
    /// computed first), at `location`: the outputs' values, in the capture's order. None, with
    /// nothing run, when the arguments are split over a mesh otherwise than at the capture.
    pub fn run(
        &self,
        arguments: &[&Value],
        handed_over: &[usize],
        location: SourceLocation,
    ) -> Result<Option<Vec<Arc<DeviceData>>>> {
        if arguments.len() != self.arguments.len()
            || arguments.iter().zip(&self.arguments).any(|(a, s)| a.node().shape != *s)
        {
            let given: Vec<String> = arguments.iter().map(|a| a.node().shape.to_string()).collect();
            let captured: Vec<String> = self.arguments.iter().map(|s| s.to_string()).collect();
            return Err(Error::Shape {
                op: "compiled graph",
                message: format!(
                    "arguments ({}) differ from those it was captured with ({})",
                    given.join(", "),
                    captured.join(", ")
                ),
                location,
            });
        }
        materialize(arguments, &location)?;
        if arguments.iter().zip(&self.splits).any(|(a, s)| split_of(a) != *s) {
            return Ok(None);
        }
        let Some(compiled) = &self.compiled else {
            return self.passed_through(arguments).map(Some);
        };
        let engine = engine()?;
        let _serial = trace::serialize();
        let (sync_id, sync_start, listening) = begin(&location, self.outputs.len());
        bump(&counter::cache_hits, 1);
        if listening {
            events::emit(Event::GraphBuilt {
                sync_id,
                hash: self.key,
                summary: compiled.summary.clone(),
                duration_ns: 0,
            });
            events::emit(Event::CacheLookup {
                sync_id,
                hash: self.key,
                hit: true,
                persistent_hit: false,
            });
        }
        let data = self.data(arguments)?;
        let scalars = self.scalar_values();
        let mut kept = self.kept(arguments, &data, handed_over);
        if !kept.is_empty() && !handed_over.is_empty() && trace::free_graveyard() {
            // The graph a sync computed before this run may hold the arguments it read.
            kept = self.kept(arguments, &data, handed_over);
        }
        let results =
            self.launch(engine, arguments, data, scalars, kept, sync_id, &location, listening)?;
        if listening {
            events::emit(Event::SyncEnd { sync_id, duration_ns: events::now_ns() - sync_start });
        }
        Ok(Some(results))
    }

    /// The donated parameters a run launches as not donatable (`Graph::kept`): each whose
    /// argument the caller did not hand over (`handed_over`, by argument: the caller rebinds
    /// that tensor to its new value and holds its old one nowhere else), or that something else
    /// refers to now (another tensor sharing its node, a pending node that reads it, another
    /// holder of the buffer).
    fn kept(
        &self,
        arguments: &[&Value],
        data: &[Arc<DeviceData>],
        handed_over: &[usize],
    ) -> Vec<usize> {
        // (A compiled AdamW step over GPT-2's parameters hands over a hundred arguments.)
        let mut handed = vec![false; arguments.len()];
        for &a in handed_over.iter().filter(|&&a| a < arguments.len()) {
            handed[a] = true;
        }
        self.donated
            .iter()
            .filter(|&&(param, argument)| {
                let node = arguments[argument].node();
                let sole = Arc::strong_count(&node) == 2 && Arc::strong_count(&data[param]) == 2;
                !(sole && handed[argument])
            })
            .map(|&(param, _)| param)
            .collect()
    }

    /// The host scalars of a run: the captured values, a fresh seed where the graph draws one.
    fn scalar_values(&self) -> Vec<(f64, DType)> {
        let fresh = || crate::ir::next_seed() as f64;
        self.scalars.iter().map(|&(v, d)| (v.unwrap_or_else(fresh), d)).collect()
    }

    /// The outputs of a replay with nothing to run.
    fn passed_through(&self, arguments: &[&Value]) -> Result<Vec<Arc<DeviceData>>> {
        self.outputs.iter().map(|(source, _)| self.resolve(source, arguments)).collect()
    }

    fn data(&self, arguments: &[&Value]) -> Result<Vec<Arc<DeviceData>>> {
        self.inputs.iter().map(|s| self.resolve(s, arguments)).collect()
    }

    fn resolve(&self, source: &Source, arguments: &[&Value]) -> Result<Arc<DeviceData>> {
        match source {
            Source::Argument(i) => match &arguments[*i].node().op {
                Op::Data(d) => Ok(d.clone()),
                _ => {
                    Err(Error::Unsupported(format!("argument {i} of a compiled graph is pending")))
                }
            },
            Source::Constant(d) => Ok(d.clone()),
            Source::Computed(_) => unreachable!("inputs are arguments or constants"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        engine: &super::Engine,
        arguments: &[&Value],
        data: Vec<Arc<DeviceData>>,
        scalars: Vec<(f64, DType)>,
        kept: Vec<usize>,
        sync_id: u64,
        location: &SourceLocation,
        listening: bool,
    ) -> Result<Vec<Arc<DeviceData>>> {
        let graph = Graph {
            order: Vec::new(),
            slot: Vec::new(),
            key: self.key,
            undonated_key: self.key,
            data,
            scalars,
            outputs: Vec::new(),
            root_outputs: Vec::new(),
            donated: Vec::new(),
            kept,
            check_finite: false,
        };
        let Some(compiled) = &self.compiled else {
            return self.passed_through(arguments);
        };
        // A compiled step is several graphs (forward, backward, the optimizer's), each with the
        // host's work of its call around it: launched without waiting (on one device or over a
        // mesh), that work overlaps the device's, on the CPU too (where a sync of the lazy path
        // waits: one graph a step leaves nothing to overlap).
        let ahead = engine.replay_ahead.then_some(REPLAYS_IN_FLIGHT);
        let computed = execute(engine, &graph, compiled, sync_id, location, listening, ahead)?;
        self.outputs
            .iter()
            .map(|(source, _)| match source {
                Source::Computed(slot) => Ok(computed[*slot].clone()),
                other => self.resolve(other, arguments),
            })
            .collect()
    }
}

/// How an argument (device data) is split over a mesh; None when whole or replicated, which a
/// program takes alike.
fn split_of(argument: &Value) -> Option<Arc<Sharding>> {
    match &argument.node().op {
        Op::Data(d) => d.sharding().filter(|s| !s.is_replicated()).cloned(),
        _ => None,
    }
}

/// A compiled graph's sync begins: its number, its start, and whether events are listened to.
fn begin(location: &SourceLocation, tensors: usize) -> (u64, u64, bool) {
    let listening = events::enabled();
    let sync_id = NEXT_SYNC.fetch_add(1, Ordering::Relaxed);
    bump(&counter::syncs, 1);
    if listening {
        events::flush_traced();
        let location = location.clone();
        events::emit(Event::SyncBegin {
            sync_id,
            cause: SyncCause::CompiledGraph,
            location,
            tensors,
            left_pending: 0,
        });
    }
    (sync_id, events::now_ns(), listening)
}
