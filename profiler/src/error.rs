//! The one error type of `xlaprof-profiler`.

use std::path::{Path, PathBuf};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("not an xlaprof profile (the file does not start with the XLAPROF header)")]
    NotAProfile,

    #[error("the profile was written in format version {version} by a newer xlaprof; this one reads up to version {supported}")]
    NewerFormat { version: u16, supported: u16 },

    /// A file that is not a profile, or one too new to read, named (the reader of bytes cannot).
    #[error("{source}: {path}")]
    InFile { path: PathBuf, source: Box<Error> },

    #[error(
        "a profile is already being recorded in this process (by another Recording, or by \
         XLAPROF_PROFILE): stop that one first"
    )]
    AlreadyRecording,

    #[error("invalid rule {rule:?}: {reason}")]
    Rule { rule: String, reason: String },

    #[error("cannot export {what}: {reason}")]
    Export { what: &'static str, reason: String },

    #[error(transparent)]
    Engine(#[from] xlaprof_core::Error),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io { path: path.to_path_buf(), source }
    }

    /// `self`, saying which file it is about (I/O errors already do).
    pub(crate) fn in_file(self, path: &Path) -> Error {
        match self {
            Error::Io { .. } | Error::InFile { .. } => self,
            other => Error::InFile { path: path.to_path_buf(), source: Box::new(other) },
        }
    }
}
