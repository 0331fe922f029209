//! Rules as assertions for tests and CI: `xlaprof check FILE --rule no-compiles-after-step=3`.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::util::format_ns;

/// A rule a profile must satisfy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Rule {
    /// No compile may happen in a step after this one.
    NoCompilesAfterStep(u64),
    /// At most this many compiles in all.
    MaxCompiles(u64),
    /// At most this many hidden syncs (value reads that ran a graph mid-step).
    MaxHiddenSyncs(u64),
    /// No step after warm-up may take longer (milliseconds).
    MaxStepMs(f64),
    /// No compile may take longer (milliseconds).
    MaxCompileMs(f64),
}

impl Rule {
    /// The names `parse` accepts, for help texts.
    pub const SYNTAX: &'static str =
        "no-compiles-after-step=N | max-compiles=N | max-hidden-syncs=N | max-step-ms=X | max-compile-ms=X";

    /// The rule's name as the user writes it, before `=`.
    pub fn name(&self) -> &'static str {
        match self {
            Rule::NoCompilesAfterStep(_) => "no-compiles-after-step",
            Rule::MaxCompiles(_) => "max-compiles",
            Rule::MaxHiddenSyncs(_) => "max-hidden-syncs",
            Rule::MaxStepMs(_) => "max-step-ms",
            Rule::MaxCompileMs(_) => "max-compile-ms",
        }
    }

    pub fn parse(text: &str) -> Result<Rule> {
        let bad = |reason: &str| Error::Rule { rule: text.to_string(), reason: reason.to_string() };
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| bad(&format!("expected NAME=VALUE, one of: {}", Rule::SYNTAX)))?;
        let int =
            || value.trim().parse::<u64>().map_err(|_| bad("the value must be a whole number"));
        let float = || value.trim().parse::<f64>().map_err(|_| bad("the value must be a number"));
        Ok(match name.trim() {
            "no-compiles-after-step" => Rule::NoCompilesAfterStep(int()?),
            "max-compiles" => Rule::MaxCompiles(int()?),
            "max-hidden-syncs" => Rule::MaxHiddenSyncs(int()?),
            "max-step-ms" => Rule::MaxStepMs(float()?),
            "max-compile-ms" => Rule::MaxCompileMs(float()?),
            _ => return Err(bad(&format!("unknown rule; the rules are: {}", Rule::SYNTAX))),
        })
    }
}

/// A rule as the user writes it (`max-compiles=1`), so reports quote it back in their words.
impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.name();
        match self {
            Rule::NoCompilesAfterStep(n) | Rule::MaxCompiles(n) | Rule::MaxHiddenSyncs(n) => {
                write!(f, "{name}={n}")
            }
            Rule::MaxStepMs(x) | Rule::MaxCompileMs(x) => write!(f, "{name}={x}"),
        }
    }
}

/// Whether a rule held, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleOutcome {
    pub rule: Rule,
    pub passed: bool,
    pub message: String,
}

/// Evaluates each rule against a profile.
pub fn check(p: &Profile, rules: &[Rule], warmup_steps: u64) -> Vec<RuleOutcome> {
    rules
        .iter()
        .map(|rule| {
            let (passed, message) = match rule {
                Rule::NoCompilesAfterStep(n) => {
                    let late: Vec<_> =
                        p.syncs.iter().filter(|s| s.compiled() && s.step > *n).collect();
                    match late.first() {
                        None => (true, format!("no compiles after step {n}")),
                        Some(s) => (
                            false,
                            format!(
                                "{} compiles after step {n}; the first in step {} at {}",
                                late.len(),
                                s.step,
                                p.location(s.location)
                            ),
                        ),
                    }
                }
                Rule::MaxCompiles(n) => {
                    let c = p.compiles.len() as u64;
                    (c <= *n, format!("{c} compiles (at most {n} allowed)"))
                }
                Rule::MaxHiddenSyncs(n) => {
                    let hidden: Vec<_> = p
                        .syncs
                        .iter()
                        .filter(|s| s.cause == crate::record::Cause::ValueRead)
                        .collect();
                    let where_ = hidden
                        .first()
                        .map(|s| format!("; the first at {}", p.location(s.location)))
                        .unwrap_or_default();
                    (
                        hidden.len() as u64 <= *n,
                        format!("{} hidden syncs (at most {n} allowed){where_}", hidden.len()),
                    )
                }
                Rule::MaxStepMs(ms) => {
                    let limit = (ms * 1e6) as u64;
                    let slowest = p
                        .steps
                        .iter()
                        .filter(|s| s.index > warmup_steps)
                        .max_by_key(|s| s.duration_ns());
                    match slowest {
                        Some(s) if s.duration_ns() > limit => (
                            false,
                            format!(
                                "step {} took {} (at most {ms} ms allowed)",
                                s.index,
                                format_ns(s.duration_ns() as f64)
                            ),
                        ),
                        Some(s) => (
                            true,
                            format!(
                                "the slowest step after warm-up took {}",
                                format_ns(s.duration_ns() as f64)
                            ),
                        ),
                        None => (true, "no steps after warm-up".to_string()),
                    }
                }
                Rule::MaxCompileMs(ms) => {
                    let limit = (ms * 1e6) as u64;
                    let slowest = p.compiles.iter().max_by_key(|c| c.duration_ns);
                    match slowest {
                        Some(c) if c.duration_ns > limit => (
                            false,
                            format!(
                                "a compile took {} (at most {ms} ms allowed)",
                                format_ns(c.duration_ns as f64)
                            ),
                        ),
                        _ => (true, format!("every compile took at most {ms} ms")),
                    }
                }
            };
            RuleOutcome { rule: rule.clone(), passed, message }
        })
        .collect()
}
