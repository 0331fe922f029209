//! Where a viewer's profile comes from: a finished file, a file still being written, or a program
//! started with profiling on (`xlaprof run`), whose output is kept for a pane.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use xlaprof_profiler::file::Follower;
use xlaprof_profiler::record::Record;
use xlaprof_profiler::Profile;

use super::text::{clean, clean_record};

/// The program's output lines kept for the pane (older ones are dropped).
const OUTPUT_LINES: usize = 5000;

pub struct Source {
    pub path: PathBuf,
    /// Shared with the models built from it: a record arriving while a model still holds it
    /// copies it once, and a finished file is never copied.
    pub profile: Arc<Profile>,
    /// Follows the file as it grows; `None` once a finished file was read whole.
    follower: Option<Follower>,
    /// Why the file cannot be shown (missing, not a profile); the error screen says it.
    pub error: Option<String>,
    pub program: Option<Program>,
}

impl Source {
    /// A finished profile, read whole (what could be read, with warnings for the rest).
    pub fn open(path: &Path) -> Source {
        let mut source = Source::empty(path);
        match xlaprof_profiler::file::read(path) {
            Ok(decoded) => {
                source.add(decoded.records);
                source.warn(&decoded.warnings);
            }
            Err(e) => source.error = Some(clean(&e.to_string())),
        }
        source
    }

    /// A profile still being written: read what is there, then more at each [`Source::poll`].
    pub fn follow(path: &Path) -> Source {
        let mut source = Source::empty(path);
        source.try_open_follower();
        source.poll();
        source
    }

    /// Starts `command` with profiling on, writing to `path`, and follows its profile.
    pub fn run(path: &Path, command: &[String]) -> std::io::Result<Source> {
        // A profile left from an earlier run must not be shown as this one's.
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let program = Program::start(path, command)?;
        let mut source = Source::empty(path);
        source.program = Some(program);
        Ok(source)
    }

    fn empty(path: &Path) -> Source {
        Source {
            path: path.to_path_buf(),
            profile: Arc::default(),
            follower: None,
            error: None,
            program: None,
        }
    }

    pub fn following(&self) -> bool {
        self.follower.is_some() || self.program.as_ref().is_some_and(|p| p.status.is_none())
    }

    fn try_open_follower(&mut self) {
        match Follower::open(&self.path) {
            Ok(f) => {
                self.follower = Some(f);
                self.error = None;
            }
            // A program may not have created its file yet: keep trying while it runs.
            Err(e) => {
                if self.program.is_none() {
                    self.error = Some(clean(&e.to_string()));
                }
            }
        }
    }

    /// Reads what was appended since the last call; true when the profile changed.
    pub fn poll(&mut self) -> bool {
        if let Some(p) = &mut self.program {
            p.check_exit();
        }
        if self.follower.is_none() && (self.program.is_some() || self.error.is_some()) {
            self.try_open_follower();
        }
        let Some(follower) = &mut self.follower else { return false };
        match follower.poll() {
            Ok(decoded) => {
                let changed = !decoded.records.is_empty() || !decoded.warnings.is_empty();
                self.warn(&decoded.warnings);
                self.add(decoded.records);
                changed
            }
            Err(e) => {
                self.warn(&[format!("{}: reading stopped: {e}", self.path.display())]);
                self.follower = None;
                true
            }
        }
    }

    /// The profile as it is now, to build a model from (no copy).
    pub fn snapshot(&self) -> Arc<Profile> {
        self.profile.clone()
    }

    fn warn(&mut self, warnings: &[String]) {
        if !warnings.is_empty() {
            Arc::make_mut(&mut self.profile).warnings.extend(warnings.iter().map(|w| clean(w)));
        }
    }

    fn add(&mut self, records: Vec<Record>) {
        if records.is_empty() {
            return;
        }
        let profile = Arc::make_mut(&mut self.profile);
        for mut r in records {
            clean_record(&mut r);
            profile.apply(r);
        }
    }
}

/// A program started by `xlaprof run`.
pub struct Program {
    pub command: String,
    child: Child,
    pub output: Arc<Mutex<VecDeque<String>>>,
    pub status: Option<ExitStatus>,
}

impl Program {
    fn start(profile: &Path, command: &[String]) -> std::io::Result<Program> {
        let (name, args) = command.split_first().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command to run")
        })?;
        let mut child = Command::new(name)
            .args(args)
            .env("XLAPROF_PROFILE", profile)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start `{name}`: {e}")))?;
        let output = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = child.stdout.take() {
            keep_lines(out, output.clone());
        }
        if let Some(err) = child.stderr.take() {
            keep_lines(err, output.clone());
        }
        Ok(Program { command: clean(&command.join(" ")), child, output, status: None })
    }

    fn check_exit(&mut self) {
        if self.status.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
            }
        }
    }

    /// Stops the program if it still runs (the user quit the UI).
    pub fn stop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.output.lock().map(|o| o.iter().cloned().collect()).unwrap_or_default()
    }

    /// The last `n` lines, oldest first: what a pane of `n` rows shows, without copying the rest.
    pub fn last_lines(&self, n: usize) -> Vec<String> {
        self.output
            .lock()
            .map(|o| o.iter().skip(o.len().saturating_sub(n)).cloned().collect())
            .unwrap_or_default()
    }
}

/// Reads `from` line by line into `into`, on a thread of its own.
fn keep_lines(from: impl Read + Send + 'static, into: Arc<Mutex<VecDeque<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            let Ok(mut lines) = into.lock() else { break };
            if lines.len() == OUTPUT_LINES {
                lines.pop_front();
            }
            lines.push_back(clean(&line));
        }
    });
}
