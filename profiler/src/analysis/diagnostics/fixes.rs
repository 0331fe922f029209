//! What to change in the user's code, in the user's own words: the line as it reads and as it
//! would, where a finding's cause has one rewrite that is right wherever it applies. A finding
//! whose remedy depends on what the program means (pad or bucket, which value to keep) keeps
//! its advice in prose alone.

use serde::Serialize;

use super::{Diagnostic, GraphChange, Kind};
use crate::profile::variables::SourceFiles;
use crate::profile::Profile;
use crate::record::ShapeRec;

/// A line of the user's code, as it reads and as it would read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CodeFix {
    /// `file:line` of the line to change.
    pub at: String,
    pub before: String,
    pub after: String,
}

impl CodeFix {
    /// The line before and after, each without the indentation they share.
    pub fn trimmed(&self) -> (&str, &str) {
        (self.before.trim(), self.after.trim())
    }
}

/// Gives each finding of `all` whose cause has a rewrite its [`CodeFix`], reading the lines
/// from the user's files by the names the program gave them (a script run as `python train.py`
/// is `train.py`: read from where it ran, as the profile is opened there, or in the program's
/// own process). A finding whose file cannot be read keeps its prose alone.
pub(super) fn attach(p: &Profile, all: &mut [Diagnostic]) {
    let mut sources = SourceFiles::default();
    for d in all.iter_mut() {
        d.fix = fix_for(p, d, &mut sources);
    }
}

fn fix_for(p: &Profile, d: &Diagnostic, sources: &mut SourceFiles) -> Option<CodeFix> {
    let user = *p.callers.get(&d.location_id).unwrap_or(&d.location_id);
    let place = p.locations.get(user as usize)?;
    let (file, line) = (place.file.as_str(), place.line);
    match d.kind {
        Kind::HiddenSync | Kind::HostRead | Kind::GraphBreak => {
            let before = sources.line(file, line)?;
            let after = keep_on_device(&before)?;
            Some(CodeFix { at: format!("{file}:{line}"), before, after })
        }
        Kind::Recompile | Kind::RecompileStorm
            if d.changes.iter().any(last_batch_smaller)
                || guard_saw_a_smaller_batch(&d.message) =>
        {
            loader_fix(file, sources, "drop_last", "True")
        }
        Kind::DataWait => loader_fix(file, sources, "num_workers", "4"),
        _ => None,
    }
}

/// A value read that only adds to a running total or a list, kept on the device instead: the
/// total is read once, where it is printed (`total += loss.item()` → `total += loss.detach()`).
fn keep_on_device(line: &str) -> Option<String> {
    let code = line.split('#').next()?.trim_end();
    let read = code.strip_suffix(".item()").map(|v| (v, ""));
    let read = read.or_else(|| code.strip_suffix(".item())").map(|v| (v, ")")));
    let (value, close) = read?;
    let accumulates = value.contains("+=") || value.trim_start().contains(".append(");
    (accumulates && !value.contains(".item()")).then(|| format!("{value}.detach(){close}"))
}

/// Whether `c` is the batch dimension alone coming in smaller: an epoch's ragged last batch.
fn last_batch_smaller(c: &GraphChange) -> bool {
    let GraphChange::InputShape { from, to, .. } = c else { return false };
    only_first_smaller(from, to)
}

/// Whether a torch.compile guard that failed (quoted in the finding) saw the first dimension of
/// a tensor come in smaller: `size mismatch at index 0. expected 8, actual 4`.
fn guard_saw_a_smaller_batch(message: &str) -> bool {
    let Some((_, rest)) = message.split_once("size mismatch at index 0. expected ") else {
        return false;
    };
    let number = |s: &str| {
        s.chars().take_while(char::is_ascii_digit).collect::<String>().parse::<i64>().ok()
    };
    let Some((expected, actual)) = rest.split_once(", actual ") else { return false };
    matches!((number(expected), number(actual)), (Some(e), Some(a)) if a < e)
}

fn only_first_smaller(from: &ShapeRec, to: &ShapeRec) -> bool {
    from.dtype == to.dtype
        && from.dims.len() == to.dims.len()
        && !to.dims.is_empty()
        && to.dims[0] < from.dims[0]
        && from.dims[1..] == to.dims[1..]
}

