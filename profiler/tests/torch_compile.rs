//! torch.compile programs, as the Python package records them: compiles with their phases and
//! guard failures, graph breaks, runs of captured graphs. The findings, the timeline, the step
//! phases and the graph rows are checked on records written here, so each number is known.

use xlaprof_profiler::diagnostics::Kind;
use xlaprof_profiler::record::{
    FunctionCompileRec, GraphDef, InputRec, Location, NodeRec, Record, ShapeRec,
};
use xlaprof_profiler::timeline::SpanKind;
use xlaprof_profiler::{analyze, report, Profile, Thresholds};

const MS: u64 = 1_000_000;

fn location(id: u32, line: u32, function: &str) -> Record {
    let location = Location { file: "train.py".into(), line, function: function.into() };
    Record::Location { id, location }
}

/// A captured graph: one input of `dims`, then a linear and a relu at line 12.
fn graph(hash: u64, dims: Vec<i64>) -> Record {
    let shape = ShapeRec { dtype: "f32".into(), dims };
    let node = |op: &str, inputs: Vec<u32>, location: u32| NodeRec {
        op: op.into(),
        attrs: Vec::new(),
        inputs,
        shape: shape.clone(),
        location,
        hash: hash ^ inputs_hash(op),
    };
    Record::Graph(Box::new(GraphDef {
        hash,
        nodes: 3,
        ops: vec![("linear".into(), 1), ("relu".into(), 1)],
        inputs: vec![InputRec {
            shape: shape.clone(),
            data: true,
            location: 0,
            donated: false,
            name: None,
        }],
        outputs: Vec::new(),
        node_defs: vec![
            node("input", vec![], 0),
            node("linear", vec![0], 1),
            node("relu", vec![1], 1),
        ],
    }))
}

