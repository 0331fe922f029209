//! The terminal UI in a real terminal: tmux runs `xlaprof run -- recompile_demo`, keys are sent
//! as a user would type them, and `capture-pane` shows what is on the screen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out =
        Command::new("tmux").args(args).output().expect("tmux runs (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "tmux {args:?}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The sample program next to this package's binary, built when it is not there yet.
fn sample(name: &str) -> PathBuf {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_xlaprof")).parent().unwrap().to_path_buf();
    let path = bin_dir.join(name);
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "xlaprof-samples", "--bin", name])
            .status()
            .unwrap();
        assert!(status.success(), "building {name}");
    }
    assert!(path.exists(), "the sample {name} is not at {}", path.display());
    path
}

struct Session(String);

impl Session {
    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-t", &self.0])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.0];
        args.extend_from_slice(keys);
        tmux(&args);
    }

    /// Waits until the screen shows `text`, and returns it.
    fn wait_for(&self, text: &str, within: Duration) -> String {
        self.wait(within, |screen| screen.contains(text), &format!("{text:?} to show"))
    }

    fn wait_until_gone(&self, text: &str, within: Duration) {
        self.wait(within, |screen| !screen.contains(text), &format!("{text:?} to go"));
    }

    /// Polls the screen until `done` holds for it, and returns that screen.
    fn wait(&self, within: Duration, done: impl Fn(&str) -> bool, what: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < within,
                "waited {within:?} for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Unchecked: the session may be gone already, and a panic while a failed test unwinds
        // would abort the run.
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).output();
    }
}

#[test]
fn run_follows_a_real_program_live_and_keeps_its_final_state() {
    let demo = sample("recompile_demo");
    // Made before the session, so it is dropped after it: the session's programs write here.
    let dir = tempfile::Builder::new().prefix("xlaprof-tmux-").tempdir().unwrap();
    let profile = dir.path().join("run.xlaprof");
    let name = format!("xlaprof-e2e-{}", std::process::id());
    // The shell stays after xlaprof exits, so what it printed then can be read from the pane.
    let line = format!(
        "{} run --out {} -- {} 300; echo exit=$?; sleep 30",
        env!("CARGO_BIN_EXE_xlaprof"),
        profile.display(),
        demo.display(),
    );
    tmux(&["new-session", "-d", "-s", &name, "-x", "120", "-y", "40", "sh", "-c", &line]);
    let s = Session(name);

    // The whole first frame: tmux can capture the pane while the frame is still being drawn.
    let live = s.wait(
        Duration::from_secs(60),
        |screen| screen.contains("● running") && screen.contains("output of"),
        "the live view with the program's output pane",
    );
    assert!(live.contains("1 Overview"), "{live}");

    // Views by number and by Tab, the help overlay, and back.
    s.keys(&["2"]);
    s.wait_for("Graphs: every distinct graph", Duration::from_secs(10));
    s.keys(&["Tab"]);
    s.wait_for("timeline", Duration::from_secs(10));
    s.keys(&["?"]);
    s.wait_for("pause live updates", Duration::from_secs(10));
    // A terminal cannot tell Esc from the start of the next key's sequence: wait for it to land.
    s.keys(&["Escape"]);
    s.wait_until_gone("pause live updates", Duration::from_secs(10));
    s.keys(&["5"]);
    s.wait_for("Diagnostics, most costly first", Duration::from_secs(10));

    // The program ends; the last state stays on the screen with its exit status.
    s.keys(&["1"]);
    s.wait_for("■ exited 0", Duration::from_secs(120));
    // The views catch up with the last records a moment after the exit.
    // (the findings below are drawn in the same frame: wait for its end too, as for the first)
    let done = s.wait(
        Duration::from_secs(20),
        |screen| screen.contains("steps 300") && screen.contains("recompile_demo.rs:"),
        "the last state with its findings",
    );
    assert!(done.contains("■ exited 0"), "{done}");
    assert!(done.contains("recompile"), "the findings of the run: {done}");
    assert!(done.contains("recompile_demo.rs:"), "source lines of the program: {done}");

    s.keys(&["q"]);
    let printed = s.wait_for("exit=", Duration::from_secs(20));
    assert!(printed.contains("exit=0"), "{printed}");
    assert!(printed.contains("signatures"), "the program's own output, passed through: {printed}");
    assert!(printed.contains("exited 0; profile in"), "{printed}");
    let p = xlaprof_profiler::load(&profile).unwrap();
    assert_eq!(p.steps.len(), 300);
}

#[test]
fn view_of_a_missing_file_shows_an_error_screen_and_quits_cleanly() {
    let name = format!("xlaprof-e2e-missing-{}", std::process::id());
    let line =
        format!("{} view /nonexistent/profile.xlaprof; sleep 30", env!("CARGO_BIN_EXE_xlaprof"));
    tmux(&["new-session", "-d", "-s", &name, "-x", "80", "-y", "24", "sh", "-c", &line]);
    let s = Session(name);
    let screen = s.wait_for("cannot show this profile", Duration::from_secs(20));
    assert!(screen.contains("/nonexistent/profile.xlaprof"), "{screen}");
    s.keys(&["q"]);
    // Back at the shell's `sleep`: the alternate screen is gone.
    s.wait_until_gone("cannot show this profile", Duration::from_secs(10));
}
