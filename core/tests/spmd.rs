//! Many devices through XLA's SPMD partitioner on the CPU plugin's 4 devices: sharded values
//! equal unsharded ones, shards hold the rows their devices should, bad annotations are errors at
//! the caller's line, and a data-parallel training step matches the one-device one.

use std::sync::{Arc, Mutex};

use xlaprof_core::events::{Event, Listener};
use xlaprof_core::nn::{Linear, Module, Optimizer, Sgd};
use xlaprof_core::spmd::Mesh;
use xlaprof_core::{
    engine_with_devices, events, step, sync, wait, DType, Error, Replay, SourceLocation, Tensor,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn spec(entries: &[&[&str]]) -> Vec<Vec<String>> {
    entries.iter().map(|e| e.iter().map(|s| s.to_string()).collect()).collect()
}

fn mesh_1d() -> Arc<Mesh> {
    // The first mesh starts the engine with the devices it needs.
    let n = engine_with_devices(4).unwrap().device_count();
    assert!(n >= 4, "asked for 4 devices, got {n}");
    Arc::new(Mesh::new(vec![0, 1, 2, 3], vec![4], vec!["data".into()], n).unwrap())
}

fn mesh_2d() -> Arc<Mesh> {
    let n = engine_with_devices(4).unwrap().device_count();
    let names = vec!["data".into(), "model".into()];
    Arc::new(Mesh::new(vec![0, 1, 2, 3], vec![2, 2], names, n).unwrap())
}

fn matrix(rows: i64, cols: i64, scale: f32) -> (Vec<f32>, Tensor) {
    let v: Vec<f32> = (0..rows * cols).map(|i| ((i * 7 % 13) as f32 - 6.0) * scale).collect();
    let t = Tensor::from_slice(&v, &[rows, cols]).unwrap();
    (v, t)
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

#[test]
fn sharded_matmul_and_elementwise_equal_the_unsharded_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for (mesh, x_spec, w_spec) in [
        (mesh_1d(), spec(&[&["data"], &[]]), spec(&[&[], &[]])),
        (mesh_2d(), spec(&[&["data"], &[]]), spec(&[&[], &["model"]])),
        (mesh_2d(), spec(&[&["data", "model"], &[]]), spec(&[&[], &[]])),
    ] {
        let (_, x) = matrix(8, 6, 0.1);
        let (_, w) = matrix(6, 4, 0.2);
        let expected = x.matmul(&w).unwrap().tanh().unwrap().add_scalar(1.0).unwrap();
        let expected = expected.to_vec::<f32>().unwrap();

        let (xv, xs) = matrix(8, 6, 0.1);
        let (_, ws) = matrix(6, 4, 0.2);
        xs.mark_sharding(&mesh, &x_spec).unwrap();
        ws.mark_sharding(&mesh, &w_spec).unwrap();
        // The shards are on the devices now, each holding its rows.
        let data = xs.data().unwrap();
        assert_eq!(data.shards().len(), 4);
        let sharding = xs.sharding().unwrap();
        let rows = 8 / sharding.dims[0].iter().map(|&a| mesh.shape()[a] as i64).product::<i64>();
        for (p, shard) in data.shards().iter().enumerate() {
            assert_eq!(shard.dims(), &[rows, 6]);
            let origin = sharding.shard_origin(p, &[8, 6]);
            let start = (origin[0] * 6) as usize;
            assert_eq!(shard.to_vec::<f32>().unwrap(), xv[start..start + (rows * 6) as usize]);
        }
        let y = xs.matmul(&ws).unwrap().tanh().unwrap().add_scalar(1.0).unwrap();
        sync().unwrap();
        assert!(y.sharding().is_some(), "the output of a partitioned program is sharded");
        close(&y.to_vec::<f32>().unwrap(), &expected, 1e-5);
        // Reading a sharded tensor gathers it: the value equals the host data.
        close(&xs.to_vec::<f32>().unwrap(), &xv, 0.0);
    }
}

#[test]
fn a_pending_tensor_is_constrained_and_comes_back_split() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh_1d();
    let (xv, x) = matrix(8, 4, 0.5);
    let y = x.mul_scalar(2.0).unwrap();
    y.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
    sync().unwrap();
    let data = y.data().unwrap();
    assert_eq!(data.shards().len(), 4);
    assert_eq!(data.shards()[1].dims(), &[2, 4]);
    let doubled: Vec<f32> = xv.iter().map(|v| v * 2.0).collect();
    close(&y.to_vec::<f32>().unwrap(), &doubled, 0.0);
}