/// The one `DataLoader(...)` call of `file` written on one line, given `key=value`; none where
/// the file has no such call or several, or where the call sets `key` already (to anything
/// but a `num_workers=0`, which is replaced).
fn loader_fix(file: &str, sources: &mut SourceFiles, key: &str, value: &str) -> Option<CodeFix> {
    let lines = sources.lines(file)?;
    let mut calls = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.split('#').next().unwrap_or("").contains("DataLoader("));
    let (i, before) = calls.next()?;
    if calls.next().is_some() {
        return None;
    }
    let after = with_argument(before, "DataLoader(", key, value)?;
    Some(CodeFix { at: format!("{file}:{}", i + 1), before: before.clone(), after })
}

/// `line` with `key=value` added to the arguments of the call that opens at `call`, if that call
/// closes on the line and does not set `key` (or sets it to `0`, which is replaced).
fn with_argument(line: &str, call: &str, key: &str, value: &str) -> Option<String> {
    let open = line.find(call)? + call.len();
    let mut depth = 1;
    let close = open
        + line[open..].find(|c| {
            depth += match c {
                '(' | '[' | '{' => 1,
                ')' | ']' | '}' => -1,
                _ => 0,
            };
            depth == 0
        })?;
    let args = &line[open..close];
    let set = args
        .split(',')
        .map(str::trim)
        .find_map(|a| a.strip_prefix(key)?.trim_start().strip_prefix('=').map(str::trim));
    match set {
        Some("0") => {
            let at = open + args.find(&format!("{key}="))?;
            let end = line[at..close].find(',').map_or(close, |c| at + c);
            Some(format!("{}{key}={value}{}", &line[..at], &line[end..]))
        }
        Some(_) => None,
        None if args.trim().is_empty() => {
            Some(format!("{}{key}={value}{}", &line[..close], &line[close..]))
        }
        None => Some(format!("{}, {key}={value}{}", &line[..close], &line[close..])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_only_accumulates_stays_on_the_device() {
        assert_eq!(
            keep_on_device("    total += loss.item()").as_deref(),
            Some("    total += loss.detach()")
        );
        assert_eq!(
            keep_on_device("        losses.append(loss.item())  # for the plot").as_deref(),
            Some("        losses.append(loss.detach())")
        );
        // A read whose value the program uses now is not rewritten: its meaning would change.
        assert_eq!(keep_on_device("    if loss.item() > best:"), None);
        assert_eq!(keep_on_device("    print(loss.item())"), None);
        assert_eq!(keep_on_device("    n = mask.sum().item()"), None);
        assert_eq!(keep_on_device("    total += a.item() + b.item()"), None);
    }

    #[test]
    fn an_argument_goes_into_the_call_it_is_for() {
        let w = |l: &str| with_argument(l, "DataLoader(", "drop_last", "True");
        assert_eq!(
            w("loader = DataLoader(Images(root), batch_size=64)  # train").as_deref(),
            Some("loader = DataLoader(Images(root), batch_size=64, drop_last=True)  # train")
        );
        assert_eq!(
            w("for x in DataLoader(ds):").as_deref(),
            Some("for x in DataLoader(ds, drop_last=True):")
        );
        assert_eq!(w("dl = DataLoader(ds, drop_last=False)"), None);
        // A call that goes on to the next line is not rewritten from half of it.
        assert_eq!(w("loader = DataLoader(Images(), batch_size=8,"), None);
        let n = |l: &str| with_argument(l, "DataLoader(", "num_workers", "4");
        assert_eq!(
            n("DataLoader(ds, num_workers=0, shuffle=True)").as_deref(),
            Some("DataLoader(ds, num_workers=4, shuffle=True)")
        );
        assert_eq!(n("DataLoader(ds, num_workers=2)"), None);
    }

    #[test]
    fn only_the_batch_dimension_coming_in_smaller_is_a_last_batch() {
        let s = |dims: &[i64]| ShapeRec { dtype: "f32".into(), dims: dims.to_vec() };
        assert!(only_first_smaller(&s(&[64, 16]), &s(&[40, 16])));
        assert!(!only_first_smaller(&s(&[40, 16]), &s(&[64, 16])));
        assert!(!only_first_smaller(&s(&[64, 16]), &s(&[64, 8])));
        assert!(!only_first_smaller(&s(&[64, 16]), &s(&[40, 8])));
        let guard =
            |g: &str| guard_saw_a_smaller_batch(&format!("its guard `tensor 'x' {g}` failed"));
        assert!(guard("size mismatch at index 0. expected 8, actual 4"));
        assert!(!guard("size mismatch at index 0. expected 4, actual 8"));
        assert!(!guard("size mismatch at index 1. expected 8, actual 4"));
    }
}
