//! Every export, from the golden profile: tables read back with polars equal the profile, the
//! Chrome trace is trace-event JSON, the flamegraph is well-formed SVG, JSON round-trips.

use std::path::Path;

use polars::prelude::*;
use xlaprof_profiler::export::{self, Format};
use xlaprof_profiler::{analyze, load, Analysis, Profile, Thresholds};

fn golden() -> (Profile, Analysis) {
    let p =
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/profile-v1.xlaprof")).unwrap();
    let a = analyze(&p, &Thresholds::default());
    (p, a)
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xlaprof-export-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A column of whole numbers (CSV reads them back as i64), as u64.
fn u64_column(table: &DataFrame, name: &str) -> Vec<u64> {
    let column = table.column(name).unwrap().cast(&DataType::UInt64).unwrap();
    column.u64().unwrap().into_no_null_iter().collect()
}

#[test]
fn parquet_and_csv_tables_read_back_equal_to_the_profile() {
    let (p, a) = golden();
    for format in [Format::Parquet, Format::Csv] {
        let dir = temp(if format == Format::Csv { "csv" } else { "parquet" });
        export::write(&p, &a, format, &dir).unwrap();
        let read = |name: &str| -> DataFrame {
            if format == Format::Csv {
                CsvReadOptions::default()
                    .with_has_header(true)
                    .try_into_reader_with_file_path(Some(dir.join(format!("{name}.csv"))))
                    .unwrap()
                    .finish()
                    .unwrap()
            } else {
                let file = std::fs::File::open(dir.join(format!("{name}.parquet"))).unwrap();
                ParquetReader::new(file).finish().unwrap()
            }
        };
        let compiles = read("compiles");
        assert_eq!(compiles.height(), p.compiles.len());
        let durations = u64_column(&compiles, "duration_ns");
        assert_eq!(durations, p.compiles.iter().map(|c| c.duration_ns).collect::<Vec<_>>());
        let executions = read("executions");
        assert_eq!(executions.height(), p.executions.len());
        let graphs = read("graphs");
        assert_eq!(graphs.height(), p.graphs.len());
        let nodes = u64_column(&graphs, "nodes");
        assert_eq!(nodes, p.graphs.values().map(|g| g.def.nodes as u64).collect::<Vec<_>>());
        let spans = read("spans");
        assert_eq!(spans.height(), xlaprof_profiler::timeline::spans(&p).len());
        let diagnostics = read("diagnostics");
        assert_eq!(diagnostics.height(), a.diagnostics.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_chrome_trace_is_trace_event_json() {
    let (p, a) = golden();
    let bytes = export::to_bytes(&p, &a, Format::Chrome).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let complete: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert!(complete
        .iter()
        .all(|e| e["ts"].is_number() && e["dur"].is_number() && e["name"].is_string()));
    let executes = complete.iter().filter(|e| e["cat"] == "execute").count();
    assert_eq!(executes, p.executions.len());
    assert!(complete
        .iter()
        .filter(|e| e["cat"] == "compile")
        .all(|e| e["args"]["graph"].as_str().is_some_and(|g| g.len() == 16)));
    assert!(
        events.iter().any(|e| e["ph"] == "C" && e["name"] == "compiles"),
        "counters as counter tracks"
    );
    assert!(events.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "steps"));
}

#[test]
fn the_flamegraph_is_well_formed_svg_of_the_folded_stacks() {
    let (p, a) = golden();
    let folded = String::from_utf8(export::to_bytes(&p, &a, Format::Folded).unwrap()).unwrap();
    assert!(
        folded
            .lines()
            .all(|l| l.starts_with("program;")
                && l.rsplit(' ').next().unwrap().parse::<u64>().is_ok()),
        "{folded}"
    );
    assert!(folded.contains(";compile;graph "), "{folded}");
    let svg = export::to_bytes(&p, &a, Format::Flamegraph).unwrap();
    let mut reader = quick_xml::Reader::from_reader(svg.as_slice());
    let mut buf = Vec::new();
    let mut elements = 0;
    let mut depth: i64 = 0;
    loop {
        match reader.read_event_into(&mut buf).expect("well-formed XML") {
            quick_xml::events::Event::Start(_) => {
                elements += 1;
                depth += 1;
            }
            quick_xml::events::Event::End(_) => depth -= 1,
            quick_xml::events::Event::Empty(_) => elements += 1,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    assert_eq!(depth, 0, "every element is closed");
    assert!(elements > 10);
    assert!(String::from_utf8_lossy(&svg).contains("<svg"));
}

#[test]
fn json_holds_the_profile_and_the_analysis() {
    let (p, a) = golden();
    let bytes = export::to_bytes(&p, &a, Format::Json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["format"], "xlaprof-json");
    assert_eq!(v["version"], 1);
    assert_eq!(v["profile"]["syncs"].as_array().unwrap().len(), p.syncs.len());
    assert_eq!(v["analysis"]["diagnostics"].as_array().unwrap().len(), a.diagnostics.len());
    assert_eq!(v["analysis"]["summary"]["steps"], 5);
}
