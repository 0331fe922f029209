//! `xlaprof report`, `xlaprof diff` and `xlaprof check`: a profile file in, text or a file out.

use std::path::Path;
use std::process::ExitCode;

use xlaprof_profiler::diagnostics::{check, Rule};
use xlaprof_profiler::export::{self, Format};
use xlaprof_profiler::{analyze, load, merge, report, Analysis, Profile, Thresholds};

type Error = Box<dyn std::error::Error>;

fn open(path: &Path, thresholds: &Thresholds) -> Result<(Profile, Analysis), Error> {
    let profile = load(path)?;
    for w in &profile.warnings {
        eprintln!("xlaprof: {}: {w}", path.display());
    }
    let analysis = analyze(&profile, thresholds);
    Ok((profile, analysis))
}

pub fn report(
    path: &Path,
    format: &str,
    out: Option<&Path>,
    thresholds: &Thresholds,
) -> Result<(), Error> {
    let format = Format::parse(format)
        .ok_or_else(|| format!("unknown format {format:?}: use one of {}", Format::NAMES))?;
    let (profile, analysis) = open(path, thresholds)?;
    match out {
        Some(out) => export::write(&profile, &analysis, format, out)?,
        None if format.is_folder() => {
            return Err(
                "CSV and Parquet export write one file per table: give a folder with -o".into()
            )
        }
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&export::to_bytes(&profile, &analysis, format)?)?;
        }
    }
    Ok(())
}

/// `xlaprof report A B ... --merge`: the profiles of one job's processes, as one report (text)
/// or one trace with a process each (chrome).
pub fn merged(
    paths: &[std::path::PathBuf],
    format: &str,
    out: Option<&Path>,
    thresholds: &Thresholds,
) -> Result<(), Error> {
    let runs = paths.iter().map(|p| open(p, thresholds)).collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<(&Profile, &Analysis)> = runs.iter().map(|(p, a)| (p, a)).collect();
    let processes = merge::place(&refs);
    let bytes = match format {
        "text" => merge::text(&processes).into_bytes(),
        "chrome" => {
            let placed: Vec<(&Profile, u64)> =
                processes.iter().map(|p| (p.profile, p.offset_ns)).collect();
            let mut bytes = Vec::new();
            export::chrome::write_processes(&placed, &mut bytes)?;
            bytes
        }
        other => return Err(format!("--merge writes text or chrome, not {other:?}").into()),
    };
    match out {
        Some(out) => std::fs::write(out, bytes)?,
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&bytes)?;
        }
    }
    Ok(())
}

pub fn diff(a: &Path, b: &Path, thresholds: &Thresholds) -> Result<(), Error> {
    let (_, a) = open(a, thresholds)?;
    let (_, b) = open(b, thresholds)?;
    print!("{}", report::diff(&a, &b));
    Ok(())
}

/// Exit code 1 when a rule fails (for CI), 0 when all hold.
pub fn check_rules(
    path: &Path,
    rules: &[String],
    thresholds: &Thresholds,
) -> Result<ExitCode, Error> {
    let rules: Vec<Rule> = rules.iter().map(|r| Rule::parse(r)).collect::<Result<_, _>>()?;
    if rules.is_empty() {
        return Err(format!("give at least one --rule: {}", Rule::SYNTAX).into());
    }
    let (profile, _) = open(path, thresholds)?;
    let outcomes = check(&profile, &rules, thresholds.warmup_steps);
    for o in &outcomes {
        println!("{} {}: {}", if o.passed { "pass" } else { "FAIL" }, o.rule, o.message);
    }
    Ok(if outcomes.iter().all(|o| o.passed) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
