//! Many devices in the profile, through the real engine on the CPU plugin's 4 devices: a
//! data-parallel step shows every device and the one all-reduce XLA inserted, with its bytes; a
//! split tensor made whole is found at the line that asked for it; and, from crafted records,
//! devices that wait and collectives heavier than the program's inputs are findings.

use std::sync::{Arc, Mutex};

use xlaprof_core::nn::{Linear, Module, Optimizer, Sgd};
use xlaprof_core::spmd::Mesh;
use xlaprof_core::{engine_with_devices, step, Tensor};
use xlaprof_profiler::diagnostics::Kind;
use xlaprof_profiler::record::{CollectiveRec, PartitionRec, Record, ShapeRec};
use xlaprof_profiler::{analyze, report, Profile, Recording, Thresholds};

static SERIAL: Mutex<()> = Mutex::new(());

fn mesh() -> Arc<Mesh> {
    let n = engine_with_devices(4).unwrap().device_count();
    Arc::new(Mesh::new(vec![0, 1, 2, 3], vec![4], vec!["data".into()], n).unwrap())
}

fn spec(entries: &[&[&str]]) -> Vec<Vec<String>> {
    entries.iter().map(|e| e.iter().map(|s| s.to_string()).collect()).collect()
}

#[test]
fn a_data_parallel_step_shows_four_devices_and_one_all_reduce_of_the_gradients() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh();
    let l1 = Linear::new(16, 32, true, 1).unwrap();
    let l2 = Linear::new(32, 4, true, 2).unwrap();
    let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    let param_bytes: u64 = params.iter().map(|p| p.element_count() as u64 * 4).sum();
    let mut opt = Sgd::new(params, 0.1);
    // The parameters are made on the device before the loop, as a training script does.
    xlaprof_core::sync().unwrap();
    let recording = Recording::start().unwrap();
    for s in 0..4 {
        let x = Tensor::from_slice(&vec![0.1f32 * s as f32; 8 * 16], &[8, 16]).unwrap();
        let y = Tensor::from_slice(&[0i64, 1, 2, 3, 0, 1, 2, 3], &[8]).unwrap();
        x.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
        y.mark_sharding(&mesh, &spec(&[&["data"]])).unwrap();
        let loss = l2.forward(&l1.forward(&x).unwrap().relu().unwrap()).unwrap();
        let loss = loss.cross_entropy(&y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        step().unwrap();
    }
    let p = recording.stop();
    assert_eq!(p.compiles.len(), 1, "one compile for every step");
    let a = analyze(&p, &Thresholds::default());
    assert_eq!(a.devices.rows.iter().map(|r| r.device).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(a.devices.executions, 4);
    let [g] = a.devices.graphs.as_slice() else { panic!("one partitioned graph: {:?}", a.devices) };
    assert_eq!(g.plan.mesh_text(), "data=4");
    assert_eq!(g.executions, 4);
    let reduces: Vec<&CollectiveRec> =
        g.plan.collectives.iter().filter(|c| c.kind == "all-reduce").collect();
    assert_eq!(reduces.len(), 1, "XLA combines the gradients into one all-reduce: {reduces:?}");
    // Every gradient, and the loss's few scalars.
    assert!(reduces[0].bytes >= param_bytes && reduces[0].bytes < param_bytes + 64, "{reduces:?}");
    assert!(p.executions.iter().all(|e| e.device_end_ns.len() == 4));
    let text = report::text(&a);
    assert!(text.contains("Devices: 4 partitioned executions on 4 devices"), "{text}");
    assert!(text.contains("all-reduce f32["), "{text}");
    assert_eq!(a.of_kind(Kind::Gather).count(), 0, "{:#?}", a.diagnostics);
}

#[test]
fn a_split_tensor_made_whole_is_found_at_the_line_that_asked_for_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mesh = mesh();
    let recording = Recording::start().unwrap();
    let x = Tensor::from_slice(&(0..64).map(|i| i as f32).collect::<Vec<_>>(), &[16, 4]).unwrap();
    let split_at = line!() + 1;
    x.mark_sharding(&mesh, &spec(&[&["data"], &[]])).unwrap();
    let made_at = line!() + 1;
    let doubled = x.mul_scalar(2.0).unwrap();
    // Asked for whole on every device: XLA gathers the product of the line above.
    doubled.mark_sharding(&mesh, &spec(&[&[], &[]])).unwrap();
    step().unwrap();
    let p = recording.stop();
    let a = analyze(&p, &Thresholds::default());
    let d = a.of_kind(Kind::Gather).next().expect("an all-gather finding");
    assert_eq!(d.location, format!("{}:{made_at}", file!()), "{}", d.message);
    assert!(d.message.contains("1 gather at"), "{}", d.message);
    assert!(d.message.contains("all-gather f32[16,4]"), "{}", d.message);
    let split = format!("('data', None) from {}:{split_at}", file!());
    assert!(d.message.contains(&split), "the split input and its line: {}", d.message);
    assert_eq!(doubled.to_vec::<f32>().unwrap()[63], 126.0);
}

