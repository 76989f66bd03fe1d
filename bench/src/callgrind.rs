//! `--callgrind`: the servers run under valgrind's callgrind, and each timed
//! window counts the instructions every server executed (user space, all
//! its threads) instead of trusting CPU time. Instruction counts repeat to
//! a fraction of a percent on a busy machine, where CPU time per request
//! moves by tens of percent; they leave out the kernel (the loopback
//! `sendto`s) and Postgres, which are the same for a service and its floor
//! that make the same statements.
//!
//! Around the window: `callgrind_control --zero` on every server, then
//! `--dump`; the dump's `summary:` line is the window's count. The dumps
//! stay in the log directory (`callgrind.<server>.out.<n>`) for
//! `callgrind_annotate`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    sync::{Mutex, OnceLock},
};

use anyhow::{Context, anyhow, bail};

use crate::{load::Measured, report::Key, servers::Kind};

struct Counted {
    kind: Kind,
    pid: u32,
    out: PathBuf,
    dumps: u32,
}

/// The log directory when `--callgrind` is on.
static DIR: OnceLock<PathBuf> = OnceLock::new();
static SERVERS: Mutex<Vec<Counted>> = Mutex::new(Vec::new());

/// Turns it on for every server started after this.
pub fn enable(logs: &Path) -> anyhow::Result<()> {
    let found = Command::new("callgrind_control").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        bail!("--callgrind needs valgrind (callgrind_control not found)");
    }
    std::fs::create_dir_all(logs)?;
    DIR.set(logs.to_path_buf())
        .map_err(|_| anyhow!("callgrind enabled twice"))
}

pub fn enabled() -> bool {
    DIR.get().is_some()
}

/// How long a server may take to start: valgrind runs it 20–50× slower.
pub fn patience(limit: std::time::Duration) -> std::time::Duration {
    if enabled() { limit * 10 } else { limit }
}

fn out_file(kind: Kind) -> Option<PathBuf> {
    let name = match kind {
        Kind::Ours => "mcp-connect",
        Kind::Bare => "bare",
        Kind::BareSql => "bare-sql",
        Kind::Required => "required",
        Kind::Python | Kind::Seeded | Kind::Empty | Kind::EmptyFloor | Kind::Upstream => {
            return None;
        }
    };
    Some(DIR.get()?.join(format!("callgrind.{name}.out")))
}

fn tracked(kind: Kind) -> bool {
    let servers = SERVERS.lock().unwrap_or_else(|p| p.into_inner());
    servers.iter().any(|s| s.kind == kind)
}

/// The command that starts `binary` as server `kind`: under callgrind when
/// enabled (the first server of each kind only: S6's plan check starts a
/// second mcp-connect that is not measured).
pub fn command(binary: &Path, kind: Kind) -> tokio::process::Command {
    match out_file(kind).filter(|_| !tracked(kind)) {
        Some(out) => {
            let mut command = tokio::process::Command::new("valgrind");
            command
                .arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg(binary);
            command
        }
        None => tokio::process::Command::new(binary),
    }
}

/// Counts server `kind` (valgrind keeps the child's pid) from now on, if
/// [`command`] started it under callgrind.
pub fn track(kind: Kind, pid: u32) {
    if let Some(out) = out_file(kind) {
        let mut servers = SERVERS.lock().unwrap_or_else(|p| p.into_inner());
        if servers.iter().any(|s| s.kind == kind) {
            return;
        }
        servers.push(Counted {
            kind,
            pid,
            out,
            dumps: 0,
        });
    }
}

