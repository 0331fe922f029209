//! Profiling from Python: a recording (streamed to a file, so a profile can be saved as it is),
//! and a profile with its analysis, reports, exports, tables and the notebook widget.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use polars::prelude::ParquetWriter;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use xlaprof_profiler::diagnostics::{check, Rule, RuleOutcome};
use xlaprof_profiler::diagnostics::{diff_graphs, GraphChange};
use xlaprof_profiler::export::{self, tables, Format};
use xlaprof_profiler::profile::Graph;
use xlaprof_profiler::record::InputName;
use xlaprof_profiler::timeline::{self, lane_name};
use xlaprof_profiler::{analyze, report, Analysis, Profile, Recording, Thresholds};

use super::errors::{guarded, profile_error, Class};
use crate::widget::{self, WidgetOptions};

static NEXT_FILE: AtomicU64 = AtomicU64::new(1);

fn temp_profile_path() -> PathBuf {
    let n = NEXT_FILE.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("xlaprof-{}-{n}.xlaprof", std::process::id()))
}

/// A profile being recorded (one at a time per process).
#[pyclass(name = "_Recording", module = "xlaprof")]
pub struct PyRecording {
    recording: Option<Recording>,
    path: PathBuf,
}

#[pymethods]
impl PyRecording {
    #[new]
    fn new() -> PyResult<Self> {
        let path = temp_profile_path();
        let recording = Recording::to_file(&path).map_err(profile_error)?;
        Ok(PyRecording { recording: Some(recording), path })
    }

    /// The profile so far, without stopping.
    fn snapshot(&self) -> PyResult<PyProfile> {
        let r = self.recording.as_ref().ok_or_else(|| {
            Class::Profile.err("this recording was stopped: read the profile that stop() returned")
        })?;
        Ok(PyProfile::new(r.snapshot(), None, false))
    }

    /// Stops and returns the profile (its file stays until the profile is dropped).
    fn stop(&mut self) -> PyResult<PyProfile> {
        let r = self
            .recording
            .take()
            .ok_or_else(|| Class::Profile.err("this recording was already stopped"))?;
        guarded("stop", || Ok(PyProfile::new(r.stop(), Some(self.path.clone()), true)))
    }
}