/// A partitioned graph run `runs` times, device 2 finishing `late` ns after the others.
fn crafted(runs: u64, late: u64, collective_bytes: u64) -> Profile {
    let shape = ShapeRec { dtype: "f32".into(), dims: vec![1024] };
    let mut records = vec![
        Record::Location {
            id: 0,
            location: xlaprof_profiler::record::Location {
                file: "train.py".into(),
                line: 9,
                function: String::new(),
            },
        },
        Record::Graph(Box::new(xlaprof_profiler::record::GraphDef {
            hash: 7,
            nodes: 1,
            ops: Vec::new(),
            inputs: vec![xlaprof_profiler::record::InputRec {
                shape: shape.clone(),
                data: true,
                location: 0,
                donated: false,
                name: None,
            }],
            outputs: vec![shape.clone()],
            node_defs: Vec::new(),
        })),
    ];
    for i in 0..runs {
        let start = i * 10_000_000;
        records.push(Record::SyncBegin {
            t: start,
            sync: i + 1,
            cause: xlaprof_profiler::record::Cause::StepEnd,
            location: 0,
            tensors: 1,
        });
        records.push(Record::GraphBuilt { t: start + 10, sync: i + 1, hash: 7, dur: 10 });
        if i == 0 {
            records.push(Record::Partitioned(Box::new(PartitionRec {
                hash: 7,
                mesh_axes: vec![("data".into(), 4)],
                devices: vec![0, 1, 2, 3],
                inputs: vec![Some("('data',)".into())],
                outputs: vec![None],
                collectives: vec![CollectiveRec {
                    kind: "all-reduce".into(),
                    shapes: vec![shape.clone()],
                    bytes: collective_bytes,
                    groups: "[1,4]<=[4]".into(),
                    location: None,
                }],
            })));
        }
        let dur = 4_000_000;
        records.push(Record::Executed { t: start + 20 + dur, sync: i + 1, hash: 7, dur });
        let base = dur - late;
        records.push(Record::DevicesFinished {
            sync: i + 1,
            hash: 7,
            after_launch: vec![base, base, dur, base],
        });
        records.push(Record::SyncEnd {
            t: start + 30 + dur,
            sync: i + 1,
            dur,
            counters: Vec::new(),
        });
        records.push(Record::Step { t: start + 40 + dur, step: i + 1, location: 0 });
    }
    Profile::from_records(records)
}

#[test]
fn a_device_that_finishes_late_is_named() {
    let a = analyze(&crafted(5, 2_000_000, 4096), &Thresholds::default());
    let d = a.of_kind(Kind::DeviceSkew).next().expect("a devices-waiting finding");
    assert!(d.message.contains("device 2 finished last in 5 of 5 executions"), "{}", d.message);
    assert_eq!(d.location, "train.py:9");
    assert_eq!(d.cost_ns, 5 * 2_000_000);
    assert_eq!(a.devices.rows[2].last, 5);
    // Devices finishing together are no finding.
    let a = analyze(&crafted(5, 50_000, 4096), &Thresholds::default());
    assert_eq!(a.of_kind(Kind::DeviceSkew).count(), 0, "{:#?}", a.diagnostics);
}

