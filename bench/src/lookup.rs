//! S6's floor: the connection lookup alone, on both of S6's databases,
//! with `pgbench` and no server in between. It is the one statement of S3
//! and S4 and the first of S2 (`db::call_accounts::read`), taken from the
//! plan check's capture — what the service ran, not a copy — and run
//! prepared, by as many clients as the scenarios' level, with the
//! parameters of one of the benchmark's connected users on each database,
//! rounds alternating as the scenarios' do. *Seeded ÷ empty* of the lookup
//! is what Postgres by itself makes of a million connections against a
//! handful: when it is under the target, the service on top of it cannot
//! be over.

use std::{path::Path, process::Command, time::Duration};

use anyhow::{Context, anyhow, bail};

use crate::{plans::Statement, psql};

/// What the statement is bound to, in its placeholders' order.
const PARAMETERS: [&str; 4] = ["issuer", "subject", "provider", "client"];

/// Statements per second of the lookup on each side, one per round.
pub struct Lookup {
    pub clients: usize,
    pub seeded: Vec<f64>,
    pub empty: Vec<f64>,
    /// Pages of tables and indexes one lookup reads on each side
    /// (`EXPLAIN (ANALYZE, BUFFERS)`, shared buffers hit or read).
    pub pages: (u64, u64),
}

/// The lookup among the statements the service ran: the read of a user's
/// connections with the calling client's grant.
pub fn find(statements: &[Statement]) -> Option<&str> {
    statements
        .iter()
        .map(|s| s.sql.as_str())
        .find(|sql| sql.contains("FROM connections c") && sql.contains("client_grants g"))
}

/// `sql` with `$1` … `$4` as pgbench's variables (bound as parameters in
/// prepared mode, as the service binds them).
fn script(sql: &str) -> String {
    let mut text = sql.to_owned();
    // Highest first: `$1` is a prefix of `$10`.
    for (i, name) in PARAMETERS.iter().enumerate().rev() {
        text = text.replace(&format!("${}", i + 1), &format!(":{name}"));
    }
    format!("{};\n", text.trim_end().trim_end_matches(';'))
}

/// A connected user of the benchmark's own (not a seeded one) on the
/// database at `url`, in `PARAMETERS`' order.
async fn a_benchmark_user(url: &str) -> anyhow::Result<Vec<String>> {
    let row = psql::value(
        url,
        "SELECT concat_ws(chr(31), c.issuer, c.subject, c.provider, g.client_id)
         FROM connections c JOIN client_grants g ON g.connection_id = c.id
         WHERE c.provider = 'demo' AND c.subject NOT LIKE 'seed-%'
         ORDER BY c.created_at DESC LIMIT 1",
    )
    .await?;
    let values: Vec<String> = row.split('\u{1f}').map(str::to_owned).collect();
    if values.len() != PARAMETERS.len() {
        bail!("no connected benchmark user to look up on {url}");
    }
    Ok(values)
}

/// Runs the lookup once through psql with `values` bound: it must find
/// the user's connection, or the placeholders no longer mean what
/// `PARAMETERS` says and the measurement would time an empty result.
async fn check_finds_one(url: &str, sql: &str, values: &[String]) -> anyhow::Result<()> {
    let count = psql::value(
        url,
        &format!(
            "PREPARE bench_lookup AS {sql};\nCREATE TEMP TABLE bench_lookup_rows AS EXECUTE bench_lookup({});\nSELECT count(*) FROM bench_lookup_rows",
            literals(values)
        ),
    )
    .await?;
    if count.trim() != "1" {
        bail!(
            "the connection lookup found {count} rows for a connected user instead of 1: its parameters are not ({})",
            PARAMETERS.join(", ")
        );
    }
    Ok(())
}

