//! How the side-by-side runners time a row, as the Go program does: run
//! once to warm up, then at least three times and for at least one second,
//! and take the median.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// The median wall time of `run`, in seconds.
pub fn median_of(mut run: impl FnMut() -> usize) -> f64 {
    black_box(run());
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 3 || start.elapsed() < Duration::from_secs(1) {
        let t = Instant::now();
        black_box(run());
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
