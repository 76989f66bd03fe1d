//! S6 data scale: two new mcp-connect servers, each on a database of its
//! own, started after the other scenarios are done and their servers
//! stopped. The first's database is seeded (`seed`), weighed, and the plans
//! of every request path's and the sweeper's statements are checked on it
//! (`capture`, `plans`); after an untimed pass of each scenario on both (`warm`),
//! S2, S3 and S4 run on it (the rows "mcp-connect, seeded"),
//! each in turn with the same run on the second, whose database stays
//! empty (the rows "mcp-connect, empty"), and S2 and S3 in turn with
//! those on a new bare rmcp + SQL, on an empty database of its own (the
//! rows "bare rmcp + SQL, empty": the empty side's floor in the same
//! conditions, see [`start_floor`]). The empty one is started, and
//! the statement census (`dbstats`) taken on it, while the other database
//! is seeded. On the seeded one the harness then measures what one ask,
//! one call and one connect write, and runs the sweeper on a backlog
//! (expired tickets, audit rows past retention) while S3 runs.
//!
//! Why a second server rather than the rows measured before the seed: on
//! this shared two-core machine the same cell moves by 10–30 % between
//! minutes of one run (see bench/NOTES.md), more than the 10 % the seeded
//! database may cost. Alternating the two, round by round, puts whatever
//! the machine is doing on both. Why two new servers rather than the run's
//! own for the seeded side: a server and database that have been through
//! S1–S5 (their pools, caches, statistics and the dead rows of S5) measured
//! slower at saturation than a new pair on the same data, so the seeded and
//! the empty side would differ by more than their data.

use std::{collections::BTreeMap, time::Instant};

use anyhow::{Context, anyhow};

use crate::{
    capture,
    client::Conn,
    dbstats::{self, Census},
    load::{self, Measured},
    lookup::{self, Lookup},
    options::Options,
    plans::{self, Checked},
    prepare::Database,
    psql,
    report::Key,
    scenarios::{self, Scenario},
    seed::{self, Scale, Weight},
    servers::{self, Kind, Paths},
    setup::World,
};

/// What one operation writes.
pub struct PerOp {
    pub op: &'static str,
    pub n: usize,
    /// WAL bytes per operation (the whole server's WAL over the window).
    pub wal: f64,
    /// WAL the server wrote in a window of the same length without us.
    pub idle_wal: f64,
    /// Rows inserted, updated or deleted per operation.
    pub rows: Option<f64>,
}

pub struct Sweep {
    pub level: usize,
    pub backlog_s: f64,
    pub quiet: Vec<Measured>,
    pub during: Vec<Measured>,
    pub outcome: String,
    /// Sequential scans per table while the sweeper ran.
    pub seq_scans: Vec<(String, i64)>,
}

pub struct Report {
    pub scale: Scale,
    pub fraction: f64,
    pub seed_s: f64,
    pub checkpoint_s: f64,
    pub weights: Vec<Weight>,
    pub checked: Checked,
    pub per_op: Vec<PerOp>,
    pub sweep: Sweep,
    /// The connection lookup alone on both databases, or why not.
    pub lookup: Result<Lookup, String>,
    /// Statements per request the pool served for want of a per-thread
    /// connection, per S6 cell, one per round.
    pub overflow: BTreeMap<Key, Vec<f64>>,
    /// The statement census, counted on the empty side during the seed.
    pub census: Option<Census>,
}

pub const SEEDED: [Scenario; 3] = [Scenario::Ask, Scenario::RetryComplete, Scenario::CallAsUser];

/// The scenarios S6's bare rmcp + SQL runs: S4's floor would need an upstream of its
/// own (S6's servers call the demo provider inside themselves, S1–S5's
/// upstream has stopped), and S2 and S3 are what the 0.95× targets read.
pub const FLOORED: [Scenario; 2] = [Scenario::Ask, Scenario::RetryComplete];

