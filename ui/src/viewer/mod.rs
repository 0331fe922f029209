//! What the terminal UI and the desktop viewer share: where a profile comes from ([`source`]: a
//! file, a file still being written, a program started with profiling on), what is derived from it
//! for drawing ([`model`]), and the cleaning of every string a profile carries ([`text`]).

pub mod model;
pub mod source;
pub mod text;

pub use model::{Model, TimelineRow};
pub use source::{Program, Source};
pub use xlaprof_profiler::timeline::lane_name;
