//! A profile file can come from anyone. Arbitrary *records* (not bytes: a checksum stops random
//! bytes at the frame, while a crafted file has valid checksums) go through everything a profile
//! goes through: the reader (framed into a file and read back), `Profile::from_records`, the
//! analysis with its diagnostics, the views' tables and every export. Nothing may panic, and
//! nothing may grow beyond what the records hold.
//!
//! Records are made of ids that collide (small) and ids that are huge, times and durations near
//! `u64::MAX`, NaN and infinite costs, strings with `;`, line breaks, escape sequences and bidi
//! overrides, begins without ends and ends without begins, in any order.
//!
//! A fixed number of cases, so it runs with every `cargo test` in seconds (the byte-level fuzz
//! target, `profiler/fuzz`, is for longer runs by hand). Arithmetic that overflows wraps around
//! in the release profile, which the assertions on totals catch; to make it panic at the spot,
//! run with `--config 'profile.release.package.xlaprof-profiler.overflow-checks=true'`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use xlaprof_profiler::diagnostics::{check, GraphChange, Rule};
use xlaprof_profiler::export::{self, Format};
use xlaprof_profiler::record::{
    AttrValue, Cause, CollectiveRec, CostRec, FunctionCompileRec, GraphDef, InputName, InputRec,
    Location, MemoryRec, Meta, NodeRec, PartitionRec, Record, ShapeRec,
};
use xlaprof_profiler::{analyze, file, job, load, merge, report, timeline, views, Profile, Thresholds};

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_./:]{0,12}",
        2 => prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
        1 => Just(String::new()),
        1 => Just("a;b\nc\r\td\x1b[2J\u{202e}e\u{0}".to_string()),
        1 => Just(format!("{};{}", "x".repeat(3000), "é".repeat(500))),
    ]
}

fn id32() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0..8u32, 1 => any::<u32>(), 1 => Just(u32::MAX), 1 => Just(u32::MAX - 1)]
}

fn id64() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0..8u64, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

/// Times and durations: mostly small and ordered-looking, sometimes at the top of the range.
fn ns() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..10_000_000u64,
        1 => any::<u64>(),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
        1 => Just(0u64),
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(f64::MAX),
    ]
}

fn dims() -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![
        4 => prop::collection::vec(prop_oneof![0..9i64, Just(i64::MAX), Just(i64::MIN), Just(-1i64)], 0..4),
        1 => prop::collection::vec(any::<i64>(), 0..40),
    ]
}

fn shape() -> impl Strategy<Value = ShapeRec> {
    (string(), dims()).prop_map(|(dtype, dims)| ShapeRec { dtype, dims })
}

fn attr() -> impl Strategy<Value = AttrValue> {
    prop_oneof![
        any::<i64>().prop_map(AttrValue::Int),
        prop::collection::vec(any::<i64>(), 0..40).prop_map(AttrValue::Ints),
        prop::collection::vec(any::<(i64, i64)>(), 0..4).prop_map(AttrValue::Pairs),
        string().prop_map(AttrValue::Name),
    ]
}

fn node() -> impl Strategy<Value = NodeRec> {
    (
        string(),
        prop::collection::vec((string(), attr()), 0..3),
        prop::collection::vec(id32(), 0..4),
        shape(),
        id32(),
        id64(),
    )
        .prop_map(|(op, attrs, inputs, shape, location, hash)| NodeRec {
            op,
            attrs,
            inputs,
            shape,
            location,
            hash,
        })
}

fn graph() -> impl Strategy<Value = GraphDef> {
    (
        id64(),
        any::<u32>(),
        prop::collection::vec((string(), any::<u32>()), 0..3),
        prop::collection::vec(
            (shape(), any::<bool>(), id32(), any::<bool>()).prop_map(
                |(shape, data, location, donated)| InputRec {
                    shape,
                    data,
                    location,
                    donated,
                    name: None,
                },
            ),
            0..5,
        ),
        prop::collection::vec(shape(), 0..5),
        prop::collection::vec(node(), 0..6),
    )
        .prop_map(|(hash, nodes, ops, inputs, outputs, node_defs)| GraphDef {
            hash,
            nodes,
            ops,
            inputs,
            outputs,
            node_defs,
        })
}

fn cause() -> impl Strategy<Value = Cause> {
    prop_oneof![
        Just(Cause::Explicit),
        Just(Cause::ValueRead),
        Just(Cause::StepEnd),
        Just(Cause::CompiledGraph)
    ]
}

