//! What the database costs by itself, measured with `pgbench` on the
//! benchmark's own database, one client, before anything else runs: a
//! `SELECT 1` round trip and a one-row `INSERT` commit (a WAL flush). The
//! yardstick for "what the database round trip costs" in S2 and S3.

use std::{path::Path, process::Command};

/// Mean latency in milliseconds of each kind, if pgbench is there.
pub struct Reference {
    pub select_ms: Option<f64>,
    pub commit_ms: Option<f64>,
}

fn pgbench(url: &str, script: &Path, transactions: u32) -> Option<f64> {
    let out = Command::new("pgbench")
        .args(["-n", "-c", "1", "-M", "prepared", "-t"])
        .arg(transactions.to_string())
        .arg("-f")
        .arg(script)
        .arg(url)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("latency average = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// `url` is the database's URL (with the same TLS mode the server uses).
pub fn measure(url: &str, scratch: &Path, quick: bool) -> Reference {
    let setup = Command::new("psql")
        .arg(url)
        .args([
            "-qAtc",
            "CREATE TABLE IF NOT EXISTS bench_commit_reference (x int)",
        ])
        .output();
    let select = scratch.join("select.sql");
    let insert = scratch.join("insert.sql");
    let written = std::fs::write(&select, "SELECT 1;\n")
        .and_then(|()| std::fs::write(&insert, "INSERT INTO bench_commit_reference VALUES (1);\n"));
    if written.is_err() || !setup.is_ok_and(|o| o.status.success()) {
        return Reference {
            select_ms: None,
            commit_ms: None,
        };
    }
    let (selects, inserts) = if quick { (100, 20) } else { (3000, 500) };
    Reference {
        select_ms: pgbench(url, &select, selects),
        commit_ms: pgbench(url, &insert, inserts),
    }
}
