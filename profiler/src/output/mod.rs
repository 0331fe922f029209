//! What is made of an analysed profile: the text [`report`], the [`export`]s (JSON, tables,
//! Chrome trace, flamegraph), and [`merge`] (two profiles compared).

pub mod export;
pub mod merge;
pub mod report;
