//! The notebook widget: a profile drawn as one self-contained HTML fragment. Collapsible
//! `<details>` sections (summary, rule checks, diagnostics, devices, timeline, flamegraph, metrics, graphs
//! and their recompile diffs), inline SVG, a stylesheet scoped to the widget, and no script: it
//! shows the same in JupyterLab, Notebook 7, VS Code and in exported HTML.
//!
//! Every string that comes from the profile goes through [`escape::esc`].

pub mod escape;
mod flame;
mod sections;
mod timeline;

use std::collections::HashMap;
use std::fmt::Write;

use xlaprof_profiler::diagnostics::RuleOutcome;
use xlaprof_profiler::{Analysis, Profile};

use escape::esc;

/// What the widget shows besides the profile itself.
#[derive(Debug, Clone, Default)]
pub struct WidgetOptions {
    /// The heading (e.g. `%%xla_profile: In[5]`).
    pub title: String,
    /// The text of source lines, by location id, so diagnostics show the line they point at.
    pub source_lines: HashMap<u32, String>,
    /// Rule checks to show (from `--rules`).
    pub rules: Vec<RuleOutcome>,
}

const STYLE: &str = include_str!("widget.css");

/// The widget's HTML.
pub fn render(p: &Profile, a: &Analysis, options: &WidgetOptions) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(out, "<div class=\"xlaprof-widget\"><style>{STYLE}</style>");
    let title = if options.title.is_empty() { "xlaprof profile" } else { &options.title };
    let _ = write!(out, "<div class=\"xp-title\">{}</div>", esc(title));
    sections::summary(&mut out, a);
    if !options.rules.is_empty() {
        sections::rules(&mut out, &options.rules);
    }
    sections::diagnostics(&mut out, a, &options.source_lines);
    sections::devices(&mut out, a);
    section(&mut out, "Timeline", true, &timeline::svg(p, &a.spans));
    section(&mut out, "Flamegraph: where the time goes", true, &flame::svg(p));
    sections::metrics(&mut out, a);
    sections::graphs(&mut out, p, a);
    if !a.warnings.is_empty() {
        let items: String =
            a.warnings.iter().map(|w| format!("<li>{}</li>", esc(w))).collect::<Vec<_>>().join("");
        section(&mut out, "Warnings (parts of the file that could not be read)", true, &items);
    }
    out.push_str("</div>");
    out
}

/// A collapsible section. `body` is markup built by this module (already escaped).
pub(crate) fn section(out: &mut String, title: &str, open: bool, body: &str) {
    let open = if open { " open" } else { "" };
    let _ = write!(
        out,
        "<details class=\"xp-section\"{open}><summary>{}</summary><div class=\"xp-body\">{body}</div></details>",
        esc(title)
    );
}

/// The live-progress line shown while a profiled cell runs.
pub fn progress_html(steps: u64, syncs: u64, compiles: u64, elapsed_s: f64) -> String {
    format!(
        "<div class=\"xlaprof-progress\" style=\"font-family:monospace\">xlaprof: running… \
         {steps} steps, {syncs} syncs, {compiles} compiles, {elapsed_s:.1} s</div>"
    )
}

#[cfg(test)]
mod tests;
