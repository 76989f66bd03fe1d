//! Between scenarios, every server's database is vacuumed and analyzed and
//! the cluster checkpointed, so that what Postgres owes for the rows the
//! last scenario wrote (S2 inserts a ticket and an audit row per request:
//! hint bits, autovacuum, dirty buffers for the checkpointer) is paid here
//! rather than inside whichever server's window comes next.

use std::time::Instant;

use crate::psql;

/// Settles `databases` (their URLs); returns how long it took, for the log.
pub async fn settle(databases: &[String]) -> anyhow::Result<f64> {
    let started = Instant::now();
    for url in databases {
        psql::value(url, "VACUUM (ANALYZE)").await?;
    }
    if let Some(url) = databases.first() {
        psql::value(url, "CHECKPOINT").await?;
    }
    Ok(started.elapsed().as_secs_f64())
}