fn control(pid: u32, what: &str) -> anyhow::Result<()> {
    let out = Command::new("callgrind_control")
        .arg(what)
        .arg(pid.to_string())
        .output()
        .context("callgrind_control")?;
    if !out.status.success() {
        bail!(
            "callgrind_control {what} {pid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Starts a window: every counted server's counters to zero.
pub fn zero() {
    let servers = SERVERS.lock().unwrap_or_else(|p| p.into_inner());
    for s in servers.iter() {
        if let Err(e) = control(s.pid, "--zero") {
            eprintln!("bench: {e:#}");
        }
    }
}

/// Ends a window: the instructions each counted server executed in it.
pub fn dump() -> Vec<(Kind, u64)> {
    let mut servers = SERVERS.lock().unwrap_or_else(|p| p.into_inner());
    let mut counts = Vec::new();
    for s in servers.iter_mut() {
        let counted = control(s.pid, "--dump").and_then(|()| {
            s.dumps += 1;
            let file = PathBuf::from(format!("{}.{}", s.out.display(), s.dumps));
            summary(&file)
        });
        match counted {
            Ok(n) => counts.push((s.kind, n)),
            Err(e) => eprintln!("bench: {e:#}"),
        }
    }
    counts
}

/// The `summary:` line of a callgrind dump (instructions, the only event).
fn summary(file: &Path) -> anyhow::Result<u64> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no summary in {}", file.display()))
}

/// The progress line's addition: this run's instructions per request.
pub fn note(measured: &Measured, kind: Kind) -> String {
    let mut out = String::new();
    if let Some(n) = measured.instructions_per_request(kind) {
        out.push_str(&format!("  {:.0} Ir/req", n));
    }
    out
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// Instructions per request, medians over the rounds: mcp-connect, its
/// floor and the floor + required work (what the rest of mcp-connect
/// costs is the last ratio). S4's upstream (the demo provider, in a process
/// of its own that valgrind does not run) is in none of them.
pub fn table(runs: &BTreeMap<Key, Vec<Measured>>) -> String {
    let mut out = String::from(
        "Instructions per request (callgrind, user space, medians):\n\n\
         | scenario | conc. | mcp-connect | floor | floor | ours ÷ floor | floor + required work | ours ÷ floor + required work |\n\
         |---|--:|--:|---|--:|--:|--:|--:|\n",
    );
    let per = |key: &Key, whose: Kind| {
        let runs = runs.get(key)?;
        median(
            runs.iter()
                .filter_map(|m| m.instructions_per_request(whose))
                .collect(),
        )
    };
    let cell = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.0}"));
    for &(scenario, level, kind) in runs.keys() {
        if kind != Kind::Ours {
            continue;
        }
        let Some(ours) = per(&(scenario, level, Kind::Ours), Kind::Ours) else {
            continue;
        };
        let ratio = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{:.3}", ours / v));
        let floor_kind = scenario.floor();
        let floor = per(&(scenario, level, floor_kind), floor_kind);
        let required = per(&(scenario, level, Kind::Required), Kind::Required);
        out.push_str(&format!(
            "| {} {} | {level} | {ours:.0} | {} | {} | {} | {} | {} |\n",
            scenario.id(),
            scenario.title(),
            floor_kind.label(),
            cell(floor),
            ratio(floor),
            cell(required),
            ratio(required),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::Scenario;

    fn window(kind: Kind, requests: u64, instructions: u64) -> Measured {
        Measured {
            ok: requests,
            instructions: vec![(kind, instructions)],
            ..Measured::default()
        }
    }

    #[test]
    fn the_table_sets_mcp_connect_against_its_floor_and_the_floor_with_the_required_work() {
        let mut runs = BTreeMap::new();
        let s3 = Scenario::RetryComplete;
        runs.insert(
            (s3, 1, Kind::Ours),
            vec![window(Kind::Ours, 100, 33_000_000)],
        );
        runs.insert(
            (s3, 1, Kind::BareSql),
            vec![window(Kind::BareSql, 200, 44_000_000)],
        );
        runs.insert(
            (s3, 1, Kind::Required),
            vec![window(Kind::Required, 50, 15_000_000)],
        );
        let table = table(&runs);
        assert!(
            table.contains("| S3 retry-complete | 1 | 330000 | bare rmcp + SQL | 220000 | 1.500 | 300000 | 1.100 |"),
            "{table}"
        );

        // A floor that was not run is a dash, not a zero.
        runs.remove(&(s3, 1, Kind::Required));
        let table = super::table(&runs);
        assert!(table.contains("| 220000 | 1.500 | – | – |"), "{table}");
    }
}
