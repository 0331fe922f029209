//! `XLAPROF_DEBUG=1` prints a compile analysis for every compile, `=2` also an execution analysis
//! for every execution (PyTorch/XLA's PT_XLA_DEBUG_LEVEL), to stderr or `XLAPROF_DEBUG_FILE`.
//! It is an ordinary event listener, installed when the engine starts.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use crate::config::EngineConfig;
use crate::events::{self, Event, GraphSummary, Listener, SyncCause};
use crate::location::SourceLocation;

struct DebugPrinter {
    level: u8,
    out: Mutex<Box<dyn std::io::Write + Send>>,
    /// The sync being analysed (syncs are serialized).
    current: Mutex<Option<CurrentSync>>,
}

/// What the analysis of one sync needs from its earlier events: cause, line, and graph.
type CurrentSync = (SyncCause, SourceLocation, Option<Arc<GraphSummary>>);

/// Installs the printer when `XLAPROF_DEBUG` asks for it.
pub(crate) fn install(config: &EngineConfig) {
    let level = config.debug_level;
    if level == 0 {
        return;
    }
    let out: Box<dyn std::io::Write + Send> = match &config.debug_file {
        Some(path) => match std::fs::OpenOptions::new().create(true).append(true).open(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!(
                    "xlaprof: cannot open {} {}: {e}; using stderr",
                    crate::config::DEBUG_FILE,
                    path.to_string_lossy()
                );
                Box::new(std::io::stderr())
            }
        },
        None => Box::new(std::io::stderr()),
    };
    events::add_listener(Arc::new(DebugPrinter {
        level,
        out: Mutex::new(out),
        current: Mutex::new(None),
    }));
}

fn cause_text(cause: SyncCause) -> &'static str {
    match cause {
        SyncCause::Explicit => "explicit sync()",
        SyncCause::ValueRead => "a tensor value was read on the host (to_vec, item, print)",
        SyncCause::StepEnd => "step() at the end of a training step",
        SyncCause::CompiledGraph => "a compiled graph ran (torch.compile)",
    }
}

impl DebugPrinter {
    fn analysis(&self, title: &str, hash: u64, timing: String) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let Some((cause, location, summary)) = current.as_ref() else { return };
        let p = title;
        let mut text = String::new();
        let _ = writeln!(text, "{p}: {}", "=".repeat(72));
        let _ = writeln!(text, "{p}: Cause: {}", cause_text(*cause));
        let _ = writeln!(text, "{p}:   at {location}");
        let _ = writeln!(text, "{p}: Graph hash: {hash:016x}");
        if let Some(s) = summary {
            let _ = writeln!(
                text,
                "{p}:   {} nodes, {} inputs, {} outputs",
                s.nodes,
                s.inputs.len(),
                s.outputs.len()
            );
            for (i, input) in s.inputs.iter().enumerate() {
                let donated = if s.donated.iter().any(|d| d.0 == i) { ", donated" } else { "" };
                let _ = writeln!(
                    text,
                    "{p}:   input {i}: {} ({:?}{donated}) created at {}",
                    input.shape, input.kind, input.location
                );
            }
        }
        let _ = writeln!(text, "{p}: {timing}");
        let _ = writeln!(text, "{p}: {}", "=".repeat(72));
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

impl Listener for DebugPrinter {
    fn on_event(&self, _at_ns: u64, event: &Event) {
        match event {
            Event::SyncBegin { cause, location, .. } => {
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((*cause, location.clone(), None));
            }
            Event::GraphBuilt { summary, .. } => {
                if let Some(c) = self.current.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                    c.2 = Some(summary.clone());
                }
            }
            Event::Compiled { hash, duration_ns, .. } => {
                self.analysis(
                    "Compilation Analysis",
                    *hash,
                    format!("Compile time: {:.3} ms", *duration_ns as f64 / 1e6),
                );
            }
            Event::CacheLookup { hash, persistent_hit: true, .. } => {
                self.analysis(
                    "Compilation Analysis",
                    *hash,
                    "Loaded from the persistent compile cache".into(),
                );
            }
            Event::Executed { hash, duration_ns, .. } if self.level >= 2 => {
                self.analysis(
                    "Execution Analysis",
                    *hash,
                    format!("Execute time: {:.3} ms", *duration_ns as f64 / 1e6),
                );
            }
            _ => {}
        }
    }
}
