//! `xlaprof`: the command line of xlaprof.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;

#[derive(Parser)]
#[command(
    name = "xlaprof",
    version,
    about = "See why lazy-tensor / XLA programs are slow"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile and run a small program on the XLA CPU plugin, with results and timings.
    Demo,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo => demo::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
