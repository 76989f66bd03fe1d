//! How much database work a request is: transactions (each autocommit
//! statement is one) and rows written, from `pg_stat_database` for the
//! benchmark's database. Postgres publishes a busy backend's counters with
//! a delay (up to its 10 s idle-flush interval), so a reading waits first.

use std::{collections::BTreeMap, process::Command, time::Duration};

use crate::{
    scenarios::{self, Scenario},
    servers::Kind,
    setup::World,
};

#[derive(Clone, Copy, Debug)]
pub struct Counters {
    pub transactions: u64,
    pub rows_written: u64,
}

/// The counters now (after giving the backends time to publish them).
pub async fn read(server: &str, database: &str) -> Option<Counters> {
    tokio::time::sleep(Duration::from_millis(11_000)).await;
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

/// Database work per request of mcp-connect in S1–S4: 200 requests from one
/// client between readings of `pg_stat_database`, which lag by up to the
/// idle-flush interval of the backends, hence the waits (about a minute).
pub async fn census(
    world: &mut World,
    server: &str,
    database: &str,
) -> anyhow::Result<BTreeMap<Scenario, (f64, f64)>> {
    eprintln!("bench: counting statements per request (about a minute) …");
    if !world.retries.contains_key(&Kind::Ours) {
        world.connect_users(Kind::Ours).await?;
    }
    let mut work = BTreeMap::new();
    let mut before = read(server, database).await;
    for scenario in [
        Scenario::Discover,
        Scenario::Ask,
        Scenario::RetryComplete,
        Scenario::CallAsUser,
    ] {
        let mut jobs = scenarios::mcp_jobs(world, scenario, Kind::Ours, 1)?;
        let n = jobs[0].repeat(200).await;
        let after = read(server, database).await;
        if let (Some(b), Some(a)) = (before, after)
            && let Some(per) = per_request(b, a, n)
        {
            work.insert(scenario, per);
        }
        before = after;
    }
    Ok(work)
}
