//! Keeps the plugin's own log lines off the user's terminal.
//!
//! XLA logs through absl straight to file descriptor 2: loading a plugin and creating a client
//! print `WARNING: All log messages before absl::InitializeLog() is called are written to STDERR`
//! and `I0000 ... cpu_device_count set via create_options` on every run. While a plugin is loaded
//! and while a client is created, fd 2 points at `/dev/null`, and `TF_CPP_MIN_LOG_LEVEL` is set
//! to `1` (warnings and errors only) for the rest of the process if the user has not set it.
//! With `XLAPROF_DEBUG` set (to anything but `0` or nothing) neither happens and every line shows.
//!
//! Failures are not lost: PJRT returns them as errors, which xlaprof reports. While fd 2 is
//! redirected, whatever another thread writes to stderr is dropped too, so the window is kept to
//! the plugin's calls, and windows never overlap (a lock), so fd 2 is always restored to the
//! terminal, on every path, panics included, by the guard's `Drop`.

use std::sync::{Mutex, MutexGuard, Once};

/// Whether the plugin's logs are shown: `XLAPROF_DEBUG` set to anything but empty or `0`.
pub(crate) fn plugin_logs_shown() -> bool {
    std::env::var_os(crate::config::DEBUG).is_some_and(|v| {
        let v = v.to_string_lossy();
        let v = v.trim();
        !v.is_empty() && v != "0"
    })
}

/// While alive, stderr (fd 2) goes to `/dev/null`, unless the plugin's logs are shown.
pub(crate) struct QuietStderr {
    saved: Option<imp::SavedFd>,
    _lock: Option<MutexGuard<'static, ()>>,
}

/// One quiet window at a time: two overlapping windows on two threads could otherwise restore fd 2
/// to the other's `/dev/null`.
static WINDOW: Mutex<()> = Mutex::new(());

/// Silences stderr until the returned guard is dropped (see the module's documentation).
pub(crate) fn quiet_stderr() -> QuietStderr {
    if plugin_logs_shown() {
        return QuietStderr { saved: None, _lock: None };
    }
    quiet_tsl_logging();
    let lock = WINDOW.lock().unwrap_or_else(|p| p.into_inner());
    // When the redirect cannot be made (no /dev/null, fd 2 closed), stderr is left as it is.
    QuietStderr { saved: imp::redirect_stderr(), _lock: Some(lock) }
}

impl Drop for QuietStderr {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            imp::restore_stderr(saved);
        }
    }
}

/// `TF_CPP_MIN_LOG_LEVEL=1` unless the user set it: XLA's info lines stay quiet after the window
/// too (compiles log some), warnings and errors still show. Done once, before the first plugin is
/// loaded: the plugin reads it when it starts logging. (Setting a variable races with another
/// thread reading the environment in C; at plugin load, before any client exists, none of
/// xlaprof's threads does.)
fn quiet_tsl_logging() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("TF_CPP_MIN_LOG_LEVEL").is_none() {
            std::env::set_var("TF_CPP_MIN_LOG_LEVEL", "1");
        }
    });
}

#[cfg(unix)]
mod imp {
    use std::ffi::c_int;
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const STDERR: c_int = 2;

    extern "C" {
        fn dup(fd: c_int) -> c_int;
        fn dup2(old: c_int, new: c_int) -> c_int;
    }

    /// A duplicate of the original fd 2, closed when dropped.
    pub(super) struct SavedFd(OwnedFd);

    pub(super) fn redirect_stderr() -> Option<SavedFd> {
        use std::io::Write as _;
        let null = File::options().write(true).open("/dev/null").ok()?;
        let _ = std::io::stderr().flush();
        // SAFETY: `dup` only reads the descriptor table; on failure (fd 2 closed) it returns -1.
        let saved = unsafe { dup(STDERR) };
        if saved < 0 {
            return None;
        }
        // SAFETY: `saved` is a new descriptor that nothing else owns.
        let saved = SavedFd(unsafe { OwnedFd::from_raw_fd(saved) });
        // SAFETY: both descriptors are open; dup2 atomically makes fd 2 a copy of /dev/null's.
        if !retry(|| unsafe { dup2(null.as_raw_fd(), STDERR) }) {
            return None; // fd 2 unchanged; `saved` is closed on drop
        }
        Some(saved)
    }

    pub(super) fn restore_stderr(saved: SavedFd) {
        // SAFETY: `saved` is open (owned here) and fd 2 is open; dup2 points fd 2 back at the
        // original file. Nothing useful can be done if it fails, and it does not for open fds.
        retry(|| unsafe { dup2(saved.0.as_raw_fd(), STDERR) });
    }

    /// Runs a dup2, again while it is interrupted (EINTR) or racing an open (EBUSY).
    fn retry(mut f: impl FnMut() -> c_int) -> bool {
        for _ in 0..100 {
            if f() >= 0 {
                return true;
            }
            let errno = std::io::Error::last_os_error().raw_os_error();
            if !matches!(errno, Some(4 /* EINTR */) | Some(16 /* EBUSY */)) {
                return false;
            }
        }
        false
    }
}

#[cfg(not(unix))]
mod imp {
    pub(super) struct SavedFd;
    pub(super) fn redirect_stderr() -> Option<SavedFd> {
        None
    }
    pub(super) fn restore_stderr(_: SavedFd) {}
}