/// The sides of S6 in the order they run in `round`: the empty side, which
/// both comparisons read, in the middle, the others before and after it
/// in turn, so that whatever one leaves behind falls on each of the two
/// pairs compared alike over every two rounds (a rotation of three over
/// S6's four rounds ran the empty side just before the floor in three).
fn sides(round: usize, with_floor: bool) -> Vec<Kind> {
    let mut sides = vec![Kind::Seeded, Kind::Empty];
    if with_floor {
        sides.push(Kind::EmptyFloor);
    }
    if round % 2 == 1 {
        sides.reverse();
    }
    sides
}

/// S6 with the users of `world` (whose servers have been stopped: the two
/// servers here are the only ones running). `database` names the run; the
/// two databases of S6 are named after it and dropped at the end.
pub async fn run(
    world: &World,
    options: &Options,
    paths: &Paths,
    database: &Database,
    runs: &mut BTreeMap<Key, Vec<Measured>>,
) -> anyhow::Result<Report> {
    let (mut seeded, seeded_database) =
        fresh_server(world, options, paths, database, "seeded").await?;
    let url = seeded_database.url();
    let claims = servers::jwt_claims(&seeded.dev.token)?;
    let issuer = claims["iss"]
        .as_str()
        .ok_or_else(|| anyhow!("the dev token names no issuer"))?
        .to_owned();
    let scale = Scale::of(options.seed_fraction);
    eprintln!(
        "bench: S6: seeding {} connections ({} users × 5, with their grants), {} audit rows, {} live tickets, {} web sessions …",
        scale.users * 5,
        scale.users,
        scale.audit,
        scale.tickets,
        scale.sessions
    );
    // The empty side is started, and the statement census run on it,
    // while the other database is seeded: the census spends most of its
    // minute waiting for Postgres to publish counters, and it reads only
    // its own database's.
    let seeding = async {
        seed::data(&url, &paths.root, scale, &issuer)
            .await
            .context("seeding")
    };
    let empty_side = async {
        let (mut empty, empty_database) =
            fresh_server(world, options, paths, database, "empty").await?;
        let census = match options.census {
            true => Some(
                dbstats::census(
                    &mut empty,
                    paths,
                    &empty_database.server,
                    &empty_database.name,
                    &empty_database.url(),
                )
                .await?,
            ),
            false => None,
        };
        // Vacuumed again after the census's rows, as fresh_server left it.
        psql::value(&empty_database.url(), "VACUUM (ANALYZE)").await?;
        let floor_database = match options.servers.contains(&Kind::BareSql) {
            true => Some(start_floor(&mut empty, paths, database).await?),
            false => None,
        };
        anyhow::Ok((empty, empty_database, floor_database, census))
    };
    let ((seed_s, checkpoint_s), (mut empty, empty_database, floor_database, census)) =
        tokio::try_join!(seeding, empty_side)?;
    eprintln!("bench: S6: seeded in {seed_s:.1} s (then CHECKPOINT {checkpoint_s:.1} s)");
    let weights = seed::weights(&url).await?;

    let mut statements = capture::request_path_statements(paths, &url).await?;
    statements.extend(capture::sweeper_statements(&url).await?);
    statements.extend(plans::foreign_key_lookups(&url).await?);
    let checked = plans::check(&url, &paths.root, statements).await?;
    eprintln!(
        "bench: S6: plan check: {} statements, {} failing\n{}",
        checked.statements,
        checked.failures(),
        plans::describe(&checked)
    );

    warm(&seeded, &empty, floor_database.is_some(), options).await?;
    let rounds = options.scale_rounds();
    let mut overflows: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for scenario in SEEDED {
        for &level in &options.levels {
            for round in 0..rounds {
                let floor_runs = floor_database.is_some() && FLOORED.contains(&scenario);
                for side in sides(round, floor_runs) {
                    let (world, serves, db) = match side {
                        Kind::Seeded => (&seeded, Kind::Ours, &seeded_database),
                        Kind::EmptyFloor => (
                            &empty,
                            Kind::BareSql,
                            floor_database.as_ref().unwrap_or(&empty_database),
                        ),
                        _ => (&empty, Kind::Ours, &empty_database),
                    };
                    let (measured, overflow) =
                        timed_with_overflow(world, options, scenario, serves, level, db).await?;
                    eprintln!(
                        "bench: S6 {} c={level:<3} round {}/{} {:<7} {:>8.0} req/s  p99 {:>7.2} ms  errors {}  pool fallbacks/request {}",
                        scenario.id(),
                        round + 1,
                        rounds,
                        match side {
                            Kind::Seeded => "seeded",
                            Kind::EmptyFloor => "floor",
                            _ => "empty",
                        },
                        measured.rate(),
                        measured.p99_ms,
                        measured.errors,
                        match (overflow, side) {
                            (Some(o), _) => format!("{o:.2}"),
                            (None, Kind::EmptyFloor) => "–".to_owned(),
                            (None, _) => "?".to_owned(),
                        },
                    );
                    if let Some(o) = overflow {
                        overflows
                            .entry((scenario, level, side))
                            .or_default()
                            .push(o);
                    }
                    runs.entry((scenario, level, side))
                        .or_default()
                        .push(measured);
                }
            }
        }
    }
    let lookup = lookup_alone(options, paths, &checked, &seeded_database, &empty_database).await;
    empty.stop_servers().await;
    drop(empty_database);
    drop(floor_database);
    let per_op = per_op(
        &mut seeded,
        options,
        paths,
        &seeded_database,
        census.as_ref(),
    )
    .await?;
    let sweep = sweep(&seeded, options, paths, &seeded_database, scale, &issuer).await?;
    seeded.stop_servers().await;
    Ok(Report {
        scale,
        fraction: options.seed_fraction,
        seed_s,
        checkpoint_s,
        weights,
        checked,
        per_op,
        sweep,
        lookup,
        overflow: overflows,
        census,
    })
}

