//! Writes a profile of `STEPS` steps of one small graph, six records each (a step's sync: begin,
//! graph built, cache lookup, execution, end; the step): the large profiles the viewers'
//! benchmarks open (`notebook_ext/bench/view.py`).
//! `cargo run --release -p xlaprof-profiler --example synthetic_profile -- STEPS OUT.xlaprof`

use xlaprof_profiler::file::Writer;
use xlaprof_profiler::record::{
    Cause, GraphDef, InputRec, Location, Meta, NodeRec, Record, ShapeRec,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: synthetic_profile STEPS OUT.xlaprof";
    let steps: u64 = args.next().ok_or(usage)?.parse()?;
    let out = args.next().ok_or(usage)?;
    let mut w = Writer::create(std::path::Path::new(&out))?;
    let shape = ShapeRec { dtype: "f32".into(), dims: vec![64, 64] };
    let node = |op: &str, inputs: Vec<u32>, hash: u64| NodeRec {
        op: op.into(),
        attrs: Vec::new(),
        inputs,
        shape: shape.clone(),
        location: 0,
        hash,
    };
    let hash = 0x5eed_0000_0000_0001;
    let meta = Meta { program: "synthetic".into(), platform: "cpu".into(), ..Meta::default() };
    let location = Location { file: "train.py".into(), line: 12, function: "<module>".into() };
    let input =
        InputRec { shape: shape.clone(), data: true, location: 0, donated: false, name: None };
    let graph = GraphDef {
        hash,
        nodes: 3,
        ops: vec![("dot_general".into(), 1), ("tanh".into(), 1)],
        inputs: vec![input],
        outputs: vec![shape.clone()],
        node_defs: vec![
            node("parameter", vec![], 1),
            node("dot_general", vec![0, 0], 2),
            node("tanh", vec![1], 3),
        ],
    };
    w.append(&Record::Meta(meta))?;
    w.append(&Record::Location { id: 0, location })?;
    w.append(&Record::Graph(Box::new(graph)))?;
    // A 1 ms step: 100 µs building the graph, 600 µs executing it, the rest on the host.
    for step in 1..=steps {
        let t = (step - 1) * 1_000_000;
        let (sync, begin) = (step, t + 200_000);
        w.append(&Record::SyncBegin {
            t: begin,
            sync,
            cause: Cause::StepEnd,
            location: 0,
            tensors: 1,
        })?;
        w.append(&Record::GraphBuilt { t: begin + 100_000, sync, hash, dur: 100_000 })?;
        w.append(&Record::CacheLookup {
            t: begin + 100_000,
            sync,
            hash,
            hit: step > 1,
            persistent: false,
        })?;
        w.append(&Record::Executed { t: begin + 700_000, sync, hash, dur: 600_000 })?;
        w.append(&Record::SyncEnd {
            t: begin + 750_000,
            sync,
            dur: 750_000,
            counters: Vec::new(),
        })?;
        w.append(&Record::Step { t: t + 1_000_000, step, location: 0 })?;
    }
    println!("{} records -> {out}", 3 + 6 * steps);
    Ok(())
}