#[test]
fn bad_annotations_are_errors_at_the_callers_line_before_compiling() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh_1d();
    let (_, x) = matrix(6, 4, 1.0);
    let compiles = events::counters().compiles;
    let err = x.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap_err();
    let line = line!() - 1;
    match &err {
        Error::Sharding { message, location: Some(location) } => {
            assert!(message.contains("size 6 cannot be split 4 ways"), "{message}");
            assert_eq!(location.line(), line, "{err}");
        }
        other => panic!("not a sharding error at a line: {other}"),
    }
    let err = x.mark_sharding(&mesh, &spec(&[&["model"], &[]])).unwrap_err();
    assert!(err.to_string().contains("no axis \"model\""), "{err}");
    let err = Mesh::new(vec![0, 1, 2, 9], vec![4], vec!["d".into()], 4).unwrap_err();
    assert!(err.to_string().contains("device 9 does not exist"), "{err}");
    assert_eq!(events::counters().compiles, compiles, "nothing compiled");
    assert!(x.sharding().is_none());
}

/// Two steps of a 2-layer MLP with SGD; the batch sharded over `mesh` when given.
fn train(mesh: Option<&Arc<Mesh>>, fsdp: bool) -> (Vec<f32>, Vec<f32>, u64) {
    let l1 = Linear::new(16, 32, true, 1).unwrap();
    let l2 = Linear::new(32, 4, true, 2).unwrap();
    let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    if let (Some(mesh), true) = (mesh, fsdp) {
        for p in &params {
            let mut s = vec![vec![]; p.rank()];
            s[0] = vec!["data".to_string()];
            p.mark_sharding(mesh, &s).unwrap();
        }
    }
    let mut opt = Sgd::new(params.clone(), 0.1);
    let compiles = events::counters().compiles;
    let mut losses = Vec::new();
    for s in 0..3 {
        let (_, x) = matrix(8, 16, 0.05 * (s + 1) as f32);
        let labels: Vec<i64> = (0..8).map(|i| (i * 3 + s) % 4).collect();
        let y = Tensor::from_slice(&labels, &[8]).unwrap();
        if let Some(mesh) = mesh {
            x.mark_sharding(mesh, &spec(&[&["data"], &[]])).unwrap();
            y.mark_sharding(mesh, &spec(&[&["data"]])).unwrap();
        }
        let h = l1.forward(&x).unwrap().relu().unwrap();
        let loss = l2.forward(&h).unwrap().cross_entropy(&y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        step().unwrap();
        losses.push(loss.to_vec::<f32>().unwrap()[0]);
    }
    let w = params[0].to_vec::<f32>().unwrap();
    (losses, w, events::counters().compiles - compiles)
}

#[test]
fn data_parallel_and_fsdp_training_match_one_device() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh_1d();
    let (losses, w, _) = train(None, false);
    let (dp_losses, dp_w, dp_compiles) = train(Some(&mesh), false);
    close(&dp_losses, &losses, 1e-5);
    close(&dp_w, &w, 1e-5);
    // Step 1's parameters come back replicated, which is what they were: no second compile
    // (each step also reads its loss, a graph of its own that is a cache hit).
    assert!(dp_compiles <= 2, "{dp_compiles} compiles");
    let (fsdp_losses, fsdp_w, _) = train(Some(&mesh), true);
    close(&fsdp_losses, &losses, 1e-5);
    close(&fsdp_w, &w, 1e-5);
    let _ = DType::F32;
}

#[test]
fn a_max_over_a_split_dimension_crosses_devices_and_keeps_nan() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh_1d();
    let mut v: Vec<f32> = (0..32).map(|i| ((i * 5) % 17) as f32).collect();
    v[21] = f32::NAN; // row 1, column 5: in the second device's columns
    let x = Tensor::from_slice(&v, &[2, 16]).unwrap();
    x.mark_sharding(&mesh, &spec(&[&[], &["data"]])).unwrap();
    let max = x.amax(&[1], false).unwrap();
    let min = x.amin(&[1], false).unwrap();
    sync().unwrap();
    let (max, min) = (max.to_vec::<f32>().unwrap(), min.to_vec::<f32>().unwrap());
    let row0 = &v[..16];
    assert_eq!(max[0], row0.iter().copied().fold(f32::MIN, f32::max));
    assert_eq!(min[0], row0.iter().copied().fold(f32::MAX, f32::min));
    assert!(max[1].is_nan() && min[1].is_nan(), "NaN propagates as in PyTorch: {max:?} {min:?}");
}

