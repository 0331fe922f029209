//! Shared by the Xvfb test and the GUI bench (each includes it with `#[path]`): finding a
//! program, and a child process that cannot outlive a failure.

use std::path::{Path, PathBuf};
use std::process::Child;

/// Kills a child process when dropped, so a failing assertion or an early return leaves nothing
/// running.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where `program` is on the `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}