fn inputs_hash(op: &str) -> u64 {
    op.bytes().fold(7, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
}

#[allow(clippy::too_many_arguments)]
fn compile(
    t: u64,
    id: &str,
    function: u32,
    dur: u64,
    graphs: Vec<u64>,
    reason: Option<&str>,
    reason_location: Option<u32>,
    failure: Option<&str>,
) -> Record {
    Record::FunctionCompiled(Box::new(FunctionCompileRec {
        t,
        id: id.into(),
        function,
        caller: Some(3),
        dur,
        phases: vec![
            ("Dynamo".into(), dur / 4),
            ("AOTAutograd".into(), dur / 4),
            ("backend".into(), dur / 2),
        ],
        graphs,
        reason: reason.map(str::to_string),
        reason_location,
        failure: failure.map(str::to_string),
    }))
}

fn run(t: u64, hash: u64, dur: u64) -> Record {
    Record::CapturedRun { t, hash, dur }
}

/// `forward` (line 10) breaks at line 13 (a print); Dynamo resumes in a function of its own
/// at line 13. Its batch size changes once (the tensor made at line 20), and a Python number
/// set at line 22 changes every step until the recompile limit.
fn program() -> Vec<Record> {
    let mut r = vec![
        location(0, 10, "Net.forward"),
        location(1, 12, "Net.forward"),
        location(2, 13, "Net.forward"),
        location(3, 25, "<module>"),
        location(4, 13, "torch_dynamo_resume_in_forward_at_13"),
        location(5, 20, "<module>"),
        location(6, 22, "<module>"),
        graph(0xa, vec![8, 16]),
        graph(0xb, vec![8, 32]),
    ];
    r.push(Record::GraphBreak {
        t: 5 * MS,
        compile: "0/0".into(),
        reason: "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print`\nHint: Avoid calling builtin `print`".into(),
        location: 2,
    });
    r.push(compile(100 * MS, "0/0", 0, 100 * MS, vec![0xa], None, None, None));
    r.push(compile(150 * MS, "1/0", 4, 40 * MS, vec![0xb], None, None, None));
    // Three calls: graph a, 2 ms uncompiled (the print), graph b.
    let mut t = 200 * MS;
    for _ in 0..3 {
        r.push(run(t + MS, 0xa, MS));
        r.push(run(t + 4 * MS, 0xb, MS));
        r.push(Record::Step { t: t + 5 * MS, step: 0, location: 3 });
        t += 10 * MS;
    }
    r.push(graph(0xc, vec![4, 16]));
    r.push(compile(
        t + 30 * MS,
        "0/1",
        0,
        30 * MS,
        vec![0xc],
        Some("tensor 'x' size mismatch at index 0. expected 8, actual 4"),
        Some(5),
        None,
    ));
    for (i, value) in ["1.0", "2.0", "3.0"].iter().enumerate() {
        t += 100 * MS;
        let hash = 0xd0 + i as u64;
        r.push(graph(hash, vec![8, 16]));
        let guard = format!("self.scale == {value}");
        r.push(compile(
            t,
            &format!("0/{}", i + 2),
            0,
            20 * MS,
            vec![hash],
            Some(&guard),
            Some(6),
            None,
        ));
    }
    r.push(compile(
        t + 50 * MS,
        "0/5",
        0,
        MS,
        vec![],
        Some("self.scale == 4.0"),
        Some(6),
        Some("recompile limit: Dynamo recompile limit exceeded"),
    ));
    r
}

#[test]
fn graph_breaks_guard_failures_and_the_recompile_limit_are_findings_at_the_users_lines() {
    let p = Profile::from_records(program());
    let a = analyze(&p, &Thresholds::default());
    let find = |kind: Kind| a.diagnostics.iter().filter(move |d| d.kind == kind);

    let breaks: Vec<_> = find(Kind::GraphBreak).collect();
    assert_eq!(breaks.len(), 1, "{breaks:#?}");
    let b = breaks[0];
    assert_eq!(b.location, "train.py:13 in Net.forward");
    assert!(b.message.contains("`forward` (train.py:10)"), "{}", b.message);
    assert!(b.message.contains("`print`"), "{}", b.message);
    // 2 ms uncompiled between the graphs, in each of 3 calls, and the 40 ms compile of what
    // follows the break.
    assert!(b.message.contains("in 3 calls"), "{}", b.message);
    assert_eq!(b.cost_ns, 3 * 2 * MS + 40 * MS);
    assert!(b.advice.as_deref().unwrap_or("").contains("reorderable_logging_functions"));

    let recompiles: Vec<_> = find(Kind::Recompile).collect();
    assert_eq!(recompiles.len(), 1, "the limit's own recompiles are its finding: {recompiles:#?}");
    let r = recompiles[0];
    assert_eq!(r.location, "train.py:20 in <module>");
    assert!(r.message.contains("size mismatch at index 0. expected 8, actual 4"), "{}", r.message);
    assert_eq!(r.cost_ns, 30 * MS);

    let limits: Vec<_> = find(Kind::RecompileLimit).collect();
    assert_eq!(limits.len(), 1);
    let l = limits[0];
    assert_eq!(l.location, "train.py:22 in <module>");
    assert!(l.message.contains("runs uncompiled"), "{}", l.message);
    assert!(l.message.contains("self.scale == 4.0"), "{}", l.message);
    assert_eq!(l.count, 3);
    assert_eq!(l.cost_ns, 3 * 20 * MS);
}

#[test]
fn compiles_phases_and_runs_are_on_the_timeline_and_in_the_steps() {
    let p = Profile::from_records(program());
    let a = analyze(&p, &Thresholds::default());
    let of = |kind: SpanKind| a.spans.iter().filter(move |s| s.kind == kind);
    assert_eq!(of(SpanKind::FunctionCompile).count(), 7);
    // Each compile's phases fill it, in order, from its start.
    let first = of(SpanKind::FunctionCompile).next().unwrap();
    assert_eq!((first.start_ns, first.end_ns), (0, 100 * MS));
    let phases: Vec<_> = of(SpanKind::CompilePhase).take(3).collect();
    assert_eq!(
        phases.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["Dynamo", "AOTAutograd", "backend"]
    );
    assert_eq!(phases[2].end_ns, 100 * MS);
    assert_eq!(of(SpanKind::CapturedRun).count(), 6);
    // Steps: the optimizer's; the first holds both compiles, every step its two runs.
    assert_eq!(a.steps.len(), 3);
    assert_eq!(a.steps[0].compile_ns, 140 * MS);
    assert_eq!(a.steps[1].execute_ns, 2 * MS);
    assert_eq!(a.steps[1].compiles, 0);
}

#[test]
fn captured_graphs_are_rows_at_their_function_with_what_changed() {
    let p = Profile::from_records(program());
    let a = analyze(&p, &Thresholds::default());
    let row = |hash: u64| a.graphs.iter().find(|r| r.hash == hash).unwrap();
    assert_eq!(row(0xa).site, "train.py:10 in Net.forward");
    assert_eq!(row(0xa).version, 1);
    assert_eq!((row(0xa).executions, row(0xa).compiles), (3, 1));
    // The batch of 4 replaced the graph of 8: the input's first dimension changed.
    let c = row(0xc);
    assert_eq!((c.version, c.previous), (2, Some(0xa)));
    assert!(!c.changes.is_empty(), "{c:#?}");
    assert!(
        c.changes[0].sentence().contains("f32[8,16] to f32[4,16]"),
        "{}",
        c.changes[0].sentence()
    );
    assert_eq!(row(0xb).site, "train.py:13 in torch_dynamo_resume_in_forward_at_13");
}

#[test]
fn the_report_names_the_compiles_and_each_finding() {
    let p = Profile::from_records(program());
    let text = report::text(&analyze(&p, &Thresholds::default()));
    assert!(text.contains("torch.compile"), "{text}");
    assert!(text.contains("[graph break]"), "{text}");
    assert!(text.contains("[recompile limit]"), "{text}");
}

/// The golden profile of a real run (`tests/data/torch_compile.py`, aot_eager): the print in
/// `forward` and the batch that shrinks at the loop's line.
#[test]
fn the_golden_profile_of_a_real_run_reads_back_with_its_findings() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/profile-torch-compile.xlaprof");
    let p = xlaprof_profiler::load(&path).unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let a = analyze(&p, &Thresholds::default());
    let c = a.summary.torch_compile.as_ref().unwrap();
    assert_eq!((c.compiles, c.functions, c.runs, c.graph_breaks), (6, 2, 8, 2));
    assert_eq!(a.summary.steps, 4);
    let kinds: Vec<(Kind, &str)> =
        a.diagnostics.iter().map(|d| (d.kind, d.location.as_str())).collect();
    assert!(kinds.contains(&(Kind::GraphBreak, "torch_compile.py:18 in forward")), "{kinds:?}");
    assert!(kinds.contains(&(Kind::Recompile, "torch_compile.py:27 in <module>")), "{kinds:?}");
}