/// The connection lookup by itself on both databases (`crate::lookup`), at
/// the level the sweeper is measured at.
async fn lookup_alone(
    options: &Options,
    paths: &Paths,
    checked: &Checked,
    seeded: &Database,
    empty: &Database,
) -> Result<Lookup, String> {
    let sql = lookup::find(&checked.list)
        .ok_or("the connection lookup was not among the captured statements")?;
    let clients = measured_level(options);
    let measured = lookup::measure(
        sql,
        (&seeded.url(), &empty.url()),
        &paths.logs,
        clients,
        options.duration,
        // A round is a second or two of pgbench and its rate moves by up to
        // ±8 % from one to the next here: twice the scenarios' rounds.
        options.scale_rounds() * 2,
    )
    .await
    .map_err(|e| format!("{e:#}"))?;
    eprintln!(
        "bench: S6: the connection lookup alone (pgbench, {clients} clients): seeded {:.0}, empty {:.0} statements/s",
        measured.seeded.iter().sum::<f64>() / measured.seeded.len().max(1) as f64,
        measured.empty.iter().sum::<f64>() / measured.empty.len().max(1) as f64,
    );
    Ok(measured)
}

/// How long each side runs each scenario, untimed, before the first
/// measured cell.
const WARM: std::time::Duration = std::time::Duration::from_secs(2);

