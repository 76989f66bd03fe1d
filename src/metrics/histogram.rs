//! A latency histogram of atomics: fixed buckets, one atomic add for the
//! bucket and one for the sum per observation, no lock. Buckets hold their
//! own count (not the running total Prometheus shows), so an observation
//! touches one bucket; the exposition adds them up.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// Upper bounds in microseconds, with their `le` label (seconds). MCP
/// requests take well under a millisecond when they only read the
/// database, and seconds when a tool waits for a provider or a connection.
pub const BUCKETS: [(u64, &str); 14] = [
    (500, "0.0005"),
    (1_000, "0.001"),
    (2_500, "0.0025"),
    (5_000, "0.005"),
    (10_000, "0.01"),
    (25_000, "0.025"),
    (50_000, "0.05"),
    (100_000, "0.1"),
    (250_000, "0.25"),
    (500_000, "0.5"),
    (1_000_000, "1"),
    (2_500_000, "2.5"),
    (5_000_000, "5"),
    (10_000_000, "10"),
];

#[derive(Default)]
pub struct Histogram {
    /// One count per bucket of [`BUCKETS`], then the count above the last.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

/// What a scrape reads from a [`Histogram`].
pub struct Snapshot {
    /// Observations at or below each bound of [`BUCKETS`] (running totals).
    pub cumulative: [u64; BUCKETS.len()],
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BUCKETS.partition_point(|(bound, _)| *bound < micros);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub fn snapshot(&self) -> Snapshot {
        Self::snapshot_of(std::iter::once(self))
    }

    /// One snapshot of several histograms of the same thing (the shards
    /// of one, see `crate::shards`), as if they were one. The count is the
    /// sum of the buckets read, so `+Inf` always equals `_count` even while
    /// requests are being counted.
    pub fn snapshot_of<'a>(histograms: impl Iterator<Item = &'a Histogram> + Clone) -> Snapshot {
        let total = |i: usize| -> u64 {
            histograms
                .clone()
                .map(|h| h.counts[i].load(Ordering::Relaxed))
                .sum()
        };
        let mut cumulative = [0; BUCKETS.len()];
        let mut running = 0u64;
        for (i, total_at) in cumulative.iter_mut().enumerate() {
            running += total(i);
            *total_at = running;
        }
        let count = running + total(BUCKETS.len());
        let sum_micros: u64 = histograms
            .map(|h| h.sum_micros.load(Ordering::Relaxed))
            .sum();
        Snapshot {
            cumulative,
            count,
            sum_seconds: sum_micros as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500)); // le="0.0005": bounds are inclusive
        h.observe(Duration::from_micros(501)); // le="0.001"
        h.observe(Duration::from_millis(3)); // le="0.005"
        h.observe(Duration::from_secs(60)); // only +Inf
        let s = h.snapshot();
        assert_eq!(s.cumulative[0], 1);
        assert_eq!(s.cumulative[1], 2);
        assert_eq!(s.cumulative[2], 2);
        assert_eq!(s.cumulative[3], 3);
        assert_eq!(s.cumulative[BUCKETS.len() - 1], 3);
        assert_eq!(s.count, 4);
        assert!(
            (s.sum_seconds - 60.004_001).abs() < 1e-9,
            "{}",
            s.sum_seconds
        );
    }

    #[test]
    fn bounds_ascend_and_match_their_labels() {
        for pair in BUCKETS.windows(2) {
            assert!(pair[0].0 < pair[1].0);
        }
        for (micros, label) in BUCKETS {
            let seconds: f64 = label.parse().unwrap();
            assert!((seconds * 1e6 - micros as f64).abs() < 1e-6, "{label}");
        }
    }
}