fn counters() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![0..100u64, Just(u64::MAX)], 0..16)
}

fn meta() -> impl Strategy<Value = Meta> {
    (
        string(),
        any::<u32>(),
        any::<u64>(),
        string(),
        prop::collection::vec(string(), 0..16),
        counters(),
    )
        .prop_map(|(program, pid, start_unix_ms, platform, counter_names, counters)| Meta {
            program,
            pid,
            start_unix_ms,
            platform: platform.clone(),
            plugin: platform,
            counter_names,
            counters,
        })
}

fn memory() -> impl Strategy<Value = Option<MemoryRec>> {
    proptest::option::of(any::<[i64; 6]>().prop_map(|m| MemoryRec {
        generated_code_bytes: m[0],
        argument_bytes: m[1],
        output_bytes: m[2],
        alias_bytes: m[3],
        temp_bytes: m[4],
        peak_memory_bytes: m[5],
    }))
}

fn cost() -> impl Strategy<Value = Option<CostRec>> {
    proptest::option::of((float(), float(), float()).prop_map(|(f, b, t)| CostRec {
        flops: f,
        bytes_accessed: b,
        transcendentals: t,
    }))
}

fn partition() -> impl Strategy<Value = PartitionRec> {
    let collective = (
        string(),
        prop::collection::vec(shape(), 0..3),
        ns(),
        string(),
        proptest::option::of(id32()),
    )
        .prop_map(|(kind, shapes, bytes, groups, location)| CollectiveRec {
            kind,
            shapes,
            bytes,
            groups,
            location,
        });
    (
        id64(),
        prop::collection::vec((string(), any::<u32>()), 0..3),
        prop::collection::vec(any::<u32>(), 0..5),
        prop::collection::vec(proptest::option::of(string()), 0..4),
        prop::collection::vec(proptest::option::of(string()), 0..4),
        prop::collection::vec(collective, 0..4),
    )
        .prop_map(|(hash, mesh_axes, devices, inputs, outputs, collectives)| PartitionRec {
            hash,
            mesh_axes,
            devices,
            inputs,
            outputs,
            collectives,
        })
}

