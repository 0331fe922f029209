//! `xlaprof`: the command line of xlaprof.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod demo;

#[derive(Parser)]
#[command(name = "xlaprof", version, about = "See why lazy-tensor / XLA programs are slow")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile and run a small program on the XLA CPU plugin, with results and timings.
    Demo,
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
    },
    /// Time the first MLP training step of this process (used by `bench` for warm starts).
    #[command(hide = true)]
    BenchFirstStep,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo => demo::run(),
        Command::Bench { json, reps, steps } => bench::run(json, reps, steps).map_err(Into::into),
        Command::BenchFirstStep => {
            bench::first_step_ms().map(|ms| println!("{ms}")).map_err(Into::into)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