/// What the plugin would reject with a message about partitions and buffers (a program over two
/// meshes, shards of the wrong size or on the wrong devices) is caught first and said plainly.
#[test]
fn a_program_over_two_meshes_is_refused_before_it_compiles() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (one, two) = (mesh_1d(), mesh_2d());
    let (_, a) = matrix(8, 4, 1.0);
    let (_, b) = matrix(8, 4, 2.0);
    a.mark_sharding(&one, &spec(&[&["data"], &[]])).unwrap();
    b.mark_sharding(&two, &spec(&[&["data"], &[]])).unwrap();
    let compiles = events::counters().compiles;
    let c = a.add(&b).unwrap();
    let err = c.to_vec::<f32>().unwrap_err().to_string();
    assert!(err.contains("one program uses two meshes"), "{err}");
    assert!(err.contains("Mesh(data=4") && err.contains("Mesh(data=2, model=2"), "{err}");
    assert_eq!(events::counters().compiles, compiles, "refused before compiling");
    // Either alone is fine.
    assert_eq!(a.add_scalar(0.0).unwrap().to_vec::<f32>().unwrap(), a.to_vec::<f32>().unwrap());
}

#[test]
fn one_whole_tensor_serves_programs_over_two_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (wv, w) = matrix(4, 3, 0.5);
    for mesh in [mesh_1d(), mesh_2d(), mesh_1d()] {
        let (xv, x) = matrix(8, 4, 1.0);
        x.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
        let y = x.matmul(&w).unwrap();
        sync().unwrap();
        let expected: Vec<f32> = (0..8)
            .flat_map(|i| (0..3).map(move |j| (i, j)))
            .map(|(i, j)| (0..4).map(|k| xv[i * 4 + k] * wv[k * 3 + j]).sum())
            .collect();
        close(&y.to_vec::<f32>().unwrap(), &expected, 1e-5);
    }
}

#[test]
fn detect_anomalies_checks_a_partitioned_graph_too() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh_1d();
    let _on = xlaprof_core::detect_anomalies();
    // Unsharded data, a sharded result: the graph is partitioned for its annotation.
    let (xv, x) = matrix(8, 4, 0.5);
    let y = x.mul_scalar(2.0).unwrap();
    y.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
    sync().unwrap();
    let doubled: Vec<f32> = xv.iter().map(|v| v * 2.0).collect();
    close(&y.to_vec::<f32>().unwrap(), &doubled, 0.0);
    let z = x.log().unwrap(); // log of the negative values: NaN
    z.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
    let err = sync().unwrap_err();
    assert!(matches!(err, Error::Anomaly { .. }), "{err}");
    assert!(err.to_string().contains("`log`"), "{err}");
}

/// Per sync: its executions, and how many devices each `DevicesFinished` named.
#[derive(Default)]
struct Ends(Mutex<Vec<(u64, &'static str, usize)>>);

impl Listener for Ends {
    fn on_event(&self, _at: u64, event: &Event) {
        let seen = match event {
            Event::Executed { sync_id, .. } => (*sync_id, "executed", 0),
            Event::DevicesFinished { sync_id, after_launch_ns, .. } => {
                (*sync_id, "devices", after_launch_ns.len())
            }
            _ => return,
        };
        self.0.lock().unwrap().push(seen);
    }
}

/// A captured graph over a mesh is replayed without waiting for it, as one device's is: chained
/// runs, each taking the split output of the one before, give the right values, and each run's
/// execution is reported once, with every device's end.
#[test]
fn replays_over_a_mesh_run_ahead_and_each_is_reported() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh_1d();
    let (xv, x) = matrix(8, 4, 0.5);
    x.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
    let y = x.mul_scalar(0.5).unwrap().add_scalar(1.0).unwrap();
    let here = SourceLocation::caller();
    let (replay, mut out) = Replay::capture(&[&x], &[&y], here.clone()).unwrap();
    let ends = Arc::new(Ends::default());
    let id = events::add_listener(ends.clone());
    let runs = 20;
    for _ in 0..runs {
        out = replay.run(&[&out[0]], &[], here.clone()).unwrap().expect("split as at the capture");
    }
    wait().unwrap();
    events::remove_listener(id);
    let mut want = xv;
    for _ in 0..=runs {
        want.iter_mut().for_each(|v| *v = *v * 0.5 + 1.0);
    }
    close(&out[0].to_vec::<f32>().unwrap(), &want, 1e-6);
    let ends = ends.0.lock().unwrap().clone();
    let mut syncs: Vec<u64> = ends.iter().map(|e| e.0).collect();
    syncs.sort_unstable();
    syncs.dedup();
    assert_eq!(syncs.len(), runs, "one sync per run: {ends:?}");
    for sync in syncs {
        let of: Vec<_> = ends.iter().filter(|e| e.0 == sync).collect();
        assert_eq!(of.len(), 2, "sync {sync}: {ends:?}");
        assert!(of.iter().any(|e| e.1 == "executed"), "sync {sync}: {ends:?}");
        assert!(of.iter().any(|e| e.1 == "devices" && e.2 == 4), "sync {sync}: {ends:?}");
    }
}