/// Starts S6's bare rmcp + SQL (S2's and S3's floor in S6's conditions) on
/// a new database `<run>_floor`, beside `empty` (whose users it marks
/// connected, as the main phase's floor does): the main phase's floors
/// have been through S1–S5 with
/// every other server of the run, and in the run of 6 December the empty
/// side served 2–16 % more than the same code in the main phase. Read
/// against a floor started with it, the empty side says whether that is
/// the main phase slowing every server or mcp-connect in particular.
async fn start_floor(
    empty: &mut World,
    paths: &Paths,
    database: &Database,
) -> anyhow::Result<Database> {
    let floor_database = Database {
        server: database.server.clone(),
        name: format!("{}_floor", database.name),
        tls: database.tls,
    };
    let server = servers::start_bare(paths, Some(&floor_database.url()), None, None).await?;
    eprintln!(
        "bench: S6: bare rmcp + SQL, empty (pid {}) at {}",
        server.pid, server.base
    );
    empty.servers.push(server);
    empty.connect_users(Kind::BareSql).await?;
    psql::value(&floor_database.url(), "VACUUM (ANALYZE)").await?;
    Ok(floor_database)
}

/// Runs S2, S3 and S4 on both sides once, untimed, at the highest level
/// (and S2 and S3 on the floor, when it runs).
/// The seed ends with a CHECKPOINT and leaves shared_buffers full of the
/// rows it wrote: the first requests after it read the pages they need
/// (the indexes' inner pages, the ticket hashes' leaves) from the
/// operating system and write each page they change whole into the WAL
/// once. A deployment that has been serving does that once per
/// checkpoint interval, spread over its minutes; a 3-second cell right
/// after the seed took all of it (the first seeded S2 cell measured
/// 0.83–0.86× of the empty side's, the same cell a round later 0.98×).
async fn warm(seeded: &World, empty: &World, floor: bool, options: &Options) -> anyhow::Result<()> {
    let level = options.levels.iter().copied().max().unwrap_or(1);
    for scenario in SEEDED {
        let floor_side = (floor && FLOORED.contains(&scenario)).then_some((empty, Kind::BareSql));
        for (world, serves) in [(seeded, Kind::Ours), (empty, Kind::Ours)]
            .into_iter()
            .chain(floor_side)
        {
            let mut jobs = scenarios::mcp_jobs(world, scenario, serves, level)?;
            let pid = world.server(serves)?.pid;
            let m = load::run(&mut jobs, std::time::Duration::ZERO, WARM, pid, None, None).await;
            if m.errors > 0 {
                // The measured cells count theirs; these are only told.
                eprintln!(
                    "bench: S6: {} errors while warming up {}",
                    m.errors,
                    scenario.id()
                );
            }
        }
    }
    Ok(())
}

/// S6's single-level measurements run at 16 concurrent, or at the highest
/// level when 16 is not among them.
fn measured_level(options: &Options) -> usize {
    if options.levels.contains(&16) {
        16
    } else {
        options.levels.iter().copied().max().unwrap_or(1)
    }
}

/// A new mcp-connect on a new database `<run>_<name>`, the S3/S4 users of
/// `world` connected through the same browser flows, with tokens of its own
/// (its dev identity provider signs them) for the same user names, and its
/// tables vacuumed and analyzed (as the seed's are, and any database's by
/// autovacuum): the planner then chooses on both sides with what it knows,
/// and inserts on both find free space where the free-space map says.
async fn fresh_server(
    world: &World,
    options: &Options,
    paths: &Paths,
    database: &Database,
    name: &str,
) -> anyhow::Result<(World, Database)> {
    let fresh_database = Database {
        server: database.server.clone(),
        name: format!("{}_{name}", database.name),
        tls: database.tls,
    };
    let (server, dev) = servers::start_ours(
        paths,
        &fresh_database.url(),
        options.quiet_logs.then_some("warn"),
        &format!("mcp-connect-{name}.log"),
        None,
    )
    .await?;
    eprintln!(
        "bench: S6: mcp-connect, {name} (pid {}) at {}",
        server.pid, server.base
    );
    let users: Vec<String> = world
        .ask_users
        .iter()
        .chain(&world.conn_users)
        .cloned()
        .collect();
    let tokens = servers::mint_tokens(paths, &fresh_database.url(), dev.port, &users).await?;
    let mut fresh = World {
        dev,
        servers: vec![server],
        tokens,
        ask_users: world.ask_users.clone(),
        conn_users: world.conn_users.clone(),
        retries: Default::default(),
        flow_times: Vec::new(),
        demo_upstream: None,
    };
    fresh.connect_users(Kind::Ours).await?;
    psql::value(&fresh_database.url(), "VACUUM (ANALYZE)").await?;
    Ok((fresh, fresh_database))
}

