//! `cargo run --release -p bench`: mcp-connect against what a user would
//! pick instead — the MCP Python SDK and bare rmcp — on this machine, in the
//! same run, with the same load generator. Builds the servers, starts them
//! on loopback (mcp-connect with a database of its own, dropped at the end),
//! prepares users, runs each scenario at each concurrency level for a fixed
//! time (rounds interleaved across servers, medians reported), and prints a
//! markdown table that it also writes to BENCHMARKS.md. `--smoke` checks the
//! whole thing in seconds for CI and times nothing worth reading.

mod browser;
mod client;
mod dbref;
mod dbstats;
mod flows;
mod load;
mod mcp;
mod options;
mod procstat;
mod report;
mod scenarios;
mod servers;
mod setup;

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    process::ExitCode,
    time::Instant,
};

use anyhow::{Context, anyhow, bail};

use crate::{
    load::Measured,
    options::Options,
    scenarios::Scenario,
    servers::{Kind, Paths},
    setup::World,
};

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The benchmark's own database; dropped when this is.
struct Database {
    server: String,
    name: String,
    tls: bool,
}

impl Database {
    fn url(&self) -> String {
        let mode = if self.tls { "prefer" } else { "disable" };
        format!("{}/{}?sslmode={mode}", self.server, self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let dropped = std::process::Command::new("psql")
            .arg(format!("{}/postgres", self.server))
            .args([
                "-qAtc",
                &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
            ])
            .stdout(std::process::Stdio::null())
            .status();
        if !dropped.is_ok_and(|s| s.success()) {
            eprintln!(
                "bench: could not drop database {}; drop it by hand",
                self.name
            );
        }
    }
}

fn paths() -> anyhow::Result<Paths> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or_else(|| anyhow!("no workspace root"))?
        .to_path_buf();
    let bin_dir = std::env::current_exe()?
        .parent()
        .ok_or_else(|| anyhow!("no directory for this executable"))?
        .to_path_buf();
    let logs = root.join("target/bench-logs");
    Ok(Paths {
        root,
        bin_dir,
        logs,
    })
}

/// Builds mcp-connect and bench-bare with this harness's profile. Two
/// separate builds: each package alone resolves the same features as its
/// own everyday build, so nothing is compiled twice.
fn build(paths: &Paths) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for (package, bin) in [("mcp-connect", "mcp-connect"), ("bench", "bench-bare")] {
        let mut command = std::process::Command::new(&cargo);
        command
            .current_dir(&paths.root)
            .args(["build", "-p", package, "--bin", bin]);
        if !cfg!(debug_assertions) {
            command.arg("--release");
        }
        let status = command
            .status()
            .with_context(|| format!("cannot run {cargo}"))?;
        if !status.success() {
            bail!("building {bin} failed");
        }
    }
    Ok(())
}

async fn run() -> anyhow::Result<bool> {
    let Some(options) = Options::parse(std::env::args().skip(1))? else {
        print!("{}", options::HELP);
        return Ok(true);
    };
    let paths = paths()?;
    if options.build {
        build(&paths)?;
    }
    let database = Database {
        server: options.database_server.trim_end_matches('/').to_owned(),
        name: format!("mcp_connect_bench_{:08x}", rand::random::<u32>()),
        tls: options.db_tls,
    };
    tokio::select! {
        finished = bench(&options, &paths, &database) => finished,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
    }
}

async fn start(
    options: &Options,
    paths: &Paths,
    database: &Database,
) -> anyhow::Result<(World, Option<PathBuf>)> {
    let (ours, dev) = servers::start_ours(paths, &database.url(), options.quiet_logs).await?;
    eprintln!("bench: mcp-connect (pid {}) at {}", ours.pid, ours.base);
    let (ask, conn, flow) = setup::all_users(&options.levels);
    let everyone: Vec<String> = ask.iter().chain(&conn).chain(&flow).cloned().collect();
    let tokens = servers::mint_tokens(paths, &database.url(), dev.port, &everyone).await?;
    let mut servers = vec![ours];
    let mut python = None;
    if options.servers.contains(&Kind::Python) {
        let interpreter = servers::python_venv(paths).await?;
        let server = servers::start_python(paths, &interpreter, &dev, options.quiet_logs).await?;
        eprintln!(
            "bench: Python SDK comparator (pid {}) at {}",
            server.pid, server.base
        );
        servers.push(server);
        python = Some(interpreter);
    }
    if options.servers.contains(&Kind::Bare) {
        let server = servers::start_bare(paths).await?;
        eprintln!("bench: bare rmcp (pid {}) at {}", server.pid, server.base);
        servers.push(server);
    }
    let world = World {
        dev,
        servers,
        tokens,
        ask_users: ask,
        conn_users: conn,
        retries: HashMap::new(),
        flow_times: Vec::new(),
    };
    Ok((world, python))
}

/// S5 at one level, for sizing the next: (level, flows/s, CPU ms per flow
/// of server and database together).
type FlowSeen = (usize, f64, f64);

