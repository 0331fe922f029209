//! The terminal UI: `xlaprof view FILE` opens a profile (or follows one being written), and
//! `xlaprof run -- CMD` starts a program with profiling on and follows it live.
//!
//! The profile comes from a [`crate::viewer::Source`] and is drawn from a [`crate::viewer::Model`]
//! (both shared with the desktop viewer); [`app`] is the state and its keys, [`draw`] draws it.

mod app;
mod draw;
mod tables;

use std::io::{stdout, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::prelude::CrosstermBackend;
use ratatui::Terminal;
use xlaprof_profiler::Thresholds;

use crate::viewer::Source;
pub use app::{App, Tab};
pub use draw::frame;

/// How often a live profile is read while nothing else happens.
pub const POLL: Duration = Duration::from_millis(50);

type Error = Box<dyn std::error::Error>;

pub fn view(path: &Path, follow: bool, thresholds: Thresholds) -> Result<ExitCode, Error> {
    let source = if follow { Source::follow(path) } else { Source::open(path) };
    interact(App::new(source, thresholds))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `command` under the profiler; the exit code is the program's.
pub fn run(out: &Path, command: &[String], thresholds: Thresholds) -> Result<ExitCode, Error> {
    let source = Source::run(out, command)?;
    let mut app = interact(App::new(source, thresholds))?;
    let Some(program) = app.source.program.as_mut() else { return Ok(ExitCode::SUCCESS) };
    program.stop();
    // The program's output, passed through now that the screen is the user's again.
    let mut out = stdout().lock();
    for line in program.lines() {
        writeln!(out, "{line}")?;
    }
    let status = program.status.map(draw::exit_text).unwrap_or_else(|| "stopped".into());
    eprintln!("xlaprof: `{}` {status}; profile in {}", program.command, app.source.path.display());
    Ok(match program.status.and_then(|s| s.code()) {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(code.clamp(1, 255) as u8),
        None => ExitCode::from(1),
    })
}

/// `python PROGRAM ARGS` as `python -m xlaprof.torch_xla PROGRAM ARGS`: a PyTorch/XLA program,
/// its `import torch_xla` resolved to xlaprof's layer (`xlaprof run --torch-xla`).
pub fn with_torch_xla(mut command: Vec<String>) -> Result<Vec<String>, Error> {
    let is_python = command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"));
    if !is_python {
        return Err(format!(
            "--torch-xla runs a Python program: `xlaprof run --torch-xla -- python train.py`, not `{}`",
            command.join(" ")
        )
        .into());
    }
    command.splice(1..1, ["-m".to_string(), "xlaprof.torch_xla".to_string()]);
    Ok(command)
}

/// Puts the terminal back as it was: on the way out, and from the panic hook.
fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout(),
        LeaveAlternateScreen,
        DisableMouseCapture,
        ratatui::crossterm::cursor::Show
    );
}

fn interact(mut app: App) -> Result<App, Error> {
    if !stdout().is_terminal() {
        return Err(
            "the terminal UI needs a terminal (for a text report: xlaprof report FILE)".into()
        );
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
    enable_raw_mode()?;
    execute!(stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    let result = event_loop(&mut app);
    restore_terminal();
    let _ = std::panic::take_hook();
    result.map(|_| app)
}

fn event_loop(app: &mut App) -> Result<(), Error> {
    let mut terminal = Terminal::new(CrosstermBackend::new(stdout()))?;
    terminal.clear()?;
    let mut dirty = true;
    while !app.quit {
        if dirty {
            terminal.draw(|f| draw::frame(f, app))?;
        }
        dirty = false;
        if event::poll(POLL)? {
            // Handle everything queued before drawing again (fast scrolling stays responsive).
            loop {
                app.on_event(event::read()?);
                if app.quit || !event::poll(Duration::ZERO)? {
                    break;
                }
            }
            dirty = true;
        }
        dirty |= app.tick();
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
