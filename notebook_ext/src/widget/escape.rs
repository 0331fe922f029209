//! Escaping for everything taken from a profile. A profile can come from someone else, so every
//! name, file, source line and HLO text is text, never markup: `<script>` shows as `<script>`.

use std::fmt::Write;

/// Escapes text for HTML and SVG (element content and quoted attribute values alike). Control
/// characters other than newline and tab are shown as `\xNN` (they are invalid in XML, and a
/// terminal escape sequence in a file name should be visible, not interpreted).
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if is_control(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// C0 and C1 controls, DEL, and the Unicode line/paragraph separators.
pub fn is_control(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// Removes characters that are invalid in XML from already-escaped markup (the flamegraph comes
/// from inferno, which escapes markup but keeps control characters).
pub fn strip_controls(markup: &str) -> String {
    markup.chars().filter(|&c| !is_control(c) || c == '\n' || c == '\t').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_text() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn control_characters_are_shown_not_kept() {
        assert_eq!(esc("a\u{1b}[31mb\u{0}c\nd"), "a\\x1b[31mb\\x00c\nd");
        assert_eq!(strip_controls("<t>a\u{7}b</t>\n"), "<t>ab</t>\n");
    }
}