/// Links each S5 worker gets: enough for 1.5–2× the expected rate, which is
/// the last level's rate scaled by concurrency but capped by what the cores
/// can do at the CPU cost per flow measured there.
fn links_per_worker(
    options: &Options,
    level: usize,
    setup_flow_s: f64,
    seen: Option<FlowSeen>,
) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
    let (estimate, margin) = match seen {
        None => (1.0 / setup_flow_s.max(1e-3), 2.0),
        Some((at, rate, cpu_ms)) => {
            let scaled = rate * level as f64 / at as f64;
            let cap = if cpu_ms > 0.0 {
                cores * 1000.0 / cpu_ms
            } else {
                scaled
            };
            (scaled.min(cap).max(rate), 1.5)
        }
    };
    let span =
        options.warmup.as_secs_f64() + options.rounds as f64 * options.duration.as_secs_f64();
    let per_worker = (margin * estimate * span / level as f64).ceil() as usize + 3;
    per_worker.min(20_000 / level.max(1)).max(3)
}

async fn bench(options: &Options, paths: &Paths, database: &Database) -> anyhow::Result<bool> {
    let started = Instant::now();
    let load_before = procstat::load_average();
    let (mut world, python) = start(options, paths, database).await?;
    let yardstick = dbref::measure(&database.url(), &paths.logs, options.smoke);
    let kinds: Vec<Kind> = world.servers.iter().map(|s| s.kind).collect();
    let mut runs: BTreeMap<report::Key, Vec<Measured>> = BTreeMap::new();
    let mut flow_seen: Option<FlowSeen> = None;
    let mut census: BTreeMap<Scenario, (f64, f64)> = BTreeMap::new();

    for &scenario in &Scenario::ALL {
        if !options.scenarios.contains(&scenario) {
            continue;
        }
        if matches!(scenario, Scenario::RetryComplete | Scenario::CallAsUser) {
            for &kind in &kinds {
                if scenario.applies_to(kind) && !world.retries.contains_key(&kind) {
                    world.connect_users(kind).await?;
                }
            }
        }
        if scenario != Scenario::ConnectFlow {
            let mut jobs = scenarios::mcp_jobs(&world, scenario, Kind::Ours, 1)?;
            let before = dbstats::read(&options.database_server, &database.name).await;
            let n = jobs[0].repeat(if options.smoke { 20 } else { 200 }).await;
            let after = dbstats::read(&options.database_server, &database.name).await;
            if let (Some(b), Some(a)) = (before, after)
                && let Some(work) = dbstats::per_request(b, a, n)
            {
                census.insert(scenario, work);
            }
        }
        for (level_index, &level) in options.levels.iter().enumerate() {
            let mut flow_jobs = if scenario == Scenario::ConnectFlow {
                let setup_flow_s = median_secs(&world.flow_times).unwrap_or(0.01);
                let per_worker = links_per_worker(options, level, setup_flow_s, flow_seen);
                eprintln!(
                    "bench: S5 at {level}: signing in and minting {per_worker} links per worker …"
                );
                Some(scenarios::flow_jobs(
                    world.flow_workers(level, per_worker).await?,
                ))
            } else {
                None
            };
            let census_from = match &flow_jobs {
                Some(jobs) if level_index == 0 => {
                    let links: usize = jobs.iter().map(load::Job::links_left).sum();
                    dbstats::read(&options.database_server, &database.name)
                        .await
                        .map(|c| (c, links))
                }
                _ => None,
            };
            for round in 0..options.rounds {
                for &kind in &kinds {
                    if !scenario.applies_to(kind) {
                        continue;
                    }
                    let server = world.server(kind)?;
                    let db = (kind == Kind::Ours).then_some(database.name.as_str());
                    let measured = match flow_jobs.as_mut() {
                        Some(jobs) => {
                            load::run(jobs, options.warmup, options.duration, server.pid, db).await
                        }
                        None => {
                            let mut jobs = scenarios::mcp_jobs(&world, scenario, kind, level)?;
                            load::run(&mut jobs, options.warmup, options.duration, server.pid, db)
                                .await
                        }
                    };
                    eprintln!(
                        "bench: {} {:<14} c={:<3} round {}/{} {:<12} {:>8.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  errors {}",
                        scenario.id(),
                        scenario.title(),
                        level,
                        round + 1,
                        options.rounds,
                        kind.label(),
                        measured.rate(),
                        measured.p50_ms,
                        measured.p99_ms,
                        measured.errors
                    );
                    runs.entry((scenario, level, kind))
                        .or_default()
                        .push(measured);
                }
            }
            if let (Some((before, links)), Some(jobs)) = (census_from, &flow_jobs)
                && let Some(after) = dbstats::read(&options.database_server, &database.name).await
            {
                let used = links - jobs.iter().map(load::Job::links_left).sum::<usize>();
                if let Some(work) = dbstats::per_request(before, after, used) {
                    census.insert(scenario, work);
                }
            }
            if scenario == Scenario::ConnectFlow
                && let Some(r) = runs.get(&(scenario, level, Kind::Ours))
            {
                let s = report::summarize(r);
                flow_seen = Some((level, s.rate, s.cpu_per_k + s.db_cpu_per_k.unwrap_or(0.0)));
            }
        }
    }
    for server in std::mem::take(&mut world.servers) {
        server.stop().await;
    }

    let results: BTreeMap<report::Key, report::Summary> = runs
        .iter()
        .map(|(k, v)| (*k, report::summarize(v)))
        .collect();
    let table = report::table(&results);
    let errors = report::errors(&results);
    let targets = report::targets(&results, &options.levels, &yardstick);
    let census = report::census(&census);
    println!("\n{table}");
    if !errors.is_empty() {
        println!("Errors:\n{errors}");
    }
    if !options.smoke {
        println!("Database work per request (mcp-connect):\n\n{census}");
        println!("Targets:\n{targets}");
    }
    if let Some(output) = &options.output {
        let builds = results.values().filter(|s| s.builds > 0).count();
        let document = document(
            options,
            paths,
            &Report {
                table: &table,
                census: &census,
                errors: &errors,
                targets: &targets,
                machine: &format!(
                    "{}{}",
                    report::machine(python.as_deref(), &options.database_server),
                    report::yardstick(&yardstick, options.db_tls)
                ),
                wall: started.elapsed().as_secs_f64(),
                load: (load_before, procstat::load_average()),
                noisy_cells: (builds, results.len()),
            },
        );
        let path = paths.root.join(output);
        std::fs::write(&path, document)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }
    let total_errors: u64 = results.values().map(|s| s.errors).sum();
    let empty = results.values().any(|s| s.rate <= 0.0);
    Ok(total_errors == 0 && !empty)
}

