//! `bench --shared-lines`: what the values every request writes cost when
//! two threads share them, against a copy per thread (`src/shards.rs`).
//! Two threads each run the writes an MCP request made to values the
//! whole instance shared before they were kept per thread — a child of the
//! rmcp service's cancellation token (made and dropped), a clone and drop
//! of an `Arc`, a lock of a `Mutex` (the verified-token cache), three
//! counter adds (the request metrics) — with some work of their own
//! between requests, as a worker has. The table is the time per request
//! beyond that work, in nanoseconds: the median of several runs.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio_util::sync::CancellationToken;

/// Requests per thread and run.
const REQUESTS: u32 = 200_000;
/// Runs per cell; the median is shown.
const RUNS: usize = 5;

/// What a request wrote that the instance shared.
struct Written {
    service_token: CancellationToken,
    handler: Arc<String>,
    cache: Mutex<u64>,
    counters: [AtomicU64; 3],
}

impl Written {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            service_token: CancellationToken::new(),
            handler: Arc::new(String::from("handler")),
            cache: Mutex::new(0),
            counters: Default::default(),
        })
    }

    fn one_request(&self) {
        let child = self.service_token.child_token();
        let handler = Arc::clone(&self.handler);
        *self.cache.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        for counter in &self.counters {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        std::hint::black_box(&handler);
        drop(handler);
        drop(child);
    }
}

/// Busy for `work` (a request's own work, touching nothing shared).
fn work_for(work: Duration) {
    let started = Instant::now();
    while started.elapsed() < work {
        std::hint::spin_loop();
    }
}

/// Nanoseconds per request beyond `work`, two threads, the values shared
/// or one copy each.
fn one_run(shared: bool, work: Duration) -> f64 {
    let one = Written::new();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let written = if shared { one.clone() } else { Written::new() };
            scope.spawn(move || {
                for _ in 0..REQUESTS {
                    written.one_request();
                    work_for(work);
                }
            });
        }
    });
    let per_request = started.elapsed().as_nanos() as f64 / f64::from(REQUESTS);
    per_request - work.as_nanos() as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The table, in markdown.
pub fn table() -> String {
    let mut out = String::from(
        "| work between requests | shared, ns per request | one copy per thread, ns per request | saved |\n|--:|--:|--:|--:|\n",
    );
    for micros in [0u64, 2, 10, 30] {
        let work = Duration::from_micros(micros);
        let (mut shared, mut own) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            shared.push(one_run(true, work));
            own.push(one_run(false, work));
        }
        let (shared, own) = (median(shared), median(own));
        out.push_str(&format!(
            "| {micros} µs | {shared:.0} | {own:.0} | {:.0} |\n",
            shared - own
        ));
    }
    out
}
