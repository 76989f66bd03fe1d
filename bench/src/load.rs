//! The load generator: N workers, each with its own keep-alive connection
//! (or browser), each sending its next request as soon as the previous
//! answer is in and checked (closed loop), for a fixed time after a warm-up.
//! Around the timed window it reads the server's CPU time and peak RSS, the
//! CPU time of the Postgres backends serving its database, and its own.

use std::{collections::VecDeque, time::Duration};

use tokio::time::Instant;

use crate::{
    browser::Browser,
    callgrind,
    client::Conn,
    flows,
    mcp::{self, Expect, Prepared},
    procstat,
    servers::Kind,
};

/// One worker's job.
pub enum Job {
    /// The same MCP request again and again.
    Mcp {
        conn: Conn,
        request: Prepared,
        expect: Expect,
    },
    /// One connect flow per step, each with the next link.
    Flow {
        browser: Browser,
        account: String,
        links: VecDeque<String>,
    },
}

enum Step {
    Ok,
    Failed(String),
    /// No more work (a flow worker out of links).
    Exhausted,
}

impl Job {
    async fn step(&mut self) -> Step {
        match self {
            Job::Mcp {
                conn,
                request,
                expect,
            } => match conn.send(request.request()).await {
                Ok(reply) => match mcp::check(&reply, expect) {
                    Ok(_) => Step::Ok,
                    Err(e) => Step::Failed(e),
                },
                Err(e) => Step::Failed(format!("transport: {e:#}")),
            },
            Job::Flow {
                browser,
                account,
                links,
            } => {
                let Some(link) = links.pop_front() else {
                    return Step::Exhausted;
                };
                match flows::connect_link(browser, &link, account).await {
                    Ok(()) => Step::Ok,
                    Err(e) => Step::Failed(format!("{e:#}")),
                }
            }
        }
    }
}

impl Job {
    /// Runs `n` steps untimed; returns how many succeeded.
    pub async fn repeat(&mut self, n: usize) -> usize {
        let mut ok = 0;
        for _ in 0..n {
            if matches!(self.step().await, Step::Ok) {
                ok += 1;
            }
        }
        ok
    }
}

/// What one worker saw.
#[derive(Default)]
struct Tally {
    ok: u64,
    errors: u64,
    samples: Vec<String>,
    latencies_us: Vec<u32>,
    exhausted: bool,
}

async fn drive(job: &mut Job, until: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < until {
        let started = Instant::now();
        let step = job.step().await;
        let micros = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
        match step {
            Step::Ok => {
                tally.ok += 1;
                tally.latencies_us.push(micros);
            }
            Step::Failed(e) => {
                tally.errors += 1;
                if tally.samples.len() < 3 {
                    tally.samples.push(mcp::clip(&e));
                }
            }
            Step::Exhausted => {
                tally.exhausted = true;
                break;
            }
        }
    }
    tally
}

/// One timed run of one cell.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub ok: u64,
    pub errors: u64,
    pub samples: Vec<String>,
    pub elapsed_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub server_cpu_s: f64,
    /// CPU time of the process answering the server's upstream calls: S4's
    /// demo provider, which every server calls in another process (and
    /// mcp-connect's connect flows in S5).
    pub upstream_cpu_s: f64,
    pub db_cpu_s: Option<f64>,
    pub peak_rss_kb: Option<u64>,
    pub loadgen_cpu_s: f64,
    /// A flow worker ran out of links before the time was up.
    pub dry: bool,
    /// Compiler processes seen at the start and the end of the window.
    pub builds_seen: usize,
    /// `--callgrind`: instructions each server executed in the window.
    pub instructions: Vec<(Kind, u64)>,
}

impl Measured {
    /// Instructions per successful request that server `kind` executed.
    pub fn instructions_per_request(&self, kind: Kind) -> Option<f64> {
        let (_, n) = self.instructions.iter().find(|(k, _)| *k == kind)?;
        (self.ok > 0).then(|| *n as f64 / self.ok as f64)
    }

    pub fn rate(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.ok as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    f64::from(sorted[index]) / 1000.0
}

/// Warms up for `warmup`, then measures for `duration`. `upstream` is the
/// process that answers the server's own outbound calls, if another one.
pub async fn run(
    jobs: &mut [Job],
    warmup: Duration,
    duration: Duration,
    server_pid: u32,
    upstream: Option<u32>,
    database: Option<&str>,
) -> Measured {
    if !warmup.is_zero() {
        let until = Instant::now() + warmup;
        futures::future::join_all(jobs.iter_mut().map(|j| drive(j, until))).await;
    }
    let builds_before = procstat::competing_builds();
    procstat::reset_peak_rss(server_pid);
    let db_pids = database
        .map(procstat::postgres_backends)
        .unwrap_or_default();
    let db_before = procstat::cpu_by_pid(&db_pids);
    let server_before = procstat::cpu_seconds(server_pid).unwrap_or(0.0);
    let upstream_before = upstream.and_then(procstat::cpu_seconds).unwrap_or(0.0);
    let me = std::process::id();
    let me_before = procstat::cpu_seconds(me).unwrap_or(0.0);
    if callgrind::enabled() {
        callgrind::zero();
    }

    let started = Instant::now();
    let tallies =
        futures::future::join_all(jobs.iter_mut().map(|j| drive(j, started + duration))).await;
    let elapsed_s = started.elapsed().as_secs_f64();
    let instructions = if callgrind::enabled() {
        callgrind::dump()
    } else {
        Vec::new()
    };

    let server_cpu_s = procstat::cpu_seconds(server_pid).unwrap_or(0.0) - server_before;
    let upstream_cpu_s = upstream
        .and_then(procstat::cpu_seconds)
        .map_or(0.0, |now| now - upstream_before);
    let loadgen_cpu_s = procstat::cpu_seconds(me).unwrap_or(0.0) - me_before;
    let db_cpu_s = database.map(|db| {
        let pids = procstat::postgres_backends(db);
        procstat::cpu_delta(&db_before, &procstat::cpu_by_pid(&pids))
    });
    let peak_rss_kb = procstat::peak_rss_kb(server_pid);

    let mut latencies: Vec<u32> = Vec::new();
    let mut measured = Measured {
        elapsed_s,
        server_cpu_s,
        upstream_cpu_s,
        db_cpu_s,
        peak_rss_kb,
        loadgen_cpu_s,
        builds_seen: builds_before.max(procstat::competing_builds()),
        instructions,
        ..Measured::default()
    };
    for tally in tallies {
        measured.ok += tally.ok;
        measured.errors += tally.errors;
        measured.dry |= tally.exhausted;
        for s in tally.samples {
            if measured.samples.len() < 5 && !measured.samples.contains(&s) {
                measured.samples.push(s);
            }
        }
        latencies.extend(tally.latencies_us);
    }
    latencies.sort_unstable();
    measured.p50_ms = percentile(&latencies, 50.0);
    measured.p99_ms = percentile(&latencies, 99.0);
    measured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
