//! `xlaprof`: the command line of xlaprof.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use xlaprof_profiler::{file, Thresholds};

use xlaprof::{bench, cli_report, demo, gui, tui};

#[derive(Parser)]
#[command(name = "xlaprof", version, about = "See why lazy-tensor / XLA programs are slow")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Thresholds of the diagnostics, settable on every command that analyses a profile.
#[derive(Args, Clone)]
struct ThresholdArgs {
    /// Steps before which compiles are expected.
    #[arg(long, default_value_t = 2)]
    warmup_steps: u64,
    /// Compiles after warm-up at one call site that make a recompile storm.
    #[arg(long, default_value_t = 3)]
    storm_compiles: u64,
    /// A compile slower than this (milliseconds) is reported.
    #[arg(long, default_value_t = 1000.0)]
    slow_compile_ms: f64,
    /// A step slower than this many times the median step is reported.
    #[arg(long, default_value_t = 2.0)]
    slow_step_factor: f64,
}

impl ThresholdArgs {
    fn thresholds(&self) -> Thresholds {
        Thresholds {
            warmup_steps: self.warmup_steps,
            storm_compiles: self.storm_compiles,
            slow_compile_ns: (self.slow_compile_ms * 1e6) as u64,
            slow_step_factor: self.slow_step_factor,
            ..Thresholds::default()
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Train a small model under the profiler and show the report.
    Demo {
        /// Where to write the profile.
        #[arg(long, default_value = "xlaprof-demo.xlaprof")]
        out: PathBuf,
    },
    /// Print the report of a profile, or export it; a job's (`job.xlaprof`, written by its ranks
    /// as `job.rankN.xlaprof`) reads as one; with --merge, the profiles of a job's processes
    /// however named.
    Report {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Merge the profiles of several processes of one job (text, or chrome: a process per
        /// track group), aligned by their collectives (else by when each started).
        #[arg(long)]
        merge: bool,
        /// text, short, json, csv, parquet, chrome, folded or flamegraph.
        #[arg(long, default_value = "text")]
        format: String,
        /// Write to this file (a folder for csv and parquet) instead of standard output.
        #[arg(short, long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        thresholds: ThresholdArgs,
    },
    /// Open a profile in the terminal UI (or follow one still being written).
    View {
        file: PathBuf,
        /// Keep reading as the file grows.
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        thresholds: ThresholdArgs,
    },
    /// Run a program with profiling on and follow it live in the terminal UI.
    Run {
        /// Where the program's profile goes.
        #[arg(long, default_value = "xlaprof-run.xlaprof")]
        out: PathBuf,
        /// The program is a PyTorch/XLA program: its `import torch_xla` is xlaprof's layer
        /// (`python PROGRAM` runs as `python -m xlaprof.torch_xla PROGRAM`).
        #[arg(long)]
        torch_xla: bool,
        #[command(flatten)]
        thresholds: ThresholdArgs,
        /// The program and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Compare two profiles, metric by metric.
    Diff {
        a: PathBuf,
        b: PathBuf,
        #[command(flatten)]
        thresholds: ThresholdArgs,
    },
    /// Check rules against a profile; exits with 1 when one fails (for CI).
    Check {
        file: PathBuf,
        /// A rule: no-compiles-after-step=N, max-compiles=N, max-hidden-syncs=N, max-step-ms=X,
        /// max-compile-ms=X. Repeat for several.
        #[arg(long = "rule", required = true)]
        rules: Vec<String>,
        #[command(flatten)]
        thresholds: ThresholdArgs,
    },
    /// Open a profile in the desktop viewer (timeline, flamegraph, plots, graphs, diagnostics).
    Gui {
        /// The profile to open (or open one from the window: File > Open, or drop it on it).
        file: Option<PathBuf>,
        /// Keep reading the file as a running program writes it.
        #[arg(long)]
        follow: bool,
        /// Print the time from launch to the first frame drawn, then quit (for benchmarks).
        #[arg(long, hide = true)]
        exit_after_first_frame: bool,
        /// Write a PNG screenshot of the window (File > Export does the same), then quit.
        #[arg(long, hide = true, value_name = "PNG")]
        screenshot: Option<PathBuf>,
    },
    /// Measure the engine: tracing cost, sync overhead, MLP training step.
    Bench {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Repetitions of the chain measurements.
        #[arg(long, default_value_t = 15)]
        reps: usize,
        /// MLP training steps to time.
        #[arg(long, default_value_t = 30)]
        steps: usize,
        /// Also run JAX's peer benchmarks (`bench_b_chain.py`, `bench_c_mlp.py`) from this
        /// folder, in the same session, and print the ratios.
        #[arg(long, value_name = "DIR")]
        jax_peers: Option<PathBuf>,
        /// The Python (with jax installed) that runs them.
        #[arg(long, value_name = "PYTHON", default_value = "python3")]
        jax_python: PathBuf,
    },
    /// Time the first MLP training step of this process (used by `bench` for warm starts).
    #[command(hide = true)]
    BenchFirstStep,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<ExitCode, Box<dyn std::error::Error>> = match cli.command {
        Command::Demo { out } => demo::run(&out).map(|_| ExitCode::SUCCESS),
        Command::Report { files, merge, format, out, thresholds } => {
            match (files.as_slice(), merge) {
                // A job's ranks write `job.rankN.xlaprof` for `job.xlaprof`: read as one.
                ([file], false) if !file::job_files(file).is_empty() => {
                    let ranks = file::job_files(file);
                    cli_report::merged(&ranks, &format, out.as_deref(), &thresholds.thresholds())
                }
                ([file], false) => {
                    cli_report::report(file, &format, out.as_deref(), &thresholds.thresholds())
                }
                (_, false) => {
                    Err("several profiles: give --merge to put them on one timeline".into())
                }
                (files, true) => {
                    cli_report::merged(files, &format, out.as_deref(), &thresholds.thresholds())
                }
            }
            .map(|_| ExitCode::SUCCESS)
        }
        Command::View { file, follow, thresholds } => {
            tui::view(&file, follow, thresholds.thresholds())
        }
        Command::Run { out, torch_xla, thresholds, command } => {
            let command = if torch_xla { tui::with_torch_xla(command) } else { Ok(command) };
            command.and_then(|command| tui::run(&out, &command, thresholds.thresholds()))
        }
        Command::Diff { a, b, thresholds } => {
            cli_report::diff(&a, &b, &thresholds.thresholds()).map(|_| ExitCode::SUCCESS)
        }
        Command::Check { file, rules, thresholds } => {
            cli_report::check_rules(&file, &rules, &thresholds.thresholds())
        }
        Command::Gui { file, follow, exit_after_first_frame, screenshot } => {
            gui::run(gui::Launch { file, follow, exit_after_first_frame, screenshot })
                .map(|_| ExitCode::SUCCESS)
        }
        Command::Bench { json, reps, steps, jax_peers, jax_python } => {
            let jax = jax_peers.as_deref().map(|peers| (jax_python.as_path(), peers));
            bench::run(json, reps, steps, jax).map(|_| ExitCode::SUCCESS)
        }
        Command::BenchFirstStep => bench::first_step_ms()
            .map(|(ms, phases)| println!("{ms}\n{phases}"))
            .map(|_| ExitCode::SUCCESS)
            .map_err(Into::into),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
