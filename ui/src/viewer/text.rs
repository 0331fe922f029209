//! Strings from a profile are shown on the user's terminal, and a profile can come from someone
//! else: every control character (escape sequences included) and every bidirectional override
//! is replaced by a visible stand-in before it reaches the screen.

use xlaprof_profiler::record::{AttrValue, Record};

/// `s` with control characters shown as `�` (tabs as a space), safe to print on a terminal.
pub fn clean(s: &str) -> String {
    if !s.chars().any(needs_replacing) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c {
            '\t' => ' ',
            c if needs_replacing(c) => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// Like [`clean`], but keeps line breaks (for multi-line text such as StableHLO).
pub fn clean_multiline(s: &str) -> String {
    s.split('\n').map(clean).collect::<Vec<_>>().join("\n")
}

fn needs_replacing(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// Neutralizes every string a record carries, before the record joins the profile the views draw.
pub fn clean_record(record: &mut Record) {
    let fix = |s: &mut String| {
        if s.chars().any(needs_replacing) {
            *s = clean(s);
        }
    };
    match record {
        Record::Meta(m) => {
            fix(&mut m.program);
            fix(&mut m.platform);
            fix(&mut m.plugin);
        }
        Record::Location { location, .. } => {
            fix(&mut location.file);
            fix(&mut location.function);
        }
        Record::Graph(def) => {
            def.ops.iter_mut().for_each(|(name, _)| fix(name));
            for node in &mut def.node_defs {
                fix(&mut node.op);
                fix(&mut node.shape.dtype);
                for (name, value) in &mut node.attrs {
                    fix(name);
                    if let AttrValue::Name(n) = value {
                        fix(n);
                    }
                }
            }
            def.inputs.iter_mut().for_each(|i| fix(&mut i.shape.dtype));
            def.outputs.iter_mut().for_each(|o| fix(&mut o.dtype));
        }
        Record::StableHlo { text, .. } | Record::OptimizedHlo { text, .. } => {
            *text = clean_multiline(text);
        }
        Record::ScopeBegin { name, .. } | Record::ScopeEnd { name, .. } => fix(name),
        Record::ValueRead { shape, .. } => fix(&mut shape.dtype),
        Record::HostFallback { op, .. } => fix(op),
        Record::SizeRead { op, what, .. } => {
            fix(op);
            fix(what);
        }
        Record::Platform { platform, plugin } => {
            fix(platform);
            fix(plugin);
        }
        Record::Partitioned(plan) => {
            plan.mesh_axes.iter_mut().for_each(|(axis, _)| fix(axis));
            plan.inputs.iter_mut().chain(&mut plan.outputs).flatten().for_each(fix);
            for c in &mut plan.collectives {
                fix(&mut c.kind);
                fix(&mut c.groups);
                c.shapes.iter_mut().for_each(|s| fix(&mut s.dtype));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_bidi_overrides_become_visible() {
        assert_eq!(clean("a\x1b[2Jb\u{202e}c\td"), "a\u{fffd}[2Jb\u{fffd}c d");
        assert_eq!(clean("plain µs ✓"), "plain µs ✓");
        assert_eq!(clean_multiline("x\n\x07y"), "x\n\u{fffd}y");
    }
}