/// A torch.compile compile: ids that look like Dynamo's and ones that do not, any phases.
fn function_compile() -> impl Strategy<Value = FunctionCompileRec> {
    (
        (ns(), prop_oneof![3 => "[0-3]/[0-9]", 1 => string()], id32(), any::<Option<u32>>(), ns()),
        (
            prop::collection::vec((string(), ns()), 0..4),
            prop::collection::vec(id64(), 0..3),
            prop::option::of(prop_oneof![3 => "[a-z.]{1,6} == [0-9]", 1 => string()]),
            any::<Option<u32>>(),
            prop::option::of(prop_oneof![Just("recompile limit: hit".to_string()), string()]),
        ),
    )
        .prop_map(
            |(
                (t, id, function, caller, dur),
                (phases, graphs, reason, reason_location, failure),
            )| {
                FunctionCompileRec {
                    t,
                    id,
                    function,
                    caller,
                    dur,
                    phases,
                    graphs,
                    reason,
                    reason_location,
                    failure,
                }
            },
        )
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![
        1 => meta().prop_map(Record::Meta),
        3 => (id32(), string(), any::<u32>(), string()).prop_map(|(id, file, line, function)| {
            Record::Location { id, location: Location { file, line, function } }
        }),
        2 => graph().prop_map(|g| Record::Graph(Box::new(g))),
        1 => (id64(), string()).prop_map(|(hash, text)| Record::StableHlo { hash, text }),
        1 => (id64(), string()).prop_map(|(hash, text)| Record::OptimizedHlo { hash, text }),
        1 => (ns(), string(), id32(), ns()).prop_map(|(t, op, location, dur)| Record::HostFallback { t, op, location, dur }),
        1 => (ns(), id32(), ns()).prop_map(|(t, location, dur)| Record::DataWait { t, location, dur }),
        1 => (id32(), id32()).prop_map(|(id, caller)| Record::Called { id, caller }),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(rank, world)| Record::JobRank { rank, world }),
        2 => (ns(), prop_oneof![Just("world".to_string()), string()], id64(), string(), any::<u64>(), id32()).prop_map(
            |(t, group, seq, op, bytes, location)| Record::CollectiveEnter { t, group, seq, op, bytes, location }
        ),
        2 => (ns(), prop_oneof![Just("world".to_string()), string()], id64()).prop_map(
            |(t, group, seq)| Record::CollectiveLeave { t, group, seq }
        ),
        2 => function_compile().prop_map(|c| Record::FunctionCompiled(Box::new(c))),
        1 => (ns(), string(), string(), id32()).prop_map(
            |(t, compile, reason, location)| Record::GraphBreak { t, compile, reason, location }
        ),
        2 => (ns(), id64(), ns()).prop_map(|(t, hash, dur)| Record::CapturedRun { t, hash, dur }),
        1 => (ns(), id32(), any::<u64>(), ns()).prop_map(
            |(t, location, calls, dur)| Record::Traced { t, location, calls, dur }
        ),
        1 => (ns(), prop_oneof![Just("detect_anomaly".to_string()), string()], string(), id32()).prop_map(
            |(t, tool, message, location)| Record::Caught { t, tool, message, location }
        ),
        1 => (id64(), prop::collection::vec((any::<u32>(), string(), any::<bool>()), 0..4)).prop_map(
            |(hash, names)| Record::InputNames {
                hash,
                names: names
                    .into_iter()
                    .map(|(i, n, given)| (i % 8, if given { InputName::Given(n) } else { InputName::Variable(n) }))
                    .collect(),
            }
        ),
        1 => partition().prop_map(|p| Record::Partitioned(Box::new(p))),
        1 => (string(), string()).prop_map(|(platform, plugin)| Record::Platform { platform, plugin }),
        2 => (ns(), id64(), id32(), any::<i64>(), any::<Option<i64>>(), any::<Option<i64>>()).prop_map(
            |(t, step, device, in_use, peak, limit)| Record::DeviceMemory { t, step, device, in_use, peak, limit }
        ),
        1 => (id64(), id64(), prop::collection::vec(ns(), 0..5)).prop_map(
            |(sync, hash, after_launch)| Record::DevicesFinished { sync, hash, after_launch }
        ),
        4 => (ns(), id64(), cause(), id32(), any::<u32>()).prop_map(
            |(t, sync, cause, location, tensors)| Record::SyncBegin { t, sync, cause, location, tensors }
        ),
        3 => (ns(), id64(), id64(), ns()).prop_map(|(t, sync, hash, dur)| Record::GraphBuilt { t, sync, hash, dur }),
        2 => (ns(), id64(), id64(), any::<bool>(), any::<bool>()).prop_map(
            |(t, sync, hash, hit, persistent)| Record::CacheLookup { t, sync, hash, hit, persistent }
        ),
        2 => (ns(), id64(), id64(), ns()).prop_map(|(t, sync, hash, dur)| Record::Lowered { t, sync, hash, dur }),
        3 => (ns(), id64(), id64(), ns(), memory(), cost()).prop_map(
            |(t, sync, hash, dur, memory, cost)| Record::Compiled { t, sync, hash, dur, memory, cost }
        ),
        2 => (ns(), id64(), any::<bool>(), ns(), ns()).prop_map(
            |(t, sync, to_device, bytes, dur)| Record::Transfer { t, sync, to_device, bytes, dur }
        ),
        3 => (ns(), id64(), id64(), ns()).prop_map(|(t, sync, hash, dur)| Record::Executed { t, sync, hash, dur }),
        3 => (ns(), id64(), ns(), counters()).prop_map(
            |(t, sync, dur, counters)| Record::SyncEnd { t, sync, dur, counters }
        ),
        3 => (ns(), id64(), id32()).prop_map(|(t, step, location)| Record::Step { t, step, location }),
        2 => (ns(), string(), id32()).prop_map(|(t, name, location)| Record::ScopeBegin { t, name, location }),
        2 => (ns(), string()).prop_map(|(t, name)| Record::ScopeEnd { t, name }),
        2 => (ns(), id32(), shape(), ns(), ns()).prop_map(
            |(t, location, shape, bytes, dur)| Record::ValueRead { t, location, shape, bytes, dur }
        ),
    ]
}

