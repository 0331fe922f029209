//! Where a viewer's profile comes from: a finished file, a file still being written, or a program
//! started with profiling on (`xlaprof run`), whose output is kept for a pane.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use xlaprof_profiler::file::{self, Follower};
use xlaprof_profiler::record::Record;
use xlaprof_profiler::Profile;

use super::text::{clean, clean_record};

/// The program's output lines kept for the pane (older ones are dropped).
const OUTPUT_LINES: usize = 5000;

pub struct Source {
    /// The profile asked for; a job's (`job.xlaprof`, which no process writes) stands for its
    /// ranks' files beside it (`job.rank0.xlaprof`, ...).
    pub path: PathBuf,
    /// The profile shown (a job's: the shown rank's). Shared with the models built from it: a
    /// record arriving while a model still holds it copies it once, and a finished file is never
    /// copied.
    pub profile: Arc<Profile>,
    /// The files read: the profile's, or each rank's of a job, in rank order.
    feeds: Vec<Feed>,
    /// Which of `feeds` is shown.
    pub shown: usize,
    /// Following files that grow (`follow`, `run`): new ranks' files are picked up as they appear.
    live: bool,
    /// Why the file cannot be shown (missing, not a profile); the error screen says it.
    pub error: Option<String>,
    pub program: Option<Program>,
}

/// One profile file and what was read of it.
struct Feed {
    path: PathBuf,
    profile: Arc<Profile>,
    /// Follows the file as it grows; `None` once a finished file was read whole.
    follower: Option<Follower>,
}

impl Feed {
    fn new(path: PathBuf) -> Feed {
        Feed { path, profile: Arc::default(), follower: None }
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

    /// Reads what was appended since the last call; true when the profile changed.
    fn poll(&mut self) -> bool {
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
}

impl Source {
    /// A finished profile, read whole (what could be read, with warnings for the rest); a job's
    /// ranks' profiles, each read whole.
    pub fn open(path: &Path) -> Source {
        let mut source = Source::empty(path);
        for file in source.files_now() {
            let mut feed = Feed::new(file);
            match xlaprof_profiler::file::read(&feed.path) {
                Ok(decoded) => {
                    feed.add(decoded.records);
                    feed.warn(&decoded.warnings);
                }
                Err(e) if source.feeds.is_empty() && !source.is_job() => {
                    source.error = Some(clean(&e.to_string()))
                }
                Err(e) => feed.warn(&[e.to_string()]),
            }
            source.feeds.push(feed);
        }
        source.show(0);
        source
    }

    /// A profile still being written (or a job's, its ranks' files picked up as they appear):
    /// read what is there, then more at each [`Source::poll`].
    pub fn follow(path: &Path) -> Source {
        let mut source = Source::empty(path);
        source.live = true;
        source.poll();
        source
    }

    /// Starts `command` with profiling on, writing to `path` (a job's ranks beside it), and
    /// follows its profile.
    pub fn run(path: &Path, command: &[String]) -> std::io::Result<Source> {
        // A profile left from an earlier run must not be shown as this one's.
        for old in std::iter::once(path.to_path_buf()).chain(file::job_files(path)) {
            match std::fs::remove_file(&old) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let program = Program::start(path, command)?;
        let mut source = Source::empty(path);
        source.program = Some(program);
        source.live = true;
        Ok(source)
    }

    fn empty(path: &Path) -> Source {
        Source {
            path: path.to_path_buf(),
            profile: Arc::default(),
            feeds: Vec::new(),
            shown: 0,
            live: false,
            error: None,
            program: None,
        }
    }

    /// Whether the profile is a job's: its ranks' files are beside it (the path asked for is
    /// then written by none, or by a launcher that is no rank).
    pub fn is_job(&self) -> bool {
        !file::job_files(&self.path).is_empty()
    }

    /// The files to read now: the profile's, or a job's ranks'.
    fn files_now(&self) -> Vec<PathBuf> {
        let ranks = file::job_files(&self.path);
        if ranks.is_empty() {
            vec![self.path.clone()]
        } else {
            ranks
        }
    }

    /// A job's ranks, each its file and its profile so far (one entry for a single profile).
    pub fn ranks(&self) -> Vec<Arc<Profile>> {
        self.feeds.iter().map(|f| f.profile.clone()).collect()
    }

    /// Shows the `i`th of the job's ranks (wrapping around).
    pub fn show(&mut self, i: usize) {
        self.shown = if self.feeds.is_empty() { 0 } else { i % self.feeds.len() };
        self.profile = self.feeds.get(self.shown).map(|f| f.profile.clone()).unwrap_or_default();
    }

    pub fn following(&self) -> bool {
        let followed = self.feeds.iter().any(|f| f.follower.is_some());
        followed || self.program.as_ref().is_some_and(|p| p.status.is_none())
    }

    /// Opens followers for the files not followed yet (a program may not have created its file
    /// yet, a job's ranks start one by one: keep trying while following).
    fn discover(&mut self) {
        let files = self.files_now();
        // A job's files appeared where a single file was waited for.
        if self.feeds.iter().any(|f| !files.contains(&f.path)) {
            self.feeds.retain(|f| files.contains(&f.path) && f.follower.is_some());
        }
        for file in &files {
            if let Some(feed) = self.feeds.iter().find(|f| f.path == *file) {
                if feed.follower.is_some() || !feed.profile.warnings.is_empty() {
                    continue;
                }
            }
            match Follower::open(file) {
                Ok(follower) => {
                    self.feeds.retain(|f| f.path != *file);
                    let mut feed = Feed::new(file.clone());
                    feed.follower = Some(follower);
                    self.feeds.push(feed);
                    self.error = None;
                }
                Err(e) => {
                    if self.program.is_none() && self.feeds.is_empty() {
                        self.error = Some(clean(&e.to_string()));
                    }
                }
            }
        }
        // Rank order (rank10 after rank9), as `files_now` lists them.
        self.feeds.sort_by_key(|f| files.iter().position(|p| *p == f.path));
    }

    /// Reads what was appended since the last call; true when the profile changed.
    pub fn poll(&mut self) -> bool {
        if let Some(p) = &mut self.program {
            p.check_exit();
        }
        if !self.live {
            return false;
        }
        let before = self.feeds.len();
        self.discover();
        let mut changed = self.feeds.len() != before;
        for feed in &mut self.feeds {
            changed |= feed.poll();
        }
        self.show(self.shown);
        changed
    }

    /// The profile as it is now, to build a model from (no copy).
    pub fn snapshot(&self) -> Arc<Profile> {
        self.profile.clone()
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
