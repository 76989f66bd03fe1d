//! How much database work a request is: transactions (each autocommit
//! statement is one) and rows written, from `pg_stat_database` for the
//! benchmark's database. Postgres publishes a busy backend's counters with
//! a delay (up to its 10 s idle-flush interval), so a reading waits first.

use std::{collections::BTreeMap, process::Command, time::Duration};

use anyhow::anyhow;

use crate::{
    scenarios::{self, Scenario},
    servers::{Kind, Paths},
    setup::World,
};

#[derive(Clone, Copy, Debug)]
pub struct Counters {
    pub transactions: u64,
    pub rows_written: u64,
}

/// Transactions and rows written per request (per flow for S5), by scenario.
pub type Census = BTreeMap<Scenario, (f64, f64)>;

/// Requests per scenario in the census (one client), and connect flows.
const REQUESTS: usize = 200;
const FLOWS: usize = 20;

/// The user whose connect flows the census counts: never connected
/// before, so the first flow is a first connect and the others re-connect
/// the same account (as S6's per-operation WAL measures them).
const FLOW_USER: &str = "census-0";

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

/// Database work of the mcp-connect of `world` (on `database_url`, whose
/// database is `database` on `server`): S1–S4 as 200 requests from one
/// client each, S5 as 20 connect flows of one new user, between readings of
/// `pg_stat_database`, which lag by up to the idle-flush interval of the
/// backends, hence the waits (about a minute). Nothing else may use that
/// database meanwhile; S6 runs this on its empty side while it seeds the
/// other database, so the waits cost the run nothing.
pub async fn census(
    world: &mut World,
    paths: &Paths,
    server: &str,
    database: &str,
    database_url: &str,
) -> anyhow::Result<Census> {
    eprintln!("bench: counting statements per request (about a minute) …");
    if !world.retries.contains_key(&Kind::Ours) {
        world.connect_users(Kind::Ours).await?;
    }
    // The links are minted (asks) before the first reading.
    let mut flow =
        Some(scenarios::new_user_flows(world, paths, database_url, FLOW_USER, FLOWS).await?);
    let mut work = BTreeMap::new();
    let mut before = read(server, database).await;
    for scenario in Scenario::ALL {
        let (mut jobs, count) = match scenario {
            Scenario::ConnectFlow => (flow.take().into_iter().collect(), FLOWS),
            _ => (
                scenarios::mcp_jobs(world, scenario, Kind::Ours, 1)?,
                REQUESTS,
            ),
        };
        let n = jobs[0].repeat(count).await;
        if n != count {
            return Err(anyhow!(
                "census: {} {}: {n} of {count} succeeded",
                scenario.id(),
                scenario.title()
            ));
        }
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
