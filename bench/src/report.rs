//! The report: medians over the rounds of each cell, the ratios of
//! mcp-connect to each comparator, the targets of the issue checked against
//! them, the machine, and the hand-written notes (`bench/NOTES.md`), as one
//! markdown document.

use std::{collections::BTreeMap, fmt::Write as _, process::Command};

use crate::{dbref::Reference, load::Measured, scenarios::Scenario, servers::Kind};

pub use crate::targets::targets;

pub type Key = (Scenario, usize, Kind);

/// The medians of one cell.
pub struct Summary {
    pub rate: f64,
    pub p50: f64,
    pub p99: f64,
    pub errors: u64,
    pub cpu_per_k: f64,
    pub db_cpu_per_k: Option<f64>,
    pub rss_mb: Option<f64>,
    pub gen_cpu_per_k: f64,
    pub dry: bool,
    pub builds: usize,
    pub samples: Vec<String>,
    /// Fastest ÷ slowest round − 1, where the cell had two rounds or more.
    pub spread: Option<f64>,
    /// Each round's rate, in the order the rounds ran (round `i` of two
    /// servers of one cell ran back to back).
    pub rates: Vec<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn per_k(seconds: f64, ok: u64) -> f64 {
    if ok == 0 {
        f64::NAN
    } else {
        seconds / ok as f64 * 1000.0
    }
}

pub fn summarize(runs: &[Measured]) -> Summary {
    let m = |f: &dyn Fn(&Measured) -> f64| median(runs.iter().map(f).collect());
    let db: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.db_cpu_s.map(|s| per_k(s, r.ok)))
        .collect();
    let mut samples: Vec<String> = Vec::new();
    for s in runs.iter().flat_map(|r| r.samples.iter()) {
        if samples.len() < 3 && !samples.contains(s) {
            samples.push(s.clone());
        }
    }
    Summary {
        rate: m(&|r| r.rate()),
        p50: m(&|r| r.p50_ms),
        p99: m(&|r| r.p99_ms),
        errors: runs.iter().map(|r| r.errors).sum(),
        cpu_per_k: m(&|r| per_k(r.server_cpu_s + r.upstream_cpu_s, r.ok)),
        db_cpu_per_k: (!db.is_empty()).then(|| median(db)),
        rss_mb: runs
            .iter()
            .filter_map(|r| r.peak_rss_kb)
            .max()
            .map(|kb| kb as f64 / 1024.0),
        gen_cpu_per_k: m(&|r| per_k(r.loadgen_cpu_s, r.ok)),
        dry: runs.iter().any(|r| r.dry),
        builds: runs.iter().map(|r| r.builds_seen).max().unwrap_or(0),
        samples,
        spread: spread(runs.iter().map(Measured::rate)),
        rates: runs.iter().map(Measured::rate).collect(),
    }
}

/// How far apart the rounds' rates lie: fastest ÷ slowest − 1; `None` with
/// fewer than two usable rounds.
pub fn spread(rates: impl Iterator<Item = f64>) -> Option<f64> {
    let rates: Vec<f64> = rates.filter(|r| r.is_finite() && *r > 0.0).collect();
    if rates.len() < 2 {
        return None;
    }
    let fastest = rates.iter().copied().fold(f64::MIN, f64::max);
    let slowest = rates.iter().copied().fold(f64::MAX, f64::min);
    Some(fastest / slowest - 1.0)
}

/// How well the rounds pin down the ratio of two servers' rates: one
/// standard error of the median of the rounds' own ratios (round `i` of one
/// server against round `i` of the other), relative, from the spread of
/// their logarithms (√(π/2) · s / √n for the median of `n` normal values);
/// `None` with fewer than three rounds in common.
pub fn ratio_error(a: &[f64], b: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| x.is_finite() && y.is_finite() && **x > 0.0 && **y > 0.0)
        .map(|(x, y)| (x / y).ln())
        .collect();
    let n = logs.len();
    if n < 3 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / n as f64;
    let variance = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((std::f64::consts::FRAC_PI_2).sqrt() * variance.sqrt() / (n as f64).sqrt())
}

fn num(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "–".to_owned()
    }
}

fn ratio(ours: f64, other: Option<&Summary>) -> String {
    match other {
        Some(o) if o.rate > 0.0 && ours.is_finite() => format!("{:.2}×", ours / o.rate),
        _ => "".to_owned(),
    }
}

/// The results table.
pub fn table(results: &BTreeMap<Key, Summary>) -> String {
    let mut out = String::from(
        "| scenario | server | conc. | req/s | p50 ms | p99 ms | errors | server CPU s/1k | DB CPU s/1k | peak RSS MB | client CPU s/1k | ours ÷ Python | ours ÷ bare | ours ÷ bare + SQL | ours ÷ floor + required work | seeded ÷ empty |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (&(scenario, level, kind), s) in results {
        let versus = |other| match kind {
            Kind::Ours => ratio(s.rate, results.get(&(scenario, level, other))),
            // S6's empty side against the floor started with it.
            Kind::Empty if other == Kind::BareSql => {
                ratio(s.rate, results.get(&(scenario, level, Kind::EmptyFloor)))
            }
            _ => String::new(),
        };
        let (vs_python, vs_bare, vs_bare_sql, vs_required) = (
            versus(Kind::Python),
            versus(Kind::Bare),
            versus(Kind::BareSql),
            versus(Kind::Required),
        );
        let vs_empty = if kind == Kind::Seeded {
            ratio(s.rate, results.get(&(scenario, level, Kind::Empty)))
        } else {
            String::new()
        };
        let mut flags = String::new();
        if s.dry {
            flags.push_str(" (links ran out: a lower bound)");
        }
        if s.builds > 0 {
            flags.push_str(" ⚠");
        }
        let _ = writeln!(
            out,
            "| {} {} | {} | {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            scenario.id(),
            scenario.title(),
            kind.label(),
            level,
            num(s.rate, 0),
            flags,
            num(s.p50, 2),
            num(s.p99, 2),
            s.errors,
            num(s.cpu_per_k, 3),
            s.db_cpu_per_k.map_or("".to_owned(), |x| num(x, 3)),
            s.rss_mb.map_or("–".to_owned(), |x| num(x, 1)),
            num(s.gen_cpu_per_k, 3),
            vs_python,
            vs_bare,
            vs_bare_sql,
            vs_required,
            vs_empty,
        );
    }
    out
}

