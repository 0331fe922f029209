//! xlaprof's profiler: turns the engine's events into a profile and the profile into answers.
//!
//! - [`recorder`]: record a program ([`Recording`], or `XLAPROF_PROFILE=FILE`);
//! - [`file`]: the profile file format (documented there), written while the program runs;
//! - [`profile`]: the profile model every analysis and view reads;
//! - [`views`]: the per-step and per-graph tables the viewers draw.

pub mod analysis;
pub mod devices;
pub mod diagnostics;
pub mod error;
pub mod export;
pub mod file;
pub mod merge;
pub mod metrics;
pub mod profile;
pub mod record;
pub mod recorder;
pub mod report;
pub mod timeline;
pub mod variables;
pub mod views;

pub use analysis::{analyze, Analysis};
pub use diagnostics::Thresholds;
pub use error::{Error, Result};
pub use profile::Profile;
pub use recorder::{init_from_env, Recording};

/// Loads a profile file: everything readable, with a warning in `Profile::warnings` for each
/// part that was lost.
pub fn load(path: &std::path::Path) -> Result<Profile> {
    let decoded = file::read(path)?;
    let mut profile = Profile::from_records(decoded.records);
    profile.warnings.extend(decoded.warnings);
    Ok(profile)
}
