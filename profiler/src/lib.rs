//! xlaprof's profiler: turns the engine's events into a profile and the profile into answers.
//! Its folders depend one way, in the order data flows (`tests/layers.rs` holds it):
//!
//! - [`record`]: the records of a profile, and [`file`], the profile file format (documented
//!   there), written while the program runs;
//! - [`profile`]: the profile model every analysis and view reads, and [`recorder`], which
//!   records a program ([`Recording`], or `XLAPROF_PROFILE=FILE`);
//! - [`analysis`]: what a profile means: [`metrics`], the [`timeline`], [`devices`],
//!   [`diagnostics`] (the findings) and the [`views`] every viewer draws, computed once;
//! - [`output`]: the [`report`], the [`export`]s, and [`merge`] (profiles compared);
//!
//! with [`error`] and [`util`] (small helpers) below them all.

pub mod analysis;
pub mod error;
pub mod output;
pub mod profile;
pub mod record;
pub mod util;

pub use analysis::{breaks, devices, diagnostics, job, metrics, timeline, views};
pub use output::{export, merge, report};
pub use profile::{recorder, variables};
pub use record::file;

pub use analysis::{analyze, Analysis};
pub use diagnostics::Thresholds;
pub use error::{Error, Result};
pub use profile::Profile;
pub use recorder::{init_from_env, whole_program, Recording};

/// Loads a profile file: everything readable, with a warning in `Profile::warnings` for each
/// part that was lost.
pub fn load(path: &std::path::Path) -> Result<Profile> {
    let decoded = file::read(path)?;
    let mut profile = Profile::from_records(decoded.records);
    profile.warnings.extend(decoded.warnings);
    Ok(profile)
}
