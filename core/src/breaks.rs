//! Break on a cause (`XLAPROF_BREAK`): a listener that can explain what a sync did (the
//! profiler's, which knows why a site compiled again) asks for a break while the sync runs;
//! the sync finishes (nothing pending is lost) and the call that made it returns
//! [`Error::Break`] with the explanation, an exception at the user's line in Python.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

static ARMED: AtomicBool = AtomicBool::new(false);
static PENDING: Mutex<Option<String>> = Mutex::new(None);

/// Turns breaking on or off (off drops a break not yet taken).
pub fn arm(on: bool) {
    ARMED.store(on, Ordering::Relaxed);
    if !on {
        *PENDING.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Asks the sync running now to end in a break with `message` (the first asked wins).
pub fn request(message: String) {
    if ARMED.load(Ordering::Relaxed) {
        PENDING.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(message);
    }
}

/// After a sync: the break it was asked for, if any, at the caller's line. One atomic load when
/// none is armed.
#[track_caller]
pub(crate) fn take() -> Result<()> {
    if !ARMED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let taken = PENDING.lock().unwrap_or_else(|p| p.into_inner()).take();
    match taken {
        Some(message) => {
            let here = crate::location::SourceLocation::caller();
            crate::events::caught(crate::events::Tool::Break, &message, here);
            Err(Error::Break { message })
        }
        None => Ok(()),
    }
}