async fn timed(
    world: &World,
    options: &Options,
    scenario: Scenario,
    level: usize,
    database: &Database,
) -> anyhow::Result<Measured> {
    timed_with_overflow(world, options, scenario, Kind::Ours, level, database)
        .await
        .map(|(measured, _)| measured)
}

/// [`timed`] on the server of `world` that `serves` (mcp-connect, or S6's
/// floor), and for mcp-connect how many statements per request its shared
/// pool served because all its per-thread connections were taken (each
/// one a round trip more: the pool checks a connection it takes back).
/// Read from the server's `/metrics` around the window (warm-up included,
/// so the count is of the warm-up's requests too: a ratio, not a census).
async fn timed_with_overflow(
    world: &World,
    options: &Options,
    scenario: Scenario,
    serves: Kind,
    level: usize,
    database: &Database,
) -> anyhow::Result<(Measured, Option<f64>)> {
    let mut jobs = scenarios::mcp_jobs(world, scenario, serves, level)?;
    let server = world.server(serves)?;
    let counts = serves == Kind::Ours;
    let before = match counts {
        true => pool_overflow(&server.base).await,
        false => None,
    };
    let measured = load::run(
        &mut jobs,
        options.warmup,
        options.duration,
        server.pid,
        None,
        Some(&database.name),
    )
    .await;
    let after = match counts {
        true => pool_overflow(&server.base).await,
        false => None,
    };
    let requests =
        measured.ok as f64 * (1.0 + options.warmup.as_secs_f64() / options.duration.as_secs_f64());
    let per_request = match (before, after) {
        (Some(b), Some(a)) if requests > 0.0 => Some(a.saturating_sub(b) as f64 / requests),
        _ => None,
    };
    Ok((measured, per_request))
}

/// The server's count of statements served by the pool for want of a
/// per-thread connection (`mcp_connect_db_hot_overflow_total`), from its
/// `/metrics` (open on loopback in dev mode); `None` if it cannot be read.
async fn pool_overflow(base: &str) -> Option<u64> {
    let mut conn = Conn::new(base).ok()?;
    let reply = conn.get("/metrics").await.ok()?;
    if reply.status != 200 {
        return None;
    }
    metric(&reply.text(), "mcp_connect_db_hot_overflow_total")
}

/// The value of the unlabelled sample `name` in a Prometheus text exposition.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// WAL per ask, call and connect, one client, and the rows each writes
/// from the census (`census`: counted on the empty side, and rows written
/// do not depend on the rows already there).
async fn per_op(
    world: &mut World,
    options: &Options,
    paths: &Paths,
    database: &Database,
    census: Option<&Census>,
) -> anyhow::Result<Vec<PerOp>> {
    let url = database.url();
    let (n, flows) = if options.smoke { (20, 3) } else { (200, 20) };
    // A user of its own, never connected before: the first flow is a
    // first connect, the others re-connect the same account. The links
    // are minted (asks) before anything is measured.
    let mut flow = Some(scenarios::new_user_flows(world, paths, &url, "wal-0", flows).await?);
    let mut out = Vec::new();
    for (op, scenario) in [
        ("ask (S2)", Scenario::Ask),
        ("call (S4)", Scenario::CallAsUser),
        ("connect (S5)", Scenario::ConnectFlow),
    ] {
        let (mut jobs, count) = match scenario {
            Scenario::ConnectFlow => (flow.take().into_iter().collect(), flows),
            _ => (scenarios::mcp_jobs(world, scenario, Kind::Ours, 1)?, n),
        };
        let lsn = seed::wal_position(&url).await?;
        let started = Instant::now();
        let done = jobs[0].repeat(count).await;
        let lsn_after = seed::wal_position(&url).await?;
        let window = started.elapsed();
        tokio::time::sleep(window).await;
        let idle = seed::wal_position(&url).await?.saturating_sub(lsn_after);
        if done != count {
            return Err(anyhow!("{op}: {done} of {count} succeeded"));
        }
        out.push(PerOp {
            op,
            n: count,
            wal: lsn_after.saturating_sub(lsn) as f64 / count as f64,
            idle_wal: idle as f64 / count as f64,
            rows: census.and_then(|c| c.get(&scenario)).map(|&(_, rows)| rows),
        });
    }
    Ok(out)
}

