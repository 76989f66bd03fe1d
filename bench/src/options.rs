//! The harness's command line (`cargo run --release -p bench -- --help`).

use std::time::Duration;

use anyhow::{Context, anyhow, bail};

use crate::{scenarios::Scenario, servers::Kind};

pub const HELP: &str = "\
bench — mcp-connect against the MCP Python SDK and bare rmcp, side by side.

Starts Postgres-backed mcp-connect (dev mode, its own database, dropped at
the end), the Python SDK comparator, bench-bare and S4's upstream (a second
mcp-connect dev, whose demo provider every server calls) on 127.0.0.1, runs
every scenario at each concurrency level, prints a markdown table and writes
it to BENCHMARKS.md.

  --smoke                 a few seconds of everything at one low concurrency,
                          fails on any error, writes nothing (for CI)
  --duration SECS         timed window per run (default 1.5)
  --warmup SECS           untimed warm-up before each run (default 0.25)
  --rounds N              runs per cell, interleaved across servers; the table
                          shows medians (default 6 of 1.5 s: as precise as 3 of
                          3 s on a shared machine, whose noise is independent from
                          one window to the next, and the one-round comparators
                          take half the time; S5 runs half of them, S6 at most 4)
  --levels 1,16,64        concurrency levels
  --only S1,…,S6          scenarios to run (default all; --scenarios is the same).
                          S6 (data scale) runs last, on two new mcp-connect servers with
                          databases of their own: it seeds the first's, checks every
                          request path's query plans on it and weighs its tables, runs
                          S2, S3 and S4 on it, each in turn with the second (whose
                          database stays empty) and, with bare-sql among the servers,
                          S2 and S3 on a new bare rmcp + SQL (the floor in S6's
                          conditions), and runs the sweeper under S3; alone it runs
                          nothing else (and only mcp-connect) unless --servers says
                          otherwise
  --seed-scale F          S6 seeds F × the full scale (1,000,000 connections, 10,000,000
                          audit rows, …; default 1, --smoke 0.001; or BENCH_SEED_SCALE)
  --sweep-limit SECS      how long the sweeper may run under S3 before it is stopped
                          (default 90)
  --servers ours,python,bare,bare-sql,required
                          bare-sql is bench-bare with mcp-connect's SQL (same tables,
                          queries and connections, its own database; for S4 the same
                          upstream call): S2, S3 and S4. required is that floor plus
                          the work mcp-connect may not leave out, by mcp-connect's own
                          code (token check, access line and metrics, sealed
                          requestState, tokens sealed at rest): S1–S4 at every level
  --database-server URL   Postgres to use (default postgres://postgres@127.0.0.1:5432,
                          or BENCH_DATABASE_SERVER / TEST_DATABASE_SERVER)
  --db-tls                talk TLS to Postgres when it offers it (default: sslmode=disable,
                          as on the compose network; Debian's Postgres offers TLS even
                          on loopback)
  --quiet-logs            servers log warnings only (mcp-connect RUST_LOG=warn, no uvicorn
                          access log): shows what per-request logging costs
  --callgrind             run mcp-connect and bench-bare under valgrind's callgrind and
                          report instructions per request (user space, all threads) of
                          each server: repeatable on a busy machine, where CPU time is
                          not; the servers run 20–50× slower (use --levels 1 and
                          --duration 10 or more)
  --no-census             skip counting SQL statements per request (about a minute; with
                          S6 it runs while S6 seeds and costs nothing, without S6 before S1)
  --output PATH           where to write the report (default BENCHMARKS.md)
  --no-write              print the table only
  --shared-lines          only this: what the values each request used to write that the
                          whole instance shared (rmcp's service token, the handler's Arc,
                          the token cache's lock, the request counters) cost two threads,
                          against a copy per thread; prints a table, starts no server
  --no-build              use the binaries already built beside this one
";

pub struct Options {
    pub smoke: bool,
    pub duration: Duration,
    pub warmup: Duration,
    pub rounds: usize,
    pub levels: Vec<usize>,
    pub scenarios: Vec<Scenario>,
    /// S6: seed, check plans, weigh, sweep.
    pub scale: bool,
    pub seed_fraction: f64,
    pub sweep_limit: Duration,
    pub servers: Vec<Kind>,
    pub database_server: String,
    pub db_tls: bool,
    pub quiet_logs: bool,
    pub census: bool,
    pub callgrind: bool,
    pub shared_lines: bool,
    pub output: Option<String>,
    pub build: bool,
}

fn seconds(v: &str) -> anyhow::Result<Duration> {
    let s: f64 = v
        .parse()
        .with_context(|| format!("not a number of seconds: {v}"))?;
    if !(0.0..=600.0).contains(&s) {
        bail!("{s} s is out of range (0–600)");
    }
    Ok(Duration::from_secs_f64(s))
}

fn fraction(v: &str) -> anyhow::Result<f64> {
    let f: f64 = v.parse().with_context(|| format!("not a number: {v}"))?;
    if !(f > 0.0 && f <= 10.0) {
        bail!("seed scale {f} is out of range (0–10)");
    }
    Ok(f)
}

fn list<T>(v: &str, parse: impl Fn(&str) -> Option<T>) -> anyhow::Result<Vec<T>> {
    v.split(',')
        .map(|s| parse(s.trim()).ok_or_else(|| anyhow!("unknown value `{s}`")))
        .collect()
}

impl Options {
    pub fn parse(args: impl IntoIterator<Item = String>) -> anyhow::Result<Option<Self>> {
        let database_server = std::env::var("BENCH_DATABASE_SERVER")
            .or_else(|_| std::env::var("TEST_DATABASE_SERVER"))
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let mut o = Options {
            smoke: false,
            duration: Duration::from_millis(1500),
            warmup: Duration::from_millis(250),
            rounds: 6,
            levels: vec![1, 16, 64],
            scenarios: Scenario::ALL.to_vec(),
            scale: true,
            seed_fraction: match std::env::var("BENCH_SEED_SCALE") {
                Ok(v) => fraction(&v)?,
                Err(_) => 1.0,
            },
            sweep_limit: Duration::from_secs(90),
            servers: vec![
                Kind::Ours,
                Kind::Python,
                Kind::Bare,
                Kind::BareSql,
                Kind::Required,
            ],
            database_server,
            db_tls: false,
            quiet_logs: false,
            census: true,
            callgrind: false,
            shared_lines: false,
            output: Some("BENCHMARKS.md".to_owned()),
            build: true,
        };
        let mut explicit_levels = false;
        let mut explicit_servers = false;
        let mut explicit_fraction = std::env::var("BENCH_SEED_SCALE").is_ok();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| anyhow!("{arg} needs a value"));
            match arg.as_str() {
                "-h" | "--help" => return Ok(None),
                "--smoke" => o.smoke = true,
                "--duration" => o.duration = seconds(&value()?)?,
                "--warmup" => o.warmup = seconds(&value()?)?,
                "--rounds" => o.rounds = value()?.parse().context("--rounds")?,
                "--levels" => {
                    o.levels = list(&value()?, |s| s.parse().ok().filter(|&n| n > 0 && n <= 256))?;
                    explicit_levels = true;
                }
                "--only" | "--scenarios" => {
                    let wanted = list(&value()?, |s| {
                        (s.eq_ignore_ascii_case("S6") || s == "data-scale")
                            .then_some(None)
                            .or_else(|| Scenario::parse(s).map(Some))
                    })?;
                    o.scale = wanted.contains(&None);
                    o.scenarios = Scenario::ALL
                        .into_iter()
                        .filter(|s| wanted.contains(&Some(*s)))
                        .collect();
                    if o.scale && !explicit_servers && wanted == [None] {
                        o.servers = vec![Kind::Ours];
                    }
                }
                "--servers" => {
                    o.servers = list(&value()?, Kind::parse)?;
                    explicit_servers = true;
                }
                "--seed-scale" => {
                    o.seed_fraction = fraction(&value()?)?;
                    explicit_fraction = true;
                }
                "--sweep-limit" => o.sweep_limit = seconds(&value()?)?,
                "--database-server" => o.database_server = value()?,
                "--db-tls" => o.db_tls = true,
                "--quiet-logs" => o.quiet_logs = true,
                "--no-census" => o.census = false,
                "--callgrind" => o.callgrind = true,
                "--shared-lines" => o.shared_lines = true,
                "--output" => o.output = Some(value()?),
                "--no-write" => o.output = None,
                "--no-build" => o.build = false,
                other => bail!("unknown argument `{other}` (see --help)"),
            }
        }
        if o.smoke {
            o.duration = Duration::from_millis(400);
            o.warmup = Duration::from_millis(100);
            o.rounds = 1;
            if !explicit_levels {
                o.levels = vec![2];
            }
            o.output = None;
            o.census = false;
            if !explicit_fraction {
                o.seed_fraction = 0.001;
            }
            o.sweep_limit = o.sweep_limit.min(Duration::from_secs(20));
        }
        if o.rounds == 0
            || o.levels.is_empty()
            || (o.scenarios.is_empty() && !o.scale)
            || o.servers.is_empty()
        {
            bail!("nothing to run");
        }
        if !o.servers.contains(&Kind::Ours) {
            bail!("mcp-connect (`ours`) is always needed: it is the token issuer of every run");
        }
        Ok(Some(o))
    }

    /// The rounds of each S6 cell: at most four (with the default windows,
    /// six seconds of each side per cell), so that the full run, seed and
    /// all, stays within its quarter hour.
    pub fn scale_rounds(&self) -> usize {
        self.rounds.min(4)
    }

    /// The run `cargo run --release -p bench` makes with no options (the
    /// one the quarter hour is about): every scenario and server, the
    /// default levels, rounds and windows, the full seed, nothing slowed
    /// down or left out.
    pub fn is_full_run(&self) -> bool {
        !self.smoke
            && self.scale
            && self.scenarios == Scenario::ALL
            && self.levels == [1, 16, 64]
            && self.rounds == 6
            && self.duration == Duration::from_millis(1500)
            && self.warmup == Duration::from_millis(250)
            && self.seed_fraction == 1.0
            && self.servers.len() == 5
            && self.census
            && !self.callgrind
            && !self.quiet_logs
            && !self.shared_lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Options {
        match Options::parse(args.iter().map(|s| (*s).to_owned())) {
            Ok(Some(o)) => o,
            Ok(None) => panic!("help asked"),
            Err(e) => panic!("{e:#}"),
        }
    }

    #[test]
    fn only_s6_runs_the_data_scale_with_its_baseline_on_mcp_connect() {
        let o = parse(&["--only", "S6"]);
        assert!(o.scale);
        assert!(o.scenarios.is_empty());
        assert_eq!(o.servers, [Kind::Ours]);
        let o = parse(&["--servers", "ours,bare-sql", "--only", "s1,S6"]);
        assert!(o.scale);
        assert_eq!(o.scenarios, [Scenario::Discover]);
        assert_eq!(o.servers, [Kind::Ours, Kind::BareSql]);
        let o = parse(&["--only", "S3"]);
        assert!(!o.scale);
        assert_eq!(o.scenarios, [Scenario::RetryComplete]);
        assert!(parse(&[]).scale);
        assert!(Options::parse(["--only".to_owned(), "S7".to_owned()]).is_err());
    }

    #[test]
    fn only_the_default_run_is_the_full_run() {
        if std::env::var_os("BENCH_SEED_SCALE").is_none() {
            assert!(parse(&[]).is_full_run());
        }
        for args in [
            &["--only", "S6"][..],
            &["--smoke"],
            &["--rounds", "2"],
            &["--no-census"],
            &["--callgrind"],
            &["--shared-lines"],
            &["--seed-scale", "0.5"],
            &["--servers", "ours,bare"],
        ] {
            assert!(!parse(args).is_full_run(), "{args:?}");
        }
    }

    #[test]
    fn smoke_seeds_small_unless_told() {
        assert!((parse(&["--smoke"]).seed_fraction - 0.001).abs() < 1e-12);
        assert!((parse(&["--smoke", "--seed-scale", "0.05"]).seed_fraction - 0.05).abs() < 1e-12);
        assert!(Options::parse(["--seed-scale".to_owned(), "0".to_owned()]).is_err());
    }
}