/// A sync as a recorder writes it (begin, build, lookup, lower, compile, transfer, execute, end,
/// and often the step it ends), with few enough ids that graphs, sites and syncs meet: what
/// recompiles, storms and the views' tables are made of. Parts may be missing.
fn sync_group() -> impl Strategy<Value = Vec<Record>> {
    (
        (0..6u64, 0..4u64, 0..3u32, cause()),
        (ns(), 0..1_000_000u64, any::<bool>(), any::<bool>()),
        prop::collection::vec(any::<bool>(), 11),
        counters(),
        proptest::option::of(graph()),
        (partition(), prop::collection::vec(0..1_000_000u64, 0..5)),
    )
        .prop_map(
            |(
                (sync, hash, location, cause),
                (t, dur, hit, persistent),
                keep,
                counters,
                def,
                (mut plan, after_launch),
            )| {
                plan.hash = hash;
                let t = |i: u64| t.saturating_add(i * dur);
                let all = [
                    def.map(|mut d| {
                        d.hash = hash;
                        Record::Graph(Box::new(d))
                    }),
                    Some(Record::SyncBegin { t: t(0), sync, cause, location, tensors: 1 }),
                    Some(Record::GraphBuilt { t: t(1), sync, hash, dur }),
                    Some(Record::CacheLookup { t: t(1), sync, hash, hit, persistent }),
                    Some(Record::Lowered { t: t(2), sync, hash, dur }),
                    Some(Record::Compiled { t: t(3), sync, hash, dur, memory: None, cost: None }),
                    Some(Record::Partitioned(Box::new(plan))),
                    Some(Record::Transfer { t: t(4), sync, to_device: true, bytes: dur, dur }),
                    Some(Record::Executed { t: t(5), sync, hash, dur }),
                    Some(Record::DevicesFinished { sync, hash, after_launch }),
                    Some(Record::SyncEnd { t: t(6), sync, dur: 6 * dur, counters }),
                    Some(Record::Step { t: t(7), step: sync, location }),
                ];
                // The graph comes whenever generated; every other part is kept or lost.
                all.into_iter()
                    .enumerate()
                    .filter(|(i, _)| *i == 0 || keep[i - 1])
                    .filter_map(|(_, r)| r)
                    .collect()
            },
        )
}

/// Records in any order, and runs of them in a recorder's order.
fn records() -> impl Strategy<Value = Vec<Record>> {
    prop::collection::vec(
        prop_oneof![1 => record().prop_map(|r| vec![r]), 1 => sync_group()],
        0..32,
    )
    .prop_map(|chunks| chunks.concat())
}