/// Every error seen, with samples.
pub fn errors(results: &BTreeMap<Key, Summary>) -> String {
    let mut out = String::new();
    for (&(scenario, level, kind), s) in results {
        if s.errors > 0 {
            let _ = writeln!(
                out,
                "- {} {} at {level}: {} errors, e.g. {}",
                scenario.id(),
                kind.label(),
                s.errors,
                s.samples.join(" | ")
            );
        }
    }
    out
}

fn command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The machine, as far as a reader needs it to judge the numbers.
pub fn machine(python: Option<&std::path::Path>, database_server: &str) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kb: f64 = m
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some(format!("{:.0} GiB", kb / 1024.0 / 1024.0))
        })
        .unwrap_or_default();
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let rustc = command("rustc", &["--version"]).unwrap_or_default();
    let python = python
        .and_then(|p| command(&p.to_string_lossy(), &["--version"]))
        .unwrap_or_else(|| "not run".to_owned());
    let postgres = command(
        "psql",
        &[
            &format!("{database_server}/postgres"),
            "-Atc",
            "SHOW server_version",
        ],
    )
    .unwrap_or_else(|| "unknown".to_owned());
    format!(
        "- CPU: {model}, {cores} cores; memory {memory}; {os}, Linux {}\n\
         - {rustc}; {python}; PostgreSQL {postgres} on 127.0.0.1\n",
        kernel.trim()
    )
}

/// The database yardstick, as a line of the machine section.
pub fn yardstick(db: &Reference, tls: bool) -> String {
    let ms = |x: Option<f64>| {
        x.map_or("not measured (no pgbench)".to_owned(), |v| {
            format!("{v:.3} ms")
        })
    };
    format!(
        "- Postgres alone (pgbench, 1 client, {}): `SELECT 1` round trip {}, one-row `INSERT` commit {}\n",
        if tls { "TLS when offered" } else { "no TLS" },
        ms(db.select_ms),
        ms(db.commit_ms)
    )
}

/// Database work per request, by scenario.
pub fn census(work: &BTreeMap<Scenario, (f64, f64)>) -> String {
    if work.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| scenario | SQL statements / request | rows written / request |\n|---|--:|--:|\n",
    );
    for (scenario, (xacts, rows)) in work {
        let per = match scenario {
            Scenario::ConnectFlow => " (per flow)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "| {} {}{per} | {xacts:.1} | {rows:.1} |",
            scenario.id(),
            scenario.title()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstreams_cpu_counts_with_the_servers() {
        let run = |server_cpu_s, upstream_cpu_s| Measured {
            ok: 1000,
            elapsed_s: 1.0,
            server_cpu_s,
            upstream_cpu_s,
            ..Measured::default()
        };
        let alone = summarize(&[run(0.2, 0.0)]);
        let with_upstream = summarize(&[run(0.2, 0.05)]);
        assert!((alone.cpu_per_k - 0.2).abs() < 1e-12, "{}", alone.cpu_per_k);
        assert!(
            (with_upstream.cpu_per_k - 0.25).abs() < 1e-12,
            "{}",
            with_upstream.cpu_per_k
        );
    }

    #[test]
    fn the_ratio_error_follows_the_rounds_own_ratios() {
        // The same ratio in every round: nothing uncertain about it, however
        // far the rounds themselves lie apart.
        let error = ratio_error(&[900.0, 1800.0, 450.0], &[1000.0, 2000.0, 500.0]).unwrap();
        assert!(error.abs() < 1e-12, "{error}");
        // Ratios of 0.9, 1.0 and 1.1: a log-spread of ≈0.10, so ≈7 % for
        // the median of three.
        let error = ratio_error(&[900.0, 1000.0, 1100.0], &[1000.0; 3]).unwrap();
        assert!((error - 0.0725).abs() < 0.002, "{error}");
        assert_eq!(ratio_error(&[900.0, 1000.0], &[1000.0, 1000.0]), None);
        assert_eq!(ratio_error(&[900.0, 0.0, 1000.0], &[1000.0; 3]), None);
    }

    #[test]
    fn spread_is_fastest_over_slowest_of_two_rounds_or_more() {
        let s = spread([900.0, 1000.0, 1200.0].into_iter()).unwrap();
        assert!((s - 1200.0 / 900.0 + 1.0).abs() < 1e-12);
        assert_eq!(spread([1000.0].into_iter()), None);
        // A round that measured nothing does not make the spread infinite.
        assert_eq!(spread([1000.0, 0.0, f64::NAN].into_iter()), None);
    }
}