#[test]
fn collectives_heavier_than_the_inputs_are_a_finding() {
    // The one input is 4 KiB; the collectives move 40 KiB per execution.
    let a = analyze(&crafted(3, 0, 40_960), &Thresholds::default());
    let d = a.of_kind(Kind::HeavyCollectives).next().expect("a heavy-collectives finding");
    assert!(d.message.contains("more than all its device inputs hold"), "{}", d.message);
    let a = analyze(&crafted(3, 0, 4096), &Thresholds::default());
    assert_eq!(a.of_kind(Kind::HeavyCollectives).count(), 0);
}

#[test]
fn the_trace_and_json_exports_carry_the_devices() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/profile-spmd.xlaprof");
    let p = xlaprof_profiler::load(&fixture).unwrap();
    let a = analyze(&p, &Thresholds::default());
    let dir = std::env::temp_dir().join(format!("xlaprof-devices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.json");
    xlaprof_profiler::export::write(&p, &a, xlaprof_profiler::export::Format::Chrome, &trace)
        .unwrap();
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    for device in 0..4u64 {
        let lane = events
            .iter()
            .find(|e| e["name"] == "thread_name" && e["args"]["name"] == format!("device {device}"))
            .unwrap_or_else(|| panic!("a lane named device {device}"));
        let tid = lane["tid"].as_u64().unwrap();
        let spans = events.iter().filter(|e| e["ph"] == "X" && e["tid"] == tid).count();
        assert_eq!(spans, 3, "one span per partitioned execution on device {device}");
    }
    let json = dir.join("profile.json");
    xlaprof_profiler::export::write(&p, &a, xlaprof_profiler::export::Format::Json, &json).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = json["analysis"]["devices"]["rows"].as_array().map(|r| r.len());
    assert_eq!(rows, Some(4), "the JSON export's analysis has a row per device");
    let csv = dir.join("tables");
    xlaprof_profiler::export::write(&p, &a, xlaprof_profiler::export::Format::Csv, &csv).unwrap();
    let devices = std::fs::read_to_string(csv.join("devices.csv")).unwrap();
    assert_eq!(devices.lines().count(), 5, "a header and a row per device:\n{devices}");
    let collectives = std::fs::read_to_string(csv.join("collectives.csv")).unwrap();
    assert!(collectives.lines().any(|l| l.contains("all-reduce")), "{collectives}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_devices_memory_at_each_step_is_summarized_and_reported() {
    let mib = 1i64 << 20;
    let mut records = Vec::new();
    for step in 1..=6u64 {
        records.push(Record::Step { t: step * 1000, step, location: 0 });
        records.push(Record::DeviceMemory {
            t: step * 1000 + 1,
            step,
            device: 0,
            // Grows by 10 MiB a step: a program holding on to something every step.
            in_use: (100 + 10 * step as i64) * mib,
            peak: Some(400 * mib),
            limit: Some(1000 * mib),
        });
    }
    let a = analyze(&Profile::from_records(records.clone()), &Thresholds::default());
    let m = a.summary.device_memory.expect("a memory summary");
    assert_eq!(m.last_in_use_bytes, 160 * mib);
    assert_eq!(m.max_in_use_bytes, 160 * mib);
    assert_eq!(m.peak_bytes, Some(400 * mib));
    assert_eq!(m.limit_bytes, Some(1000 * mib));
    // Steady steps start after the 2 warm-up steps: from step 3 (130 MiB) to step 6 (160 MiB).
    assert_eq!(m.steady_growth_bytes, 30 * mib);
    let text = report::text(&a);
    let line = text.lines().find(|l| l.contains("device memory")).expect(&text);
    assert!(line.contains("160.00MB in use") && line.contains("grew 30.00MB"), "{line}");

    // The CPU plugin keeps no memory figures: no summary, no line.
    records.retain(|r| !matches!(r, Record::DeviceMemory { .. }));
    let a = analyze(&Profile::from_records(records), &Thresholds::default());
    assert!(a.summary.device_memory.is_none());
    assert!(!report::text(&a).contains("device memory"));
}
