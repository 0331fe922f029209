//! Compiling a graph: lowered to StableHLO, loaded from the persistent cache or compiled by XLA.

use super::*;

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
pub(super) fn partition_plan(
    graph: &Graph,
    p: &partition::Partitioning,
    hlo: &str,
) -> events::PartitionPlan {
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
pub(super) fn with_program_line(error: crate::Error, program: &str) -> crate::Error {
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