/// The values in `values` as SQL string literals, for `EXECUTE`.
fn literals(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("'{}'", v.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many pages of tables and indexes one run of the lookup reads on the
/// database at `url`: the depth of its B-trees, where the rate alone
/// only says that it costs more.
async fn pages_read(url: &str, sql: &str, values: &[String]) -> anyhow::Result<u64> {
    let plan = psql::run(
        url,
        &[],
        psql::Script::Stdin(&format!(
            "PREPARE bench_lookup AS {sql};\nEXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE bench_lookup({});\n",
            literals(values)
        )),
    )
    .await?;
    let plan: serde_json::Value = serde_json::from_str(plan.trim())
        .with_context(|| format!("EXPLAIN printed something else than JSON: {plan}"))?;
    let root = plan
        .get(0)
        .and_then(|p| p.get("Plan"))
        .ok_or_else(|| anyhow!("EXPLAIN's JSON has no plan"))?;
    Ok(relation_pages(root))
}

/// Shared buffers (hit or read) of the plan's nodes that scan a table or an
/// index, summed over the tree: the pages of the data itself, not of the
/// sort or join above them.
fn relation_pages(node: &serde_json::Value) -> u64 {
    let own = if node.get("Relation Name").is_some() {
        ["Shared Hit Blocks", "Shared Read Blocks"]
            .iter()
            .filter_map(|k| node.get(*k).and_then(serde_json::Value::as_u64))
            .sum()
    } else {
        0
    };
    let below: u64 = node
        .get("Plans")
        .and_then(serde_json::Value::as_array)
        .map(|plans| plans.iter().map(relation_pages).sum())
        .unwrap_or(0);
    own + below
}

fn pgbench(
    url: &str,
    script: &Path,
    clients: usize,
    seconds: Duration,
    values: &[String],
) -> anyhow::Result<f64> {
    let mut command = Command::new("pgbench");
    command
        .args(["-n", "-M", "prepared", "-c"])
        .arg(clients.to_string())
        .args(["-j", "2", "-T"])
        .arg(seconds.as_secs().max(1).to_string())
        .arg("-f")
        .arg(script);
    for (name, value) in PARAMETERS.iter().zip(values) {
        command.arg("-D").arg(format!("{name}={value}"));
    }
    let out = command.arg(url).output().context("running pgbench")?;
    if !out.status.success() {
        bail!("pgbench: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("pgbench printed no tps"))
}

/// The lookup on the seeded and the empty database, `rounds` each, in turn.
pub async fn measure(
    sql: &str,
    (seeded_url, empty_url): (&str, &str),
    scratch: &Path,
    clients: usize,
    seconds: Duration,
    rounds: usize,
) -> anyhow::Result<Lookup> {
    let path = scratch.join("s6-lookup.sql");
    std::fs::write(&path, script(sql))?;
    let seeded_user = a_benchmark_user(seeded_url).await?;
    let empty_user = a_benchmark_user(empty_url).await?;
    check_finds_one(seeded_url, sql, &seeded_user).await?;
    check_finds_one(empty_url, sql, &empty_user).await?;
    let mut lookup = Lookup {
        clients,
        seeded: Vec::new(),
        empty: Vec::new(),
        pages: (
            pages_read(seeded_url, sql, &seeded_user).await?,
            pages_read(empty_url, sql, &empty_user).await?,
        ),
    };
    for round in 0..rounds {
        let seeded_first = round % 2 == 0;
        for seeded in [seeded_first, !seeded_first] {
            if seeded {
                lookup
                    .seeded
                    .push(pgbench(seeded_url, &path, clients, seconds, &seeded_user)?);
            } else {
                lookup
                    .empty
                    .push(pgbench(empty_url, &path, clients, seconds, &empty_user)?);
            }
        }
    }
    Ok(lookup)
}

impl Lookup {
    /// Seeded ÷ empty of the median rates.
    pub fn ratio(&self) -> f64 {
        median(&self.seeded) / median(&self.empty)
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_pgbench_variables_in_order() {
        let sql = "SELECT 1 FROM connections c WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3 AND g.client_id = $4";
        assert_eq!(
            script(sql),
            "SELECT 1 FROM connections c WHERE c.issuer = :issuer AND c.subject = :subject AND c.provider = :provider AND g.client_id = :client;\n"
        );
    }

    #[test]
    fn the_lookup_is_found_among_other_statements() {
        let statements = [
            "INSERT INTO connect_tickets (id) VALUES ($1)",
            "SELECT c.id FROM connections c LEFT JOIN LATERAL (SELECT 1 FROM client_grants g) g ON true",
        ]
        .map(|sql| Statement {
            origin: "request path".to_owned(),
            sql: sql.to_owned(),
        });
        assert_eq!(find(&statements), Some(statements[1].sql.as_str()));
        assert_eq!(find(&statements[..1]), None);
    }

    #[test]
    fn pages_are_counted_on_the_scans_of_tables_and_indexes_only() {
        // The shape of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) for the
        // lookup on a large database: the sort's own count is left out.
        let plan: serde_json::Value = serde_json::from_str(
            r#"[{"Plan": {"Node Type": "Sort", "Shared Hit Blocks": 11, "Shared Read Blocks": 8,
                 "Plans": [{"Node Type": "Nested Loop", "Shared Hit Blocks": 0, "Shared Read Blocks": 8,
                   "Plans": [
                     {"Node Type": "Index Scan", "Relation Name": "connections", "Shared Hit Blocks": 1, "Shared Read Blocks": 3},
                     {"Node Type": "Limit", "Shared Hit Blocks": 4, "Plans": [
                       {"Node Type": "Index Scan", "Relation Name": "client_grants", "Shared Hit Blocks": 4, "Shared Read Blocks": 0}]}]}]}}]"#,
        )
        .unwrap();
        assert_eq!(relation_pages(&plan[0]["Plan"]), 8);
    }

    #[test]
    fn the_ratio_is_of_medians() {
        let lookup = Lookup {
            clients: 16,
            seeded: vec![90.0, 80.0, 100.0],
            empty: vec![100.0, 100.0],
            pages: (8, 2),
        };
        assert!((lookup.ratio() - 0.9).abs() < 1e-9);
    }
}