async fn seq_scans(url: &str) -> anyhow::Result<BTreeMap<String, i64>> {
    let v = psql::value(
        url,
        "SELECT jsonb_object_agg(relname, seq_scan) FROM pg_stat_user_tables",
    )
    .await?;
    Ok(serde_json::from_str(&v)?)
}

/// S3 at 16 quiet, then again while the service's sweeper deletes a backlog
/// of expired tickets and audit rows past retention, for as long as the
/// sweep lasts (at most `options.sweep_limit`, after which it is stopped).
async fn sweep(
    world: &World,
    options: &Options,
    paths: &Paths,
    database: &Database,
    scale: Scale,
    issuer: &str,
) -> anyhow::Result<Sweep> {
    let url = database.url();
    let level = measured_level(options);
    eprintln!(
        "bench: S6: {} expired tickets and {} audit rows past retention for the sweeper …",
        scale.backlog, scale.old_audit
    );
    // The server sweeps on its own every five minutes from its start: that
    // sweep must neither take the backlog while it is added nor run beside
    // the quiet rounds. Holding the sweepers' lock makes it skip its turn
    // until the measured sweep starts.
    let options_for = |limit: std::time::Duration| {
        mcp_connect::db::connect_options(&url.clone().into())
            .map(|o| o.options([("statement_timeout", format!("{}ms", limit.as_millis()))]))
    };
    let held = mcp_connect::sweeper::hold_off(options_for(HOLD_OFF_STATEMENT)?)
        .await
        .context("holding the server's sweeper off")?;
    let backlog_s = seed::backlog(&url, &paths.root, scale, issuer).await?;
    psql::value(&url, "CHECKPOINT").await?;
    let mut quiet = Vec::new();
    // The quiet p99 is the ratio's denominator: twice S6's rounds (two
    // with `--rounds 1`), so that one lucky or unlucky window does not make
    // it (the two runs it had lay up to a fifth apart).
    for _ in 0..options.scale_rounds() * 2 {
        quiet.push(timed(world, options, Scenario::RetryComplete, level, database).await?);
    }
    let before = seq_scans(&url).await?;
    // A failed goodbye drops the socket, which ends the session (and the
    // lock) as well.
    let _ = held.release().await;
    let limit = options.sweep_limit;
    // The sweeper paces itself (batches with rests between them); a sweep
    // still under way at the limit is dropped, as a shutting-down instance
    // drops it, and no single statement may outlast the limit either.
    let connect = options_for(limit)?;
    let pool = mcp_connect::db::pool(connect, 1);
    let sweeper = tokio::spawn(async move {
        let started = Instant::now();
        let retention = mcp_connect::config::AuditSettings::default().retention();
        // The server under measurement sweeps too (every five minutes from
        // its start): while its sweep holds the lock, this one waits for
        // it, S3 running all the while, and then deletes what is left.
        let mut waited = false;
        let swept = tokio::time::timeout(limit, async {
            loop {
                match mcp_connect::sweeper::sweep_once(&pool, retention).await {
                    Ok(Some(deleted)) => return Ok((deleted, waited)),
                    Ok(None) => {
                        waited = true;
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .await;
        pool.close().await;
        (started.elapsed().as_secs_f64(), swept)
    });
    let mut during = Vec::new();
    loop {
        let mut jobs = scenarios::mcp_jobs(world, Scenario::RetryComplete, Kind::Ours, level)?;
        let pid = world.server(Kind::Ours)?.pid;
        let m = load::run(
            &mut jobs,
            std::time::Duration::ZERO,
            options.duration,
            pid,
            None,
            Some(&database.name),
        )
        .await;
        during.push(m);
        if sweeper.is_finished() {
            break;
        }
    }
    let (took, swept) = sweeper.await?;
    // The sweeper's backend has gone; its counters are published on exit.
    // Read them before counting what is left, which scans the table too.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let after = seq_scans(&url).await?;
    let seq_scans = after
        .into_iter()
        .map(|(t, n)| {
            let d = n - before.get(&t).copied().unwrap_or(0);
            (t, d)
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    let (tickets_left, audit_left) = seed::backlog_left(&url).await?;
    let outcome = match swept {
        Ok(Ok((n, false))) => format!(
            "deleted {n} rows in {took:.1} s, leaving {tickets_left} expired tickets and {audit_left} old audit rows"
        ),
        Ok(Ok((n, true))) => format!(
            "found the server's own sweep under way, waited for it and deleted the {n} rows it left, \
             {took:.1} s in all, leaving {tickets_left} expired tickets and {audit_left} old audit rows"
        ),
        Ok(Err(e)) => format!("did not finish: failed after {took:.0} s ({e})"),
        // Each batch commits on its own: what went before the stop stays gone.
        Err(_) => format!(
            "was stopped at the limit, after {took:.0} s, with {tickets_left} of the {} expired tickets \
             and {audit_left} of the {} old audit rows left",
            scale.backlog, scale.old_audit
        ),
    };
    eprintln!("bench: S6: sweeper {outcome}");
    Ok(Sweep {
        level,
        backlog_s,
        quiet,
        during,
        outcome,
        seq_scans,
    })
}

/// How long taking the sweepers' lock may wait for a sweep under way: the
/// server's own sweep of the S6 database holds it for milliseconds when
/// nothing has expired.
const HOLD_OFF_STATEMENT: std::time::Duration = std::time::Duration::from_secs(60);

/// The p99 of a set of runs: the median of their p99s.
pub fn p99(runs: &[Measured]) -> f64 {
    crate::report::summarize(runs).p99
}

#[cfg(test)]
mod tests {
    use super::{metric, sides};

    #[test]
    fn the_pairs_s6_compares_run_in_each_order_alike() {
        use crate::servers::Kind::{Empty, EmptyFloor, Seeded};
        assert_eq!(sides(0, false), [Seeded, Empty]);
        assert_eq!(sides(1, false), [Empty, Seeded]);
        assert_eq!(sides(0, true), [Seeded, Empty, EmptyFloor]);
        assert_eq!(sides(1, true), [EmptyFloor, Empty, Seeded]);
        // Over S6's four rounds, each pair compared in each order twice.
        let before = |a, b| {
            (0..4)
                .filter(|&r| {
                    let order = sides(r, true);
                    let at = |k| order.iter().position(|&x| x == k).unwrap();
                    at(a) < at(b)
                })
                .count()
        };
        assert_eq!(before(Seeded, Empty), 2);
        assert_eq!(before(Empty, EmptyFloor), 2);
    }

    #[test]
    fn a_counter_is_read_from_the_exposition_by_its_exact_name() {
        let text = "# HELP mcp_connect_db_hot_overflow_total Statements …\n\
                    # TYPE mcp_connect_db_hot_overflow_total counter\n\
                    mcp_connect_db_hot_overflow_totals 7\n\
                    mcp_connect_db_hot_overflow_total 1234\n";
        assert_eq!(
            metric(text, "mcp_connect_db_hot_overflow_total"),
            Some(1234)
        );
        assert_eq!(metric(text, "mcp_connect_db_hot_connections"), None);
    }
}