fn median_secs(v: &[std::time::Duration]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().map(|d| d.as_secs_f64()).collect();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied()
}

struct Report<'a> {
    table: &'a str,
    census: &'a str,
    errors: &'a str,
    targets: &'a str,
    machine: &'a str,
    wall: f64,
    load: (f64, f64),
    noisy_cells: (usize, usize),
}

fn document(options: &Options, paths: &Paths, c: &Report<'_>) -> String {
    let notes = std::fs::read_to_string(paths.root.join("bench/NOTES.md"))
        .unwrap_or_else(|_| "(no notes: bench/NOTES.md is missing)\n".to_owned());
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let scenarios: String = Scenario::ALL
        .iter()
        .map(|s| format!("- **{} {}**: {}\n", s.id(), s.title(), s.what()))
        .collect();
    let levels: Vec<String> = options.levels.iter().map(ToString::to_string).collect();
    format!(
        "# Benchmarks\n\n\
         Written by `cargo run --release -p bench` (the harness in `bench/`); the notes at the end come from \
         `bench/NOTES.md`. Everything runs on this machine, in one run, on 127.0.0.1, driven by one closed-loop \
         load generator (one keep-alive connection per concurrent client, every answer checked: a wrong answer \
         is an error). Servers: **mcp-connect** (`target/release/mcp-connect dev`, Postgres, JSON logs at info, \
         as in production), the **Python SDK** v2 (`mcp==2.3.0`, `MCPServer`, stateless Streamable HTTP, \
         uvicorn with uvloop + httptools, one worker, JWT bearer tokens checked with PyJWT, default sealed \
         `requestState`), and **bare rmcp** (`bench-bare`: the same actix ⇄ rmcp bridge and rmcp configuration, \
         no database, no encryption, no token check, no logging: the ceiling).\n\n\
         {scenarios}\n\
         ## This run\n\n\
         {date}; {} s per run after {} s of warm-up, {} rounds per cell interleaved across servers (medians shown; \
         errors summed; peak RSS is the highest of the rounds, reset before each); concurrency {}; whole run {:.0} s.\n\
         Load average {:.2} at the start, {:.2} at the end; other builds (rustc/cargo) were running during {} of {} cells \
         (marked ⚠). The machine is shared: compare ratios within a row group, not absolute numbers across runs.\n\n\
         {}\n\
         CPU columns are seconds of CPU per 1,000 requests (S5: per 1,000 flows, i.e. milliseconds per flow): \
         *server* is the server process (utime + stime), *DB* the Postgres backends of mcp-connect's database, \
         *client* the load generator. \"ours ÷ X\" is the ratio of requests per second.\n\n\
         {}\n\
         {}\
         Database work per request of mcp-connect (one client, 200 requests; S5: per flow; from \
         `pg_stat_database`: every autocommit statement is a transaction, so this is also the round trips):\n\n\
         {}\n\
         ## Targets\n\n{}\n\
         ## Notes\n\n{}",
        num(options.duration.as_secs_f64()),
        num(options.warmup.as_secs_f64()),
        options.rounds,
        levels.join(", "),
        c.wall,
        c.load.0,
        c.load.1,
        c.noisy_cells.0,
        c.noisy_cells.1,
        c.machine,
        c.table,
        if c.errors.is_empty() {
            "No errors.\n\n".to_owned()
        } else {
            format!("Errors:\n\n{}\n", c.errors)
        },
        c.census,
        c.targets,
        notes
    )
}

fn num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}
