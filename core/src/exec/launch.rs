//! Running a compiled graph on its inputs: one device, or partitioned over a mesh.

use super::*;

/// Runs a compiled graph, on one device or partitioned over its mesh: its outputs, in order.
/// With `ahead`, it returns once the graph is launched, leaving that many graphs running (its
/// own included); without, once it has run.
pub(crate) fn execute(
    engine: &Engine,
    graph: &Graph,
    compiled: &CachedGraph,
    sync_id: u64,
    location: &SourceLocation,
    listening: bool,
    ahead: Option<usize>,
) -> Result<Vec<Arc<DeviceData>>> {
    match &compiled.partitioning {
        None => execute_one(engine, graph, compiled, sync_id, location, listening, ahead),
        Some(p) => {
            execute_partitioned(engine, graph, compiled, p, sync_id, location, listening, ahead)
        }
    }
}

/// Runs a one-device graph (see [`execute`]).
fn execute_one(
    engine: &Engine,
    graph: &Graph,
    compiled: &CachedGraph,
    sync_id: u64,
    location: &SourceLocation,
    listening: bool,
    ahead: Option<usize>,
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
    let donated = compiled.summary.donated.len().saturating_sub(graph.kept.len());
    bump(&counter::buffers_donated, donated as u64);
    let mut done = launched.done;
    if listening && ahead.is_some() {
        // Timed when the device says it finished, after this sync has returned.
        let hash = graph.key;
        let _ = done.on_done(move |at, _| {
            let duration_ns = at.saturating_sub(t);
            events::emit(Event::Executed { sync_id, hash, duration_ns });
        });
    }
    // While it runs, the host frees earlier graphs (see `trace`).
    while !done.is_done() && trace::reap_while_executing() {}
    if let Some(keep) = ahead {
        let program = InFlight {
            graph: graph.key,
            location: location.clone(),
            done: vec![done],
            executable: exe.clone(),
        };
        engine.leave_running(program, keep)?;
    } else {
        done.wait().map_err(|e| engine.device_error(e, graph.key, location, exe))?;
        if listening {
            let duration_ns = events::now_ns() - t;
            events::emit(Event::Executed { sync_id, hash: graph.key, duration_ns });
        }
    }
    Ok(launched.outputs.into_iter().map(|b| Arc::new(DeviceData::single(b))).collect())
}

/// Runs a graph partitioned over a mesh (see [`execute`]): every partition's shards in, in one
/// launch; each output comes back as one shard per partition, with the sharding the plan gave it.
#[allow(clippy::too_many_arguments)]
fn execute_partitioned(
    engine: &Engine,
    graph: &Graph,
    compiled: &CachedGraph,
    partitioning: &partition::Partitioning,
    sync_id: u64,
    location: &SourceLocation,
    listening: bool,
    ahead: Option<usize>,
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
    let exe = &compiled.executable;
    let launched = exe
        .launch_partitioned(&inputs)
        .map_err(|e| engine.device_error(e, graph.key, location, exe))?;
    bump(&counter::executions, 1);
    let mut done = launched.done;
    if listening {
        time_devices(&mut done, t, sync_id, graph.key);
    }
    match ahead {
        Some(keep) => {
            let program = InFlight {
                graph: graph.key,
                location: location.clone(),
                done,
                executable: exe.clone(),
            };
            engine.leave_running(program, keep)?;
        }
        // Every device's end, and with it its timing callback.
        None => crate::runtime::Pending::wait_all(done)
            .map_err(|e| engine.device_error(e, graph.key, location, exe))?,
    }
    let mut outputs = launched.outputs;
    // outputs[partition][output] -> per output, its shards in partition order.
    let count = exe.num_outputs();
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

/// Times a partitioned launch made at `launched` (`events::now_ns`) on every device: when the
/// last device has finished, the graph's execution (launch to last end) and each device's end are
/// emitted, from the thread that saw it (the caller's own when it waits). A device whose end cannot
/// be watched counts as done now.
fn time_devices(done: &mut [crate::runtime::Pending], launched: u64, sync_id: u64, hash: u64) {
    let devices = done.len();
    // Per device its end (0 while running), and how many have ended.
    let ends = Arc::new(Mutex::new((vec![0u64; devices], 0usize)));
    for (device, pending) in done.iter_mut().enumerate() {
        let ended = ends.clone();
        let note = move |at: u64| {
            let mut e = ended.lock().unwrap_or_else(|p| p.into_inner());
            e.0[device] = at;
            e.1 += 1;
            if e.1 == devices {
                let last = e.0.iter().copied().max().unwrap_or(at);
                let after_launch_ns = e.0.iter().map(|&d| d.saturating_sub(launched)).collect();
                drop(e);
                let duration_ns = last.saturating_sub(launched);
                events::emit(Event::Executed { sync_id, hash, duration_ns });
                events::emit(Event::DevicesFinished { sync_id, hash, after_launch_ns });
            }
        };
        let watched = note.clone();
        if pending.on_done(move |at, _| watched(at)).is_err() {
            note(events::now_ns());
        }
    }
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
