//! The variable a line of source assigns (`x = torch.randn(...)` → `x`), read from the file
//! while the program runs: how a graph input the front end did not name is named in findings.

use std::collections::HashMap;
use std::sync::OnceLock;

type SourceOf = dyn Fn(&str) -> Option<String> + Send + Sync;

static SOURCE_OF: OnceLock<Box<SourceOf>> = OnceLock::new();

/// How a front end that shows files by another name than their path, or runs code that is in no
/// file (a notebook cell), gives the text of a file it shows as a name. Set once; a name it
/// does not know is read as a path.
pub fn set_source_of(source_of: impl Fn(&str) -> Option<String> + Send + Sync + 'static) {
    let _ = SOURCE_OF.set(Box::new(source_of));
}

/// Source files read so far, by the name locations show (`None`: not readable).
#[derive(Default)]
pub(crate) struct SourceFiles {
    files: HashMap<String, Option<Vec<String>>>,
}

/// A file larger than this is not read (a generated module, a minified bundle).
const MAX_FILE_BYTES: u64 = 4 << 20;

impl SourceFiles {
    /// The single name or attribute path line `line` (from 1) of `file` assigns to, if it is a
    /// plain assignment (`x = ...`, `self.cache: T = ...`); none for `x += ...`, `a, b = ...`,
    /// comparisons, or a line that cannot be read.
    pub(crate) fn assigned_at(&mut self, file: &str, line: u32) -> Option<String> {
        assigned_variable(&self.line(file, line)?)
    }

    /// Line `line` (from 1) of `file`, if it can be read.
    pub(crate) fn line(&mut self, file: &str, line: u32) -> Option<String> {
        self.lines(file)?.get((line as usize).checked_sub(1)?).cloned()
    }

    /// Every line of `file`, if it can be read.
    pub(crate) fn lines(&mut self, file: &str) -> Option<&Vec<String>> {
        self.files.entry(file.to_string()).or_insert_with(|| read_lines(file)).as_ref()
    }
}

fn read_lines(file: &str) -> Option<Vec<String>> {
    let known = SOURCE_OF.get().and_then(|source_of| source_of(file));
    let text = known.or_else(|| read_source(std::path::Path::new(file)))?;
    Some(text.lines().map(str::to_string).collect())
}

/// A source file's text, unless it is no plain file or too large to be source.
pub fn read_source(path: &std::path::Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The target of a plain assignment statement (or a Rust `let`), as written.
pub fn assigned_variable(line: &str) -> Option<String> {
    let s = line.trim_start();
    // A Rust program's `let` (the engine's own API), else Python's plain statement.
    let s = s.strip_prefix("let mut ").or_else(|| s.strip_prefix("let ")).unwrap_or(s).trim_start();
    let target_len = s
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map_or(s.len(), |(i, _)| i);
    let target = &s[..target_len];
    let starts_well = target.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_');
    if !starts_well || target.ends_with('.') || target.contains("..") {
        return None;
    }
    let mut rest = s[target_len..].trim_start();
    if let Some(annotated) = rest.strip_prefix(':') {
        rest = &annotated[annotated.find('=')?..];
    }
    let value = rest.strip_prefix('=')?;
    (!value.starts_with('=')).then(|| target.to_string())
}

#[cfg(test)]
mod tests {
    use super::assigned_variable as v;

    #[test]
    fn plain_assignments_name_their_target_and_nothing_else_does() {
        assert_eq!(v("    x = torch.from_numpy(batch).to(dev)  # planted").as_deref(), Some("x"));
        assert_eq!(v("self.cache = torch.cat([self.cache, k])").as_deref(), Some("self.cache"));
        assert_eq!(v("mask: torch.Tensor = ids != 0").as_deref(), Some("mask"));
        assert_eq!(v("    let mut x: Tensor = Tensor::zeros(&[4], F32);").as_deref(), Some("x"));
        for line in [
            "x += 1",
            "a, b = f()",
            "if x == y:",
            "f(x=1)",
            "x[0] = 1",
            "return x",
            "",
            "1 = x",
            "x == y",
        ] {
            assert_eq!(v(line), None, "{line}");
        }
    }
}
