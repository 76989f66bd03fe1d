//! `cargo run --release -p bench`: mcp-connect against what a user would
//! pick instead — the MCP Python SDK and bare rmcp — on this machine, in the
//! same run, with the same load generator. Builds the servers, starts them
//! on loopback (mcp-connect with a database of its own, dropped at the end),
//! prepares users, runs each scenario at each concurrency level for a fixed
//! time (rounds interleaved across servers, medians reported), and prints a
//! markdown table that it also writes to BENCHMARKS.md. `--smoke` checks the
//! whole thing in seconds for CI and times nothing worth reading.

mod browser;
mod callgrind;
mod capture;
mod client;
mod dbref;
mod dbstats;
mod demo;
mod document;
mod flows;
mod load;
mod lookup;
mod mcp;
mod options;
mod plans;
mod prepare;
mod procstat;
mod psql;
mod report;
mod scale;
mod scale_report;
mod scenarios;
mod seed;
mod servers;
mod settle;
mod setup;
mod shared_lines;
mod statement_log;
mod targets;

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    process::ExitCode,
    time::Instant,
};

use anyhow::{Context, anyhow};

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

async fn run() -> anyhow::Result<bool> {
    let Some(options) = Options::parse(std::env::args().skip(1))? else {
        print!("{}", options::HELP);
        return Ok(true);
    };
    if options.shared_lines {
        print!("{}", shared_lines::table());
        return Ok(true);
    }
    let paths = prepare::paths()?;
    if options.build {
        prepare::build(&paths)?;
    }
    if options.callgrind {
        callgrind::enable(&paths.logs)?;
    }
    let database = prepare::Database {
        server: options.database_server.trim_end_matches('/').to_owned(),
        name: format!("mcp_connect_bench_{:08x}", rand::random::<u32>()),
        tls: options.db_tls,
    };
    // bench-bare --database creates and migrates its own.
    let floors = Floors {
        bare: prepare::Database {
            server: database.server.clone(),
            name: format!("{}_bare", database.name),
            tls: database.tls,
        },
        required: prepare::Database {
            server: database.server.clone(),
            name: format!("{}_required", database.name),
            tls: database.tls,
        },
        upstream: prepare::Database {
            server: database.server.clone(),
            name: format!("{}_upstream", database.name),
            tls: database.tls,
        },
    };
    tokio::select! {
        finished = bench(&options, &paths, &database, &floors) => finished,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
    }
}

/// The databases of bench-bare's two servers with SQL, and of S4's
/// upstream.
struct Floors {
    bare: prepare::Database,
    required: prepare::Database,
    upstream: prepare::Database,
}

/// How many of the `rounds` a server runs in `scenario`. The Python SDK (what
/// a user would write instead) and bare rmcp beside S2 and S3 (whose floor
/// is bare rmcp + SQL) run one: no target is measured against them, their
/// ratios to mcp-connect are far beyond a round's noise, and the time the
/// other rounds took keeps the whole run within its quarter hour. S5, which
/// no target measures either (and which has nothing to be compared with),
/// runs half of them, for the same reason.
fn rounds_of(kind: Kind, scenario: Scenario, rounds: usize) -> usize {
    let comparator = kind == Kind::Python || (kind == Kind::Bare && scenario != Scenario::Discover);
    if comparator {
        rounds.min(1)
    } else if scenario == Scenario::ConnectFlow {
        rounds.div_ceil(2)
    } else {
        rounds
    }
}

/// The servers that run in `round`, in the order they run: each round
/// starts with the next of them, so that whatever a run leaves behind
/// (Postgres writing back, the client's heap) falls on each server in
/// turn, and each takes the first and the last place alike. Rotated among
/// those that run in the round: rotating the whole list put the servers
/// of every round after the first in the same order whenever the one-round
/// comparators were skipped (mcp-connect last in all of them).
fn round_order(kinds: &[Kind], round: usize, runs: impl Fn(Kind) -> bool) -> Vec<Kind> {
    let mut order: Vec<Kind> = kinds.iter().copied().filter(|&k| runs(k)).collect();
    let n = order.len().max(1);
    order.rotate_left(round % n);
    order
}