/// `torch.compile(DDP(model))`: the wrapper's frame breaks before any tensor work (DDP's logger)
/// and captures nothing; the model's `forward` is compiled whole, on its own. Its evaluation
/// under `no_grad()` compiles the wrapper and the model once more each.
#[test]
fn a_break_that_splits_no_graph_and_a_mode_compiled_along_a_call_are_expected_once() {
    let mut r = vec![
        location(0, 67, "inner"),
        location(1, 30, "<module>"),
        location(2, 10, "Net.forward"),
        location(3, 40, "validate"),
        graph(0xa, vec![8, 16]),
        graph(0xb, vec![8, 16]),
    ];
    r.push(Record::GraphBreak {
        t: 5 * MS,
        compile: "0/0".into(),
        reason: "Unsupported method call: Dynamo does not know how to trace method `set_runtime_stats_and_log` of class `Logger`".into(),
        location: 1,
    });
    r.push(compile(100 * MS, "0/0", 0, 50 * MS, vec![], None, None, None));
    r.push(compile(150 * MS, "1/0", 2, 40 * MS, vec![0xa], None, None, None));
    let mut t = 200 * MS;
    for step in 0..6u64 {
        if step == 3 {
            // The evaluation: both frames compiled again for `no_grad()`, called at line 40
            // (the caller every compile here has).
            for (id, function, graphs) in [("0/1", 0, vec![]), ("1/1", 2, vec![0xb])] {
                let guard = "GLOBAL_STATE changed: grad_mode";
                r.push(compile(t, id, function, 20 * MS, graphs, Some(guard), None, None));
                t += 30 * MS;
            }
        }
        r.push(run(t + MS, if step % 3 == 2 { 0xb } else { 0xa }, MS));
        r.push(Record::Step { t: t + 5 * MS, step: 0, location: 1 });
        t += 10 * MS;
    }
    let p = Profile::from_records(r);
    let a = analyze(&p, &Thresholds::default());

    let breaks: Vec<_> = a.diagnostics.iter().filter(|d| d.kind == Kind::GraphBreak).collect();
    assert_eq!(breaks.len(), 1, "{breaks:#?}");
    assert!(breaks[0].once, "{:?}", breaks[0]);
    assert!(breaks[0].message.starts_with("expected once"), "{}", breaks[0].message);
    assert!(breaks[0].message.contains("no graph is split"), "{}", breaks[0].message);
    assert!(breaks[0].advice.as_deref().unwrap_or("").starts_with("nothing to fix"));

    let modes: Vec<_> = a.diagnostics.iter().filter(|d| d.kind == Kind::Recompile).collect();
    assert_eq!(modes.len(), 1, "one switch of mode, one finding: {modes:#?}");
    let m = modes[0];
    assert!(m.once);
    assert_eq!(m.location, "train.py:40 in validate");
    assert!(m.message.starts_with("expected once: torch.compile compiled `inner` (train.py:67) and 1 function on its way a second graph each, for calls under `torch.no_grad()`"), "{}", m.message);
}
