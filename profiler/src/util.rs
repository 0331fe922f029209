//! Small helpers every layer uses: saturating totals, and durations and sizes as people read them.

/// The sum of `values`, `u64::MAX` where it would overflow.
pub fn saturating_sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

/// `1.234ms`, `56.7µs`, `2.1s`: durations as people read them.
pub fn format_ns(ns: f64) -> String {
    // -0.0 (a sum of nothing, negated) reads as 0.
    let ns = if ns == 0.0 { 0.0 } else { ns };
    if ns >= 1e9 {
        format!("{:.3}s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3}µs", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

pub fn format_bytes(b: f64) -> String {
    if b >= (1u64 << 30) as f64 {
        format!("{:.2}GB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2}MB", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.2}KB", b / 1024.0)
    } else {
        format!("{b:.0}B")
    }
}
