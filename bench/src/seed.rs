//! S6's data: seeding the run's database with `bench/sql/seed.sql` (parts
//! run on as many connections as there are cores), and what the seeded
//! tables weigh per row.

use std::{path::Path, time::Instant};

use futures::StreamExt;

use crate::psql::{self, Script};

/// How many rows S6 seeds; the full scale is the issue's.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub users: u64,
    pub audit: u64,
    pub tickets: u64,
    pub sessions: u64,
    /// Expired tickets for the sweeper.
    pub backlog: u64,
    /// Audit rows past retention for the sweeper.
    pub old_audit: u64,
}

impl Scale {
    /// `fraction` of 200,000 users × 5 providers, 10,000,000 audit rows,
    /// 200,000 live tickets, 100,000 web sessions, and for the sweeper
    /// 60,000 expired tickets and 60,000 audit rows past retention (at
    /// least one of each). The sweeper's backlog is sized for its paced
    /// sweep to end well inside `--sweep-limit` (90 s) on a slow day: at
    /// its rest of twelve times each batch, 2,700–4,000 rows a second under
    /// S3's load, so 30–45 s. Both kinds of deletes are then measured, to
    /// the end, and the full run keeps within its quarter hour.
    pub fn of(fraction: f64) -> Self {
        let n = |full: f64| ((full * fraction).round() as u64).max(1);
        Scale {
            users: n(200_000.0),
            audit: n(10_000_000.0),
            tickets: n(200_000.0),
            sessions: n(100_000.0),
            backlog: n(60_000.0),
            old_audit: n(60_000.0),
        }
    }
}

/// `n` rows as `pieces` ranges `lo..=hi` (1-based).
fn pieces(n: u64, pieces: u64) -> Vec<(u64, u64)> {
    let size = n.div_ceil(pieces.max(1)).max(1);
    (0..n.div_ceil(size))
        .map(|i| (i * size + 1, ((i + 1) * size).min(n)))
        .collect()
}

async fn part(
    url: &str,
    root: &Path,
    scale: Scale,
    issuer: &str,
    (name, lo, hi): (&str, u64, u64),
) -> anyhow::Result<()> {
    let vars = [
        ("users", scale.users.to_string()),
        ("audit", scale.audit.to_string()),
        ("old_audit", scale.old_audit.to_string()),
        ("retention", retention_days().to_string()),
        ("issuer", issuer.to_owned()),
        ("part", name.to_owned()),
        ("lo", lo.to_string()),
        ("hi", hi.to_string()),
    ];
    psql::run(url, &vars, Script::File(&root.join("bench/sql/seed.sql"))).await?;
    Ok(())
}

/// Seeds the database at `url`; returns the seconds it took (inserts, then
/// VACUUM and ANALYZE) and then the seconds of the CHECKPOINT that follows, so that
/// the measurements after it do not pay for writing the seed out.
pub async fn data(
    url: &str,
    root: &Path,
    scale: Scale,
    issuer: &str,
) -> anyhow::Result<(f64, f64)> {
    let started = Instant::now();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    // The audit rows are most of the work: pieces for every connection.
    let mut jobs: Vec<(&str, u64, u64)> = Vec::new();
    for (lo, hi) in pieces(scale.audit, 2 * cores as u64) {
        jobs.push(("audit", lo, hi));
    }
    for (lo, hi) in pieces(scale.users, 2) {
        jobs.push(("connections", lo, hi));
    }
    jobs.push(("tickets", 1, scale.tickets));
    jobs.push(("sessions", 1, scale.sessions));
    let done: Vec<anyhow::Result<()>> = futures::stream::iter(jobs)
        .map(|job| part(url, root, scale, issuer, job))
        .buffer_unordered(cores)
        .collect()
        .await;
    done.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    part(url, root, scale, issuer, ("analyze", 0, 0)).await?;
    let seeded = started.elapsed().as_secs_f64();
    let started = Instant::now();
    psql::value(url, "CHECKPOINT").await?;
    Ok((seeded, started.elapsed().as_secs_f64()))
}