async fn start(
    options: &Options,
    paths: &Paths,
    database: &prepare::Database,
    floors: &Floors,
) -> anyhow::Result<(World, Option<PathBuf>)> {
    let quiet = options.quiet_logs.then_some("warn");
    let upstream = servers::start_demo_upstream(paths, &floors.upstream.url(), quiet).await?;
    eprintln!(
        "bench: S4's upstream, the demo provider of another mcp-connect dev (pid {}) at {}",
        upstream.server.pid,
        upstream.base()
    );
    let (ours, dev) = servers::start_ours(
        paths,
        &database.url(),
        quiet,
        "mcp-connect.log",
        Some(&upstream),
    )
    .await?;
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
        let server = servers::start_bare(paths, None, None, None).await?;
        eprintln!("bench: bare rmcp (pid {}) at {}", server.pid, server.base);
        servers.push(server);
    }
    if options.servers.contains(&Kind::BareSql) {
        let server = servers::start_bare(
            paths,
            Some(&floors.bare.url()),
            Some(&format!("{}/dev/demo/api/me", upstream.base())),
            None,
        )
        .await?;
        eprintln!(
            "bench: bare rmcp + SQL (pid {}) at {}",
            server.pid, server.base
        );
        servers.push(server);
    }
    if options.servers.contains(&Kind::Required) {
        // Tokens are checked as mcp-connect checks them: its issuer, its
        // audience (the dev server's resource URL).
        let claims = servers::jwt_claims(&dev.token)?;
        let audience = match &claims["aud"] {
            serde_json::Value::Array(a) => a.first().cloned().unwrap_or_default(),
            other => other.clone(),
        };
        let (Some(issuer), Some(audience)) = (claims["iss"].as_str(), audience.as_str()) else {
            return Err(anyhow!("the dev token names no issuer or audience"));
        };
        let server = servers::start_bare(
            paths,
            Some(&floors.required.url()),
            Some(&format!("{}/dev/demo/api/me", upstream.base())),
            Some((issuer, audience)),
        )
        .await?;
        eprintln!(
            "bench: floor + required work (pid {}) at {}",
            server.pid, server.base
        );
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
        demo_upstream: Some(upstream),
    };
    Ok((world, python))
}

/// S5 at one level, for sizing the next: (level, flows/s, CPU ms per flow
/// of server and database together).
type FlowSeen = (usize, f64, f64);

/// Links each S5 worker gets: enough for 1.5× (first level: 4×) the expected rate, which is
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
        // The setup's flows ran cold and one at a time: a rough guess.
        None => (1.0 / setup_flow_s.max(1e-3), 4.0),
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
    // Every round warms up anew: its warm-up uses links too.
    let span = rounds_of(Kind::Ours, Scenario::ConnectFlow, options.rounds) as f64
        * (options.warmup + options.duration).as_secs_f64();
    let per_worker = (margin * estimate * span / level as f64).ceil() as usize + 3;
    per_worker.min(20_000 / level.max(1)).max(3)
}

