//! Which pooled connections may be handed out: none opened before one of
//! the server's workers last stopped. Each worker runs a runtime of its
//! own, and a connection is registered with the runtime that opened it:
//! when a worker stops (the server stopping, one by one as their requests
//! drain), the connections it opened die with its runtime, and the pool
//! would hand them to the requests still draining and to the work that
//! runs on after the stop (a refresh, a connect's exchange, a disconnect),
//! which would fail on them. Refused, they are closed and the pool opens
//! new ones. Which worker opened a connection is not known, so a worker's
//! stop refuses every connection opened before it; workers stop only when
//! the server does.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// When a server worker last stopped, shared by the pool and the workers.
#[derive(Debug, Clone)]
pub struct WorkerStops(Arc<LastStop>);

#[derive(Debug)]
struct LastStop {
    epoch: Instant,
    /// Nanoseconds after `epoch` at which a worker last stopped; 0: none
    /// has, every connection serves.
    at: AtomicU64,
}

impl Default for WorkerStops {
    fn default() -> Self {
        Self(Arc::new(LastStop {
            epoch: Instant::now(),
            at: AtomicU64::new(0),
        }))
    }
}

impl WorkerStops {
    /// What each worker holds while it runs: dropped with the worker, it
    /// records the stop.
    pub fn worker_life(&self) -> WorkerLife {
        WorkerLife(self.clone())
    }

    /// Whether a connection opened `age` ago may be handed out.
    pub fn serves(&self, age: Duration) -> bool {
        self.serves_at(self.0.epoch.elapsed(), age)
    }

    fn stopped_at(&self, since_epoch: Duration) {
        let nanos = u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX - 1);
        // The latest stop wins: two workers stopping at once must not move
        // it back.
        self.0
            .at
            .fetch_max(nanos.saturating_add(1), Ordering::Relaxed);
    }

    fn serves_at(&self, now: Duration, age: Duration) -> bool {
        let at = self.0.at.load(Ordering::Relaxed);
        at == 0 || now.saturating_sub(age).as_nanos() >= u128::from(at)
    }
}

/// Held in each worker's application data (`startup::serve`); its drop,
/// when the worker stops, refuses the connections opened before.
pub struct WorkerLife(WorkerStops);

impl Drop for WorkerLife {
    fn drop(&mut self) {
        let stops = &self.0;
        stops.stopped_at(stops.0.epoch.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_a_worker_stops_every_connection_serves_then_only_those_opened_after() {
        let stops = WorkerStops::default();
        let secs = Duration::from_secs;
        assert!(stops.serves_at(secs(100), secs(100)));
        stops.stopped_at(secs(50));
        // Opened at 0 s and at 49 s: refused; at 51 s: served.
        assert!(!stops.serves_at(secs(100), secs(100)));
        assert!(!stops.serves_at(secs(100), secs(51)));
        assert!(stops.serves_at(secs(100), secs(49)));
        // Another worker stops at 80 s.
        stops.stopped_at(secs(80));
        assert!(!stops.serves_at(secs(100), secs(49)));
        assert!(stops.serves_at(secs(100), secs(10)));
    }

    /// Two workers stopping at once: the one that read the earlier time
    /// may record it last.
    #[test]
    fn an_earlier_stop_recorded_last_does_not_move_the_latest_back() {
        let stops = WorkerStops::default();
        let secs = Duration::from_secs;
        stops.stopped_at(secs(80));
        stops.stopped_at(secs(50));
        // Opened at 60 s, before the stop at 80 s: still refused.
        assert!(!stops.serves_at(secs(100), secs(40)));
        assert!(stops.serves_at(secs(100), secs(10)));
    }

    #[test]
    fn a_dropped_worker_life_records_a_stop() {
        let stops = WorkerStops::default();
        assert!(stops.serves(Duration::from_secs(3600)));
        drop(stops.worker_life());
        assert!(!stops.serves(Duration::from_secs(3600)));
    }
}