/// Thresholds as a user may set them, the odd ones included.
fn thresholds() -> impl Strategy<Value = Thresholds> {
    prop_oneof![
        3 => Just(Thresholds::default()),
        1 => ((prop_oneof![Just(0u64), Just(u64::MAX), 0..4u64], 0..4u64, ns(), float(), float(), ns()), (float(), ns()))
            .prop_map(|((warmup_steps, storm_compiles, slow_compile_ns, slow_step_factor, idle_fraction, host_read_bytes), (data_wait_fraction, data_wait_min_ns))| {
                Thresholds { warmup_steps, storm_compiles, slow_compile_ns, slow_step_factor, idle_fraction, host_read_bytes, data_wait_fraction, data_wait_min_ns }
            }),
    ]
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlaprof-crafted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Everything a profile goes through, with what must hold of the results.
fn everything(p: &Profile, thresholds: &Thresholds, dir: &Path) {
    assert!(p.locations.len() as u64 <= p.records, "the location table outgrew the records");
    let a = analyze(p, thresholds);
    // Totals saturate rather than wrap around (a wrapped total is smaller than one of its parts).
    let s = &a.summary;
    let max = |v: &mut dyn Iterator<Item = u64>| v.max().unwrap_or(0);
    assert!(s.compile_ns >= max(&mut p.compiles.iter().map(|c| c.duration_ns)));
    assert!(s.bytes_to_host >= max(&mut p.value_reads.iter().map(|r| r.bytes)));
    // Execution time is the union of the executions' spans: at least the longest, at most all.
    assert!(s.execute_ns >= max(&mut p.executions.iter().map(|e| e.duration_ns)));
    assert!(s.execute_ns <= p.executions.iter().fold(0u64, |t, e| t.saturating_add(e.duration_ns)));
    assert!(p.syncs.iter().all(|s| s.phases_ns() >= s.build_ns.max(s.compile_ns)));
    for d in &a.diagnostics {
        assert!(d.cost_ns >= max(&mut d.instances.iter().map(|i| i.cost_ns)), "{d:?}");
    }
    views::step_phases(p);
    let rows = views::graph_rows(p, &a.recompiles);
    if let Some(row) = rows.first() {
        views::site_history(&rows, row.hash);
    }
    assert!(timeline::spans(p).iter().all(|s| s.end_ns >= s.start_ns));
    let rules: Vec<Rule> = [
        "no-compiles-after-step=0",
        "max-compiles=0",
        "max-hidden-syncs=0",
        "max-step-ms=0",
        "max-compile-ms=0.5",
    ]
    .iter()
    .map(|r| Rule::parse(r).unwrap())
    .collect();
    check(p, &rules, thresholds.warmup_steps);
    report::diff(&a, &a);
    report::metrics(&a.metrics);
    for format in [Format::Text, Format::Short, Format::Json, Format::Chrome, Format::Folded] {
        let bytes = export::to_bytes(p, &a, format).unwrap();
        match format {
            Format::Json | Format::Chrome => {
                serde_json::from_slice::<serde_json::Value>(&bytes).expect("valid JSON");
            }
            Format::Folded => {
                let text = String::from_utf8(bytes).unwrap();
                for line in text.lines().filter(|l| !l.is_empty()) {
                    let (frames, count) = line.rsplit_once(' ').unwrap();
                    assert!(count.parse::<u64>().is_ok(), "{line:?}");
                    assert!(!frames.chars().any(char::is_control), "{line:?}");
                    assert!(frames.split(';').all(|f| !f.is_empty()), "{line:?}");
                }
            }
            _ => {}
        }
    }
    // As two ranks of a job (the same crafted collectives on both, and against an empty one).
    let empty = Profile::default();
    let e = analyze(&empty, thresholds);
    for runs in [vec![(p, &a), (p, &a)], vec![(p, &a), (&empty, &e)]] {
        let j = job::analyze(&runs);
        let _ = job::text(&j);
        let _ = job::rank_lanes(&runs, &j, 1);
        let _ = merge::text(&merge::place(&runs));
    }
    // An empty profile has no flamegraph, which is an error, not a panic.
    let _ = export::to_bytes(p, &a, Format::Flamegraph);
    for format in [Format::Csv, Format::Parquet] {
        export::write(p, &a, format, dir).unwrap();
    }
}

/// The records framed into a profile file, as a recorder writes them.
fn file_of(records: &[Record]) -> Vec<u8> {
    let mut bytes = file::header();
    for r in records {
        bytes.extend(file::frame(r));
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn crafted_records_never_panic(
        records in records(),
        thresholds in thresholds(),
    ) {
        let dir = scratch();
        let p = Profile::from_records(records.clone());
        everything(&p, &thresholds, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        // The same records through the file: every one reads back.
        let decoded = file::decode(&file_of(&records)).unwrap();
        prop_assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
        prop_assert_eq!(decoded.records.len(), records.len());
        let read = Profile::from_records(decoded.records);
        prop_assert_eq!(read.records, p.records);
        prop_assert_eq!(&read.warnings, &p.warnings);
        // Applied one at a time, as a viewer following a growing file does.
        let mut live = Profile::default();
        for r in records {
            live.apply(r);
        }
        prop_assert_eq!(&live.warnings, &p.warnings);
        prop_assert_eq!(live.locations.len(), p.locations.len());
    }
}

/// The case the issue reported: a location id near `u32::MAX`, with a valid checksum, made the
/// reader grow its location table to billions of entries and abort.
#[test]
fn a_location_id_near_u32_max_is_dropped_with_a_warning() {
    let location = Location { file: "train.py".into(), line: 3, function: String::new() };
    let records = [
        Record::Meta(Meta::default()),
        Record::Location { id: u32::MAX - 1, location: location.clone() },
        Record::Location { id: 0, location },
        Record::Step { t: 10, step: 1, location: u32::MAX - 1 },
    ];
    let path =
        std::env::temp_dir().join(format!("xlaprof-location-id-{}.xlaprof", std::process::id()));
    std::fs::write(&path, file_of(&records)).unwrap();
    let started = Instant::now();
    let p = load(&path).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(p.locations.len(), 1, "only the location with a possible id");
    assert_eq!(p.location(0), "train.py:3");
    assert_eq!(p.location(u32::MAX - 1), "?");
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].contains("location record was dropped"), "{}", p.warnings[0]);
    assert_eq!(p.steps.len(), 1, "the rest of the file is read");
    let a = analyze(&p, &Thresholds::default());
    assert!(report::text(&a).contains("warning: 1 location record was dropped"));
    let _ = std::fs::remove_file(&path);
}

/// Many drops make one warning that counts them, not one warning each.
#[test]
fn dropped_records_are_counted_in_one_warning_per_kind() {
    let mut records = vec![Record::Meta(Meta::default())];
    for i in 0..1000 {
        let location = Location { file: "x.py".into(), line: i, function: String::new() };
        records.push(Record::Location { id: u32::MAX - i, location });
    }
    let node = |inputs: Vec<u32>| NodeRec {
        op: "add".into(),
        attrs: Vec::new(),
        inputs,
        shape: ShapeRec { dtype: "f32".into(), dims: vec![] },
        location: 0,
        hash: 0,
    };
    let graph = GraphDef {
        hash: 7,
        nodes: 2,
        ops: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        // An operand must be an earlier node: %0 names itself, %1 names %0 and %5.
        node_defs: vec![node(vec![0]), node(vec![0, 5])],
    };
    records.push(Record::Graph(Box::new(graph)));
    let p = Profile::from_records(records);
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert!(p.warnings[0].starts_with("1000 location records were dropped"), "{}", p.warnings[0]);
    assert!(
        p.warnings[1].starts_with("2 operands of graph nodes were dropped"),
        "{}",
        p.warnings[1]
    );
    let nodes = &p.graphs[&7].def.node_defs;
    assert_eq!((nodes[0].inputs.as_slice(), nodes[1].inputs.as_slice()), (&[][..], &[0][..]));
}

/// Scope ends are matched by name without a search of every open scope: many unmatched begins
/// and ends take linear time.
#[test]
fn unmatched_scope_begins_and_ends_take_linear_time() {
    let n = 200_000u64;
    let begins = (0..n).map(|t| Record::ScopeBegin { t, name: format!("s{t}"), location: 0 });
    let ends = (0..n).map(|t| Record::ScopeEnd { t: n + t, name: "never opened".into() });
    let closing = (0..n).rev().map(|t| Record::ScopeEnd { t: 2 * n + t, name: format!("s{t}") });
    let started = Instant::now();
    let p = Profile::from_records(begins.chain(ends).chain(closing));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(p.scopes.iter().all(|s| s.end_ns.is_some()));
    assert_eq!(p.scopes.last().unwrap().depth, n as u32 - 1);
}

/// Two huge graphs (many nodes, many outputs) that differ only at their ends, compiled in turn
/// at a thousand call sites: each pair is compared once, in time linear in the graphs, and every
/// recompile is listed and explained.
#[test]
fn recompiles_of_huge_graphs_stay_fast() {
    let graph = |hash: u64| {
        let nodes = 200_000u32;
        let node = |i: u32| NodeRec {
            op: if i + 1 == nodes && hash == 2 { "mul" } else { "add" }.into(),
            attrs: Vec::new(),
            inputs: if i > 0 { vec![i - 1] } else { Vec::new() },
            shape: ShapeRec { dtype: "f32".into(), dims: vec![4] },
            location: 0,
            hash: u64::from(i),
        };
        let output = |i: u64| ShapeRec { dtype: "f32".into(), dims: vec![i as i64, hash as i64] };
        GraphDef {
            hash,
            nodes,
            ops: Vec::new(),
            inputs: Vec::new(),
            outputs: (0..20_000).map(output).collect(),
            node_defs: (0..nodes).map(node).collect(),
        }
    };
    let mut records = vec![Record::Graph(Box::new(graph(1))), Record::Graph(Box::new(graph(2)))];
    let mut sync = 0;
    for location in 0..1000 {
        for hash in [1, 2, 1, 2] {
            sync += 1;
            records.extend([
                Record::SyncBegin { t: sync, sync, cause: Cause::StepEnd, location, tensors: 1 },
                Record::GraphBuilt { t: sync, sync, hash, dur: 1 },
                Record::Compiled { t: sync, sync, hash, dur: 1, memory: None, cost: None },
            ]);
        }
    }
    let p = Profile::from_records(records);
    let started = Instant::now();
    let a = analyze(&p, &Thresholds::default());
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert_eq!(a.recompiles.len(), 3000, "three recompiles at each site");
    let changes = &a.recompiles[0].changes;
    assert!(
        matches!(&changes[0], GraphChange::SyncedTensors { joined, left, .. } if joined.len() == 16 && left.len() == 16),
        "{changes:?}"
    );
    assert!(matches!(&changes[1], GraphChange::Structure { node: 199_999, .. }), "{changes:?}");
}