async fn bench(
    options: &Options,
    paths: &Paths,
    database: &prepare::Database,
    floors: &Floors,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    let load_before = procstat::load_average();
    let (mut world, python) = start(options, paths, database, floors).await?;
    let yardstick = dbref::measure(&database.url(), &paths.logs, options.smoke);
    let kinds: Vec<Kind> = world.servers.iter().map(|s| s.kind).collect();
    let mut runs: BTreeMap<report::Key, Vec<Measured>> = BTreeMap::new();
    let mut flow_seen: Option<FlowSeen> = None;
    // With S6 the census runs on S6's empty side while the other database
    // is seeded (its waits then cost nothing); without it, here.
    let mut census = if options.census && !options.scale {
        dbstats::census(
            &mut world,
            paths,
            &options.database_server,
            &database.name,
            &database.url(),
        )
        .await?
    } else {
        dbstats::Census::new()
    };

    for &scenario in &Scenario::ALL {
        if !options.scenarios.contains(&scenario) {
            continue;
        }
        let mut urls = vec![database.url()];
        for (kind, floor) in [
            (Kind::BareSql, &floors.bare),
            (Kind::Required, &floors.required),
        ] {
            if kinds.contains(&kind) {
                urls.push(floor.url());
            }
        }
        let took = settle::settle(&urls).await?;
        eprintln!(
            "bench: databases vacuumed and checkpointed before {} ({took:.1} s)",
            scenario.id()
        );
        if matches!(scenario, Scenario::RetryComplete | Scenario::CallAsUser) {
            for &kind in &kinds {
                if scenario.applies_to(kind) && !world.retries.contains_key(&kind) {
                    world.connect_users(kind).await?;
                }
            }
        }
        if scenario == Scenario::CallAsUser {
            // Demo access tokens live five minutes: minted just before.
            for floor in [Kind::BareSql, Kind::Required] {
                if kinds.contains(&floor) {
                    world.floor_tokens(floor).await?;
                }
            }
        }
        for &level in &options.levels {
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
            for round in 0..options.rounds {
                let runs_now = |kind: Kind| {
                    scenario.applies_to(kind) && round < rounds_of(kind, scenario, options.rounds)
                };
                for kind in round_order(&kinds, round, runs_now) {
                    let server = world.server(kind)?;
                    let db = match kind {
                        Kind::Ours => Some(database.name.as_str()),
                        Kind::BareSql => Some(floors.bare.name.as_str()),
                        Kind::Required => Some(floors.required.name.as_str()),
                        Kind::Python
                        | Kind::Bare
                        | Kind::Seeded
                        | Kind::Empty
                        | Kind::EmptyFloor
                        | Kind::Upstream => None,
                    };
                    let upstream = world
                        .demo_upstream
                        .as_ref()
                        .and_then(|u| upstream_process(scenario, kind, u.server.pid));
                    let (warmup, duration) = (options.warmup, options.duration);
                    let measured = match flow_jobs.as_mut() {
                        Some(jobs) => {
                            load::run(jobs, warmup, duration, server.pid, upstream, db).await
                        }
                        None => {
                            let mut jobs = scenarios::mcp_jobs(&world, scenario, kind, level)?;
                            load::run(&mut jobs, warmup, duration, server.pid, upstream, db).await
                        }
                    };
                    eprintln!(
                        "bench: {} {:<14} c={:<3} round {}/{} {:<12} {:>8.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  errors {}{}",
                        scenario.id(),
                        scenario.title(),
                        level,
                        round + 1,
                        rounds_of(kind, scenario, options.rounds),
                        kind.label(),
                        measured.rate(),
                        measured.p50_ms,
                        measured.p99_ms,
                        measured.errors,
                        callgrind::note(&measured, kind),
                    );
                    runs.entry((scenario, level, kind))
                        .or_default()
                        .push(measured);
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
    // S6 starts servers of its own: the run's are stopped first (their
    // pools would hold Postgres connections S6's servers need, and their
    // sweepers would run beside S6's).
    world.stop_servers().await;
    let scaled = if options.scale {
        Some(scale::run(&world, options, paths, database, &mut runs).await?)
    } else {
        None
    };
    if let Some(counted) = scaled.as_ref().and_then(|s| s.census.clone()) {
        census = counted;
    }

    let results: BTreeMap<report::Key, report::Summary> = runs
        .iter()
        .map(|(k, v)| (*k, report::summarize(v)))
        .collect();
    let table = report::table(&results);
    let errors = report::errors(&results);
    let mut targets = report::targets(
        &results,
        &options.levels,
        &yardstick,
        &census,
        scaled.as_ref(),
    );
    if options.is_full_run() {
        targets.push_str(&crate::targets::quarter_hour(started.elapsed()));
    }
    let census = report::census(&census);
    if options.callgrind {
        println!("{}", callgrind::table(&runs));
    }
    let data_scale = scaled
        .as_ref()
        .map(scale_report::data_scale)
        .unwrap_or_default();
    println!("\n{table}\n{data_scale}");
    if !errors.is_empty() {
        println!("Errors:\n{errors}");
    }
    if !options.smoke {
        if !census.is_empty() {
            println!("SQL statements per request (mcp-connect):\n\n{census}");
        }
        println!("Targets:\n{targets}");
    }
    if let Some(output) = &options.output {
        let builds = results.values().filter(|s| s.builds > 0).count();
        let document = document::render(
            options,
            paths,
            &document::Report {
                table: &format!("{table}\n{data_scale}"),
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
    let mut plans_ok = true;
    if let Some(scaled) = &scaled {
        let failing = scaled.checked.failures();
        if failing > 0 {
            eprintln!(
                "bench: the plan check found {failing} statement(s) reading a table of the service sequentially:\n{}",
                plans::describe(&scaled.checked)
            );
            // The smoke run checks that the harness works, not the service.
            plans_ok = options.smoke;
            if options.smoke {
                eprintln!("bench: (--smoke: reported, not failed)");
            }
        }
    }
    Ok(total_errors == 0 && !empty && plans_ok)
}

/// The process whose CPU time counts with `kind`'s in `scenario`: the
/// demo provider (`upstream`) that every server calls in S4, and that
/// mcp-connect's connect flows (S5) go through, so that each row holds
/// both ends of the calls it makes.
fn upstream_process(scenario: Scenario, kind: Kind, upstream: u32) -> Option<u32> {
    let calls_it = match scenario {
        Scenario::CallAsUser => true,
        Scenario::ConnectFlow => kind == Kind::Ours,
        _ => false,
    };
    calls_it.then_some(upstream)
}

fn median_secs(v: &[std::time::Duration]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().map(|d| d.as_secs_f64()).collect();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comparators_run_one_round_and_s5_half_of_them() {
        assert_eq!(rounds_of(Kind::Python, Scenario::Discover, 3), 1);
        assert_eq!(rounds_of(Kind::Bare, Scenario::Ask, 3), 1);
        assert_eq!(rounds_of(Kind::Bare, Scenario::RetryComplete, 3), 1);
        // bare rmcp is S1's floor: all its rounds.
        assert_eq!(rounds_of(Kind::Bare, Scenario::Discover, 3), 3);
        assert_eq!(rounds_of(Kind::Ours, Scenario::ConnectFlow, 6), 3);
        assert_eq!(rounds_of(Kind::Ours, Scenario::ConnectFlow, 1), 1);
        for floor in [Kind::Ours, Kind::BareSql, Kind::Required] {
            assert_eq!(rounds_of(floor, Scenario::RetryComplete, 3), 3);
        }
    }

    #[test]
    fn the_demo_providers_cpu_counts_where_its_calls_are_made() {
        for kind in [Kind::Ours, Kind::BareSql, Kind::Required] {
            assert_eq!(upstream_process(Scenario::CallAsUser, kind, 7), Some(7));
            assert_eq!(upstream_process(Scenario::RetryComplete, kind, 7), None);
            assert_eq!(upstream_process(Scenario::Discover, kind, 7), None);
        }
        assert_eq!(
            upstream_process(Scenario::ConnectFlow, Kind::Ours, 7),
            Some(7)
        );
        assert_eq!(upstream_process(Scenario::Ask, Kind::Ours, 7), None);
    }

    #[test]
    fn each_server_of_a_round_takes_the_first_and_the_last_place_in_turn() {
        use Kind::{Bare, BareSql, Ours, Python, Required};
        let kinds = [Ours, Python, Bare, BareSql, Required];
        let s3 = |round: usize| {
            round_order(&kinds, round, |k| {
                round < rounds_of(k, Scenario::RetryComplete, 3)
            })
        };
        assert_eq!(s3(0), [Ours, Python, Bare, BareSql, Required]);
        assert_eq!(s3(1), [BareSql, Required, Ours]);
        assert_eq!(s3(2), [Required, Ours, BareSql]);
        for kind in [Ours, BareSql, Required] {
            let last = (0..3).filter(|&r| s3(r).last() == Some(&kind)).count();
            assert_eq!(last, 1, "{kind:?} is last in one round of three");
        }
        assert!(round_order(&kinds, 1, |_| false).is_empty());
    }
}
