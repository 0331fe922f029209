//! The views of xlaprof as a library, so the command line (`main.rs`), its tests and its benches
//! share them: the demo, reports and benches behind the subcommands, the terminal UI, the desktop
//! viewer, and what the two viewers share.

pub mod bench;
pub mod cli_report;
pub mod demo;
pub mod gui;
pub mod tui;
pub mod viewer;