impl Drop for PyRecording {
    fn drop(&mut self) {
        if let Some(r) = self.recording.take() {
            r.stop();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A finished (or loaded) profile and its analysis.
#[pyclass(name = "_Profile", module = "xlaprof", frozen)]
pub struct PyProfile {
    profile: Profile,
    analysis: Analysis,
    /// The timeline's spans and their extent (first start, last end), made on the first window
    /// a viewer asks for.
    spans: std::sync::OnceLock<(Vec<timeline::Span>, u64, u64)>,
    /// The profile file behind it: what `save` copies.
    file: Option<PathBuf>,
    /// The file is a temporary of this process, removed with the profile.
    temporary: bool,
}

impl PyProfile {
    /// A graph's nodes as `[text, location]` and its device inputs as `[shape, name, location]`.
    fn graph_nodes<'py>(&self, py: Python<'py>, g: &Graph) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let nodes: Vec<(String, String)> = g
            .def
            .node_defs
            .iter()
            .enumerate()
            .map(|(i, n)| (n.text(i), self.profile.location(n.location)))
            .collect();
        let inputs: Vec<(String, Option<String>, String)> = g
            .def
            .inputs
            .iter()
            .filter(|i| i.data)
            .map(|i| {
                let name = i.name.as_ref().map(|n| match n {
                    InputName::Given(n) | InputName::Variable(n) => n.clone(),
                });
                (i.shape.to_string(), name, self.profile.location(i.location))
            })
            .collect();
        d.set_item("hash", format!("{:016x}", g.def.hash))?;
        d.set_item("nodes", nodes)?;
        d.set_item("inputs", inputs)?;
        Ok(d)
    }

    fn new(profile: Profile, file: Option<PathBuf>, temporary: bool) -> PyProfile {
        let analysis = analyze(&profile, &Thresholds::default());
        PyProfile { profile, analysis, spans: Default::default(), file, temporary }
    }

    /// Parses and evaluates rules (`"max-compiles=1"`, ...) against this profile.
    fn outcomes(&self, rules: &[String]) -> PyResult<Vec<RuleOutcome>> {
        let rules = parse_rules(rules)?;
        Ok(check(&self.profile, &rules, self.analysis.thresholds.warmup_steps))
    }
}

impl Drop for PyProfile {
    fn drop(&mut self) {
        if let (true, Some(f)) = (self.temporary, &self.file) {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn to_py<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| Class::Profile.err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

fn parse_rules(rules: &[String]) -> PyResult<Vec<Rule>> {
    rules.iter().map(|r| Rule::parse(r).map_err(|e| PyValueError::new_err(e.to_string()))).collect()
}

#[pymethods]
impl PyProfile {
    /// The text report (`short=True`: the summary and the top findings).
    #[pyo3(signature = (short=false))]
    fn report(&self, short: bool) -> String {
        if short {
            report::short(&self.analysis)
        } else {
            report::text(&self.analysis)
        }
    }

    fn metrics_report(&self) -> String {
        report::metrics(&self.analysis.metrics)
    }

    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.analysis.summary)
    }

    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = to_py(py, &self.analysis.diagnostics)?;
        // Each finding also carries its causes as sentences and its kind's title.
        for (item, d) in list.try_iter()?.zip(&self.analysis.diagnostics) {
            let item = item?;
            let sentences: Vec<String> = d.changes.iter().map(|c| c.sentence()).collect();
            item.set_item("change_sentences", sentences)?;
            item.set_item("title", d.kind.title())?;
        }
        Ok(list)
    }

    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.analysis.metrics)
    }

    /// Every location of the profile as `(file, line, function)`, by id.
    fn locations(&self) -> Vec<(String, u32, String)> {
        self.profile
            .locations
            .iter()
            .map(|l| (l.file.clone(), l.line, l.function.clone()))
            .collect()
    }

    /// Compiles in steps after `step`, as `(step, location, graph hash)`.
    fn compiles_after(&self, step: u64) -> Vec<(u64, String, String)> {
        self.profile
            .syncs
            .iter()
            .filter(|s| s.compiled() && s.step > step)
            .map(|s| {
                let graph = s.hash.map(|h| format!("{h:016x}")).unwrap_or_default();
                (s.step, self.profile.location(s.location), graph)
            })
            .collect()
    }

    /// Evaluates rules (`"max-compiles=1"`, ...) as dicts with `rule`, `passed`, `message`.
    fn check<'py>(&self, py: Python<'py>, rules: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
        let outcomes = self.outcomes(&rules)?;
        let out = pyo3::types::PyList::empty(py);
        for o in outcomes {
            let d = PyDict::new(py);
            d.set_item("rule", o.rule.to_string())?;
            d.set_item("passed", o.passed)?;
            d.set_item("message", o.message)?;
            out.append(d)?;
        }
        Ok(out.into_any())
    }

    /// Each table (spans, graphs, compiles, executions, diagnostics) as Parquet bytes.
    fn tables_parquet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let all = tables::tables(&self.profile, &self.analysis).map_err(profile_error)?;
        let out = PyDict::new(py);
        for (name, mut df) in all {
            let mut bytes = Vec::new();
            ParquetWriter::new(&mut bytes)
                .finish(&mut df)
                .map_err(|e| Class::Profile.err(format!("table {name}: {e}")))?;
            out.set_item(name, PyBytes::new(py, &bytes))?;
        }
        Ok(out)
    }

    /// Writes the profile file (readable by `xlaprof.load` and the `xlaprof` command line).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        let from = self.file.as_ref().ok_or_else(|| {
            Class::Profile
                .err("a profile still recording cannot be saved: leave the `with` block first")
        })?;
        if same_file(from, &path) {
            return Ok(());
        }
        // The copy can fail on either side: name both files.
        std::fs::copy(from, &path).map(|_| ()).map_err(|e| {
            Class::Profile.err(format!(
                "cannot save the profile to {}: {e} (copying {})",
                path.display(),
                from.display()
            ))
        })
    }

    /// Exports to `path` as text, short, json, csv, parquet (folders), chrome, folded or
    /// flamegraph.
    fn export(&self, path: PathBuf, format: &str) -> PyResult<()> {
        let f = Format::parse(format).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown format {format:?}; the formats are: {}",
                Format::NAMES
            ))
        })?;
        export::write(&self.profile, &self.analysis, f, &path).map_err(profile_error)
    }

    /// The notebook widget's HTML.
    #[pyo3(signature = (title="", source_lines=HashMap::new(), rules=Vec::new()))]
    fn render_html(
        &self,
        title: &str,
        source_lines: HashMap<u32, String>,
        rules: Vec<String>,
    ) -> PyResult<String> {
        let options =
            WidgetOptions { title: title.to_string(), source_lines, rules: self.outcomes(&rules)? };
        guarded("render", || Ok(widget::render(&self.profile, &self.analysis, &options)))
    }

    /// The timeline between `start_ns` and `end_ns` as a viewer `columns` pixels wide draws it
    /// (`timeline::window`): `extent` (the whole profile's first and last ns), `lanes` (names)
    /// and `bars`, each `[lane, depth, kind, start_ns, end_ns, count, label, graph]` (a merged
    /// bar's label says how many spans it stands for; `graph`: the hash of a sync's or an
    /// execution's graph, in hex, else empty).
    fn timeline<'py>(
        &self,
        py: Python<'py>,
        start_ns: u64,
        end_ns: u64,
        columns: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (spans, first, last) = self.spans.get_or_init(|| {
            let spans = timeline::spans(&self.profile);
            let first = spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
            let last = spans.iter().map(|s| s.end_ns).max().unwrap_or(0);
            (spans, first, last)
        });
        let lanes = spans
            .iter()
            .map(|s| s.lane)
            .max()
            .map_or(0, |l| l + 1)
            .max(timeline::LANES.len() as u32);
        let bars = pyo3::types::PyList::empty(py);
        for b in timeline::window(spans, start_ns, end_ns, columns) {
            let (label, graph) = match b.span {
                Some(i) if b.count == 1 => {
                    let s = &spans[i];
                    let at = s
                        .location
                        .map(|l| format!(" at {}", self.profile.location(l)))
                        .unwrap_or_default();
                    let graph = s.hash.map(|h| format!("{h:016x}")).unwrap_or_default();
                    (format!("{}{at}", s.name), graph)
                }
                _ => {
                    let busy = xlaprof_profiler::metrics::format_ns(b.busy_ns as f64);
                    (format!("{} spans ({busy} busy)", b.count), String::new())
                }
            };
            let row = (b.lane, b.depth, b.kind.name(), b.start_ns, b.end_ns, b.count, label, graph);
            bars.append(row)?;
        }
        let out = PyDict::new(py);
        out.set_item("extent", (first, last))?;
        out.set_item("lanes", (0..lanes).map(lane_name).collect::<Vec<_>>())?;
        out.set_item("bars", bars)?;
        Ok(out)
    }

    /// Two graphs side by side, as a finding's recompile compares them: `changes` (each
    /// `sentence`, and the `input` or `node` it is about), and each graph's `nodes` as
    /// `[text, location]` and `inputs` as `[shape, name, location]`. None for a graph the
    /// profile does not hold.
    fn graph_diff<'py>(
        &self,
        py: Python<'py>,
        a: u64,
        b: u64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let (Some(ga), Some(gb)) = (self.profile.graphs.get(&a), self.profile.graphs.get(&b))
        else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        let changes = pyo3::types::PyList::empty(py);
        for c in diff_graphs(&self.profile, ga, gb) {
            let d = PyDict::new(py);
            d.set_item("sentence", c.sentence())?;
            match &c {
                GraphChange::InputShape { input, .. } | GraphChange::Donation { input, .. } => {
                    d.set_item("input", input)?
                }
                GraphChange::NodeShape { node, .. } => d.set_item("node", node)?,
                c if c.diverging_node().is_some() => d.set_item("node", c.diverging_node())?,
                _ => {}
            }
            changes.append(d)?;
        }
        out.set_item("changes", changes)?;
        out.set_item("a", self.graph_nodes(py, ga)?)?;
        out.set_item("b", self.graph_nodes(py, gb)?)?;
        Ok(Some(out))
    }

    /// One graph as a span or a row opens it: `hash`, `ops` (count per op), `nodes` and
    /// `inputs` (as in `graph_diff`), and its `stablehlo` and `optimized_hlo` text where the
    /// profile holds them. None for a graph the profile does not hold.
    fn graph_detail<'py>(
        &self,
        py: Python<'py>,
        hash: u64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(g) = self.profile.graphs.get(&hash) else { return Ok(None) };
        let out = self.graph_nodes(py, g)?;
        out.set_item("ops", g.def.ops.clone())?;
        out.set_item("stablehlo", g.stablehlo.as_deref())?;
        out.set_item("optimized_hlo", g.optimized_hlo.as_deref())?;
        out.set_item("executions", g.executions)?;
        out.set_item("compile_ns", g.compile_ns)?;
        Ok(Some(out))
    }

    /// This profile (A) against `other` (B), as `xlaprof diff` prints it: step times, metrics
    /// and counters with their change.
    fn diff_report(&self, other: PyRef<'_, PyProfile>) -> String {
        report::diff(&self.analysis, &other.analysis)
    }

    /// Every source line the engine did something for (`Analysis::lines`): file, line, ops,
    /// syncs, compiles, reads, bytes, fallbacks, and the location ids on it.
    fn lines<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.analysis.lines)
    }

    #[getter]
    fn steps(&self) -> usize {
        self.profile.steps.len()
    }
    #[getter]
    fn compiles(&self) -> usize {
        self.profile.compiles.len()
    }
    #[getter]
    fn syncs(&self) -> usize {
        self.profile.syncs.len()
    }
    #[getter]
    fn graphs(&self) -> usize {
        self.profile.graphs.len()
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Reads a profile file.
#[pyfunction]
pub(crate) fn load(path: PathBuf) -> PyResult<PyProfile> {
    let profile = xlaprof_profiler::load(&path).map_err(profile_error)?;
    Ok(PyProfile::new(profile, Some(path), false))
}

/// Reads a job's profiles (its ranks' `job.rankN.xlaprof` for `job.xlaprof`) as one: the ranks'
/// files, the job's text report and its findings across ranks.
#[pyfunction]
pub(crate) fn load_job(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyAny>> {
    let files = xlaprof_profiler::file::job_files(&path);
    if files.is_empty() {
        return Err(Class::Profile.err(format!(
            "{} has no ranks' profiles beside it (a job's ranks write {})",
            path.display(),
            xlaprof_profiler::file::beside(&path, "rank0").display()
        )));
    }
    let profiles = files
        .iter()
        .map(|f| xlaprof_profiler::load(f).map_err(profile_error))
        .collect::<PyResult<Vec<_>>>()?;
    let thresholds = xlaprof_profiler::Thresholds::default();
    let analyses: Vec<_> = profiles.iter().map(|p| xlaprof_profiler::analyze(p, &thresholds)).collect();
    let runs: Vec<_> = profiles.iter().zip(&analyses).collect();
    let job = xlaprof_profiler::job::analyze(&runs);
    let text = xlaprof_profiler::merge::text(&xlaprof_profiler::merge::place(&runs));
    let out = to_py(py, &job)?;
    out.set_item("files", files)?;
    out.set_item("report", text)?;
    Ok(out)
}

/// Starts recording the whole process to the file named by `XLAPROF_PROFILE`, when it is set
/// (what `xlaprof run -- python train.py` sets), as the Rust programs do at the top of `main`.
/// Returns whether it records.
#[pyfunction]
pub(crate) fn record_from_env() -> PyResult<bool> {
    xlaprof_profiler::init_from_env().map_err(profile_error)
}

/// The file the whole program's recording writes (`XLAPROF_PROFILE`, or beside it: a rank's
/// file, or one this process found another writing), if one records.
#[pyfunction]
pub(crate) fn whole_program_file() -> Option<PathBuf> {
    xlaprof_profiler::whole_program().and_then(|r| r.file_path())
}

/// This process is rank `rank` of a job of `world` processes (it joined the job's process
/// group): the profile says so, and the whole program's file takes the rank's name.
#[pyfunction]
pub(crate) fn join_job(rank: u32, world: u32) {
    match xlaprof_profiler::whole_program() {
        Some(recording) => recording.join_job(rank, world),
        None => xlaprof_core::events::job_rank(rank, world),
    }
}

/// Writes out what the whole program's recording has not written yet (at exit).
#[pyfunction]
pub(crate) fn flush_whole_program() {
    if let Some(recording) = xlaprof_profiler::whole_program() {
        recording.flush();
    }
}

/// The profile so far of the whole program's recording (`XLAPROF_PROFILE`), if one records.
#[pyfunction]
pub(crate) fn whole_program_profile() -> Option<PyProfile> {
    xlaprof_profiler::whole_program().map(|r| PyProfile::new(r.snapshot(), None, false))
}

/// The metrics and counters of the whole program's recording from `since_ns` on (its clock),
/// with `end_ns`, the time of its last record: no analysis beyond them (PyTorch/XLA's metrics
/// report, asked for in a loop).
#[pyfunction]
pub(crate) fn whole_program_metrics(
    py: Python<'_>,
    since_ns: u64,
) -> PyResult<Option<Bound<'_, PyAny>>> {
    let Some(recording) = xlaprof_profiler::whole_program() else { return Ok(None) };
    let profile = recording.snapshot();
    let metrics = to_py(py, &xlaprof_profiler::metrics::metrics_since(&profile, since_ns))?;
    metrics.set_item("end_ns", profile.end_ns())?;
    Ok(Some(metrics))
}

/// The live-progress line of the notebook magic.
#[pyfunction]
pub(crate) fn progress_html(steps: u64, syncs: u64, compiles: u64, elapsed_s: f64) -> String {
    widget::progress_html(steps, syncs, compiles, elapsed_s)
}

/// Raises ValueError for the first rule that does not parse (before a cell runs).
#[pyfunction]
pub(crate) fn validate_rules(rules: Vec<String>) -> PyResult<()> {
    parse_rules(&rules).map(|_| ())
}
