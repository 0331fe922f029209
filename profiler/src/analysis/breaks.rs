//! Break on a cause (`XLAPROF_BREAK=recompile,sync`): a listener that asks the engine to end a
//! sync in a break (`xlaprof_core::breaks`) when a call site compiles another graph, saying what
//! changed as the recompile finding does, or when a value read runs the pending graph (a hidden
//! sync). The ops that fall back to the CPU break in the front end (the torch bridge's strict
//! mode), where the op is known before it runs.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use xlaprof_core::events::{self, Event, Listener, SyncCause};

use crate::diagnostics::find_recompiles;
use crate::profile::Profile;
use crate::recorder::SideRecording;

/// What to break on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BreakOn {
    pub recompile: bool,
    pub sync: bool,
}

/// Breaking, while it lives: a recording in memory beside any profile being recorded (what
/// explains a recompile), and the listener.
pub struct Breaking {
    listener: u64,
    _recording: Arc<SideRecording>,
}

impl Drop for Breaking {
    fn drop(&mut self) {
        events::remove_listener(self.listener);
        xlaprof_core::breaks::arm(false);
    }
}

/// Breaks on `on` until the returned value is dropped.
pub fn break_on(on: BreakOn) -> Breaking {
    let recording = Arc::new(SideRecording::start());
    let watcher = Watcher { on, recording: recording.clone(), compiled: Mutex::default() };
    // Registered after the recording: the profile holds a sync's records when it ends.
    let listener = events::add_listener(Arc::new(watcher));
    xlaprof_core::breaks::arm(on.recompile || on.sync);
    Breaking { listener, _recording: recording }
}

struct Watcher {
    on: BreakOn,
    recording: Arc<SideRecording>,
    /// Syncs that missed the cache (they compile).
    compiled: Mutex<HashSet<u64>>,
}

impl Listener for Watcher {
    fn on_event(&self, _at_ns: u64, event: &Event) {
        match event {
            Event::SyncBegin { cause: SyncCause::ValueRead, location, tensors, .. }
                if self.on.sync =>
            {
                xlaprof_core::breaks::request(format!(
                    "XLAPROF_BREAK=sync: a value read at {location} ran the pending graph ({tensors} tensors): a hidden sync, which splits the step's graph and waits for the device; keep the value on the device, or read it after the step"
                ));
            }
            Event::CacheLookup { sync_id, hit: false, .. } if self.on.recompile => {
                self.compiled.lock().unwrap_or_else(|p| p.into_inner()).insert(*sync_id);
            }
            Event::SyncEnd { sync_id, .. } if self.on.recompile => {
                let compiled =
                    self.compiled.lock().unwrap_or_else(|p| p.into_inner()).remove(sync_id);
                if compiled {
                    if let Some(message) = recompiled(&self.recording.snapshot(), *sync_id) {
                        xlaprof_core::breaks::request(message);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Why sync `sync` compiled, if its site compiled another graph before: the recompile the
/// finding explains, with the same words.
fn recompiled(p: &Profile, sync: u64) -> Option<String> {
    let r = find_recompiles(p).into_iter().find(|r| r.sync == sync)?;
    let changes: Vec<String> = r.changes.iter().map(|c| c.sentence()).collect();
    Some(format!(
        "XLAPROF_BREAK=recompile: {} compiled another graph (step {}) because {}",
        p.location(r.location),
        r.step,
        changes.join("; ")
    ))
}
