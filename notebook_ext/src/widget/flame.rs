//! The flamegraph, drawn by inferno from the profiler's folded stacks, made fit to sit inline in
//! a notebook: no XML prolog, no script, and its stylesheet scoped to this one SVG (an inline
//! SVG's `<style>` would otherwise restyle the whole page).

use xlaprof_profiler::export::flame::folded;
use xlaprof_profiler::Profile;

use super::escape::{esc, strip_controls};

/// The class the flamegraph's scoped stylesheet hangs on.
const SCOPE: &str = "xp-flame";

pub(crate) fn svg(p: &Profile) -> String {
    let lines = folded(p);
    if lines.is_empty() {
        return "<p>No syncs: nothing to draw.</p>".to_string();
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = "where the time goes".to_string();
    options.count_name = "µs".to_string();
    options.no_javascript = true;
    // A fixed width: inferno's fluid layout needs its script to place the labels.
    options.image_width = Some(960);
    options.deterministic = true;
    let mut out = Vec::new();
    if let Err(e) =
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut out)
    {
        return format!("<p>The flamegraph could not be drawn: {}</p>", esc(&e.to_string()));
    }
    inline(&String::from_utf8_lossy(&out))
}

/// Turns inferno's standalone SVG document into an inline, inert, scoped fragment.
fn inline(document: &str) -> String {
    let start = document.find("<svg").unwrap_or(0);
    let mut svg = document[start..].to_string();
    // Drop every script element (inferno keeps one with its settings even without JavaScript).
    while let Some(open) = svg.find("<script") {
        let close = svg[open..].find("</script>").map(|c| open + c + "</script>".len());
        svg.replace_range(open..close.unwrap_or(svg.len()), "");
    }
    // Event handler attributes would call the dropped script.
    for attr in ["onload", "onclick", "onmouseover", "onmouseout"] {
        svg = remove_attribute(&svg, attr);
    }
    if let (Some(open), Some(close)) = (svg.find("<style"), svg.find("</style>")) {
        if let Some(body_start) = svg[open..].find('>').map(|b| open + b + 1) {
            if body_start <= close {
                let scoped = scope_css(&svg[body_start..close]);
                svg.replace_range(body_start..close, &scoped);
            }
        }
    }
    svg = svg.replacen("<svg", &format!("<svg class=\"{SCOPE}\""), 1);
    strip_controls(&svg)
}

/// Removes every ` name="..."` attribute.
fn remove_attribute(svg: &str, name: &str) -> String {
    let needle = format!(" {name}=\"");
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = rest.find(&needle) {
        out.push_str(&rest[..at]);
        let value = &rest[at + needle.len()..];
        rest = match value.find('"') {
            Some(end) => &value[end + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// Prefixes each selector of a simple stylesheet (one rule per line, as inferno writes it) with
/// the widget's flamegraph class.
fn scope_css(css: &str) -> String {
    css.lines()
        .map(|line| match line.split_once('{') {
            Some((selectors, rule)) if !selectors.trim().is_empty() => {
                let scoped: Vec<String> =
                    selectors.split(',').map(|s| format!(".{SCOPE} {}", s.trim())).collect();
                format!("{} {{{rule}", scoped.join(", "))
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn css_is_scoped_to_the_flamegraph() {
        let css = "\ntext { font-size:12px }\n#a:hover, .b { x:y; }\n";
        assert_eq!(
            scope_css(css),
            "\n.xp-flame text { font-size:12px }\n.xp-flame #a:hover, .xp-flame .b { x:y; }"
        );
    }

    #[test]
    fn scripts_and_handlers_are_removed() {
        let doc = "<?xml version=\"1.0\"?><!DOCTYPE svg><svg onload=\"init(evt)\" a=\"1\">\
                   <script><![CDATA[var x;]]></script><g onmouseover=\"s(this)\">t</g></svg>";
        assert_eq!(inline(doc), "<svg class=\"xp-flame\" a=\"1\"><g>t</g></svg>");
    }
}