/// The audit retention of the server under measurement (`mcp-connect dev`
/// runs with the default).
pub fn retention_days() -> u32 {
    mcp_connect::config::AuditSettings::default().retention_days
}

/// Adds the sweeper's backlog, expired tickets and audit rows past
/// retention; returns the seconds.
pub async fn backlog(url: &str, root: &Path, scale: Scale, issuer: &str) -> anyhow::Result<f64> {
    let started = Instant::now();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut jobs: Vec<(&str, u64, u64)> = Vec::new();
    for (lo, hi) in pieces(scale.backlog, cores as u64) {
        jobs.push(("backlog", lo, hi));
    }
    for (lo, hi) in pieces(scale.old_audit, cores as u64) {
        jobs.push(("old_audit", lo, hi));
    }
    let done: Vec<anyhow::Result<()>> = futures::stream::iter(jobs)
        .map(|job| part(url, root, scale, issuer, job))
        .buffer_unordered(cores)
        .collect()
        .await;
    done.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    psql::value(url, "ANALYZE connect_tickets, audit_events").await?;
    Ok(started.elapsed().as_secs_f64())
}

/// What is left of the sweeper's backlog: expired tickets past the grace
/// and audit rows past retention.
pub async fn backlog_left(url: &str) -> anyhow::Result<(u64, u64)> {
    let line = psql::value(
        url,
        &format!(
            "SELECT (SELECT count(*) FROM connect_tickets WHERE expires_at < now() - interval '1 hour'), \
                    (SELECT count(*) FROM audit_events WHERE at < now() - interval '{} days')",
            retention_days()
        ),
    )
    .await?;
    let f: Vec<u64> = line.split('|').filter_map(|v| v.parse().ok()).collect();
    match f[..] {
        [tickets, audit] => Ok((tickets, audit)),
        _ => Err(anyhow::anyhow!(
            "unexpected answer counting the backlog: {line}"
        )),
    }
}

/// One table's weight on the seeded database.
pub struct Weight {
    pub unit: &'static str,
    pub table: &'static str,
    pub rows: u64,
    /// Heap, TOAST and every index (`pg_total_relation_size`).
    pub total: u64,
    /// The indexes alone (`pg_indexes_size`).
    pub indexes: u64,
}

impl Weight {
    pub fn per_row(&self) -> f64 {
        self.total as f64 / self.rows.max(1) as f64
    }
}

/// Bytes per unit: each table's total size over its exact row count.
pub async fn weights(url: &str) -> anyhow::Result<Vec<Weight>> {
    let mut out = Vec::new();
    for (unit, table) in [
        ("connection", "connections"),
        ("client grant", "client_grants"),
        ("live ticket", "connect_tickets"),
        ("audit row", "audit_events"),
        ("web session", "web_sessions"),
    ] {
        let line = psql::value(
            url,
            &format!(
                "SELECT count(*), pg_total_relation_size('{table}'), pg_indexes_size('{table}') FROM {table}"
            ),
        )
        .await?;
        let f: Vec<u64> = line.split('|').filter_map(|v| v.parse().ok()).collect();
        if let [rows, total, indexes] = f[..] {
            out.push(Weight {
                unit,
                table,
                rows,
                total,
                indexes,
            });
        }
    }
    Ok(out)
}

/// The server's WAL position in bytes (`pg_current_wal_lsn()`).
pub async fn wal_position(url: &str) -> anyhow::Result<u64> {
    Ok(
        psql::value(url, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
            .await?
            .parse::<f64>()? as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_range_once() {
        assert_eq!(pieces(10, 3), [(1, 4), (5, 8), (9, 10)]);
        assert_eq!(pieces(1, 4), [(1, 1)]);
        assert_eq!(pieces(8, 4), [(1, 2), (3, 4), (5, 6), (7, 8)]);
        let s = Scale::of(1.0);
        assert_eq!((s.users * 5, s.audit), (1_000_000, 10_000_000));
        assert_eq!(Scale::of(0.0).users, 1);
    }
}
