//! How much database work a request is: transactions (each autocommit
//! statement is one) and rows written, from `pg_stat_database` for the
//! benchmark's database. Postgres publishes a backend's counters when it
//! goes idle, at most once a second, so a reading waits a moment first.

use std::{process::Command, time::Duration};

#[derive(Clone, Copy, Debug)]
pub struct Counters {
    pub transactions: u64,
    pub rows_written: u64,
}

/// The counters now (after giving the backends time to publish them).
pub async fn read(server: &str, database: &str) -> Option<Counters> {
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let sql = format!(
        "SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted \
         FROM pg_stat_database WHERE datname = '{database}'"
    );
    let out = Command::new("psql")
        .arg(format!("{server}/postgres"))
        .args(["-qAtF", " ", "-c", &sql])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some(Counters {
        transactions: fields.next()??,
        rows_written: fields.next()??,
    })
}

/// Per request between two readings.
pub fn per_request(before: Counters, after: Counters, requests: usize) -> Option<(f64, f64)> {
    if requests == 0 {
        return None;
    }
    let n = requests as f64;
    Some((
        after.transactions.saturating_sub(before.transactions) as f64 / n,
        after.rows_written.saturating_sub(before.rows_written) as f64 / n,
    ))
}
