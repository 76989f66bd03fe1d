//! BENCHMARKS.md as a whole: what was run and how, the machine, the
//! table, the statement counts, the targets, and the hand-written notes of
//! `bench/NOTES.md`.

use crate::{options::Options, scenarios::Scenario, servers::Paths};

pub struct Report<'a> {
    pub table: &'a str,
    pub census: &'a str,
    pub errors: &'a str,
    pub targets: &'a str,
    pub machine: &'a str,
    pub wall: f64,
    pub load: (f64, f64),
    pub noisy_cells: (usize, usize),
}

pub fn render(options: &Options, paths: &Paths, c: &Report<'_>) -> String {
    let notes = std::fs::read_to_string(paths.root.join("bench/NOTES.md"))
        .unwrap_or_else(|_| "(no notes: bench/NOTES.md is missing)\n".to_owned());
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let mut scenarios: String = Scenario::ALL
        .iter()
        .map(|s| format!("- **{} {}**: {}\n", s.id(), s.title(), s.what()))
        .collect();
    scenarios.push_str(
        "- **S6 data scale**: after S1–S5 (their servers stopped), two new mcp-connect servers with \
         databases of their own; the first's seeded with server-side SQL (`bench/sql/seed.sql`), both \
         warmed with 2 s of S2, S3 and S4 each (untimed), then S2, S3 and S4 on it (rows \"mcp-connect, seeded\"), each run in turn with the same run on the \
         second, whose database stays empty (rows \"mcp-connect, empty\": *seeded ÷ empty* compares \
         the two; S6's floor is the connection lookup, S3's one statement, run alone on both databases \
         with pgbench), S2 and S3 in turn with those on a third new server, bare rmcp + SQL on an empty \
         database of its own (rows \"bare rmcp + SQL, empty (S6)\": the floor in S6's conditions, against \
         which the empty side is read in the column *ours ÷ bare + SQL*), the plans of every request path's and the sweeper's \
         statements and foreign key lookups checked, bytes per row, what one operation writes, and S3 while the \
         sweeper deletes a backlog of expired tickets and audit rows past retention (see Data scale)\n",
    );
    let levels: Vec<String> = options.levels.iter().map(ToString::to_string).collect();
    format!(
        "# Benchmarks\n\n\
         Written by `cargo run --release -p bench` (the harness in `bench/`); the notes at the end come from \
         `bench/NOTES.md`. Everything runs on this machine, in one run, on 127.0.0.1, driven by one closed-loop \
         load generator (one keep-alive connection per concurrent client, every answer checked: a wrong answer \
         is an error). Servers: **mcp-connect** (`target/release/mcp-connect dev`, Postgres over loopback TCP without TLS as on \
         the compose network, JSON logs at info as in production), the **Python SDK** v2 (`mcp==2.3.0`, `MCPServer`, stateless Streamable HTTP, \
         uvicorn with uvloop + httptools, one worker, JWT bearer tokens checked with PyJWT, default sealed \
         `requestState`), **bare rmcp** (`bench-bare`: the same actix ⇄ rmcp bridge and rmcp configuration, \
         no database, no encryption, no token check, no logging: S1's floor), and **bare rmcp + SQL** \
         (`bench-bare --database`, S2–S4: the same again plus exactly mcp-connect's SQL — its tables, \
         queries and per-request connections, on a database of its own — and for S4 the same upstream call \
         with the stored token, to the same demo provider in a process of its own, so that \"ours ÷ bare + SQL\" is what mcp-connect costs beyond its database \
         round trips and its provider call: the floor of S2, S3 and S4). Beside them, at every level in S1–S4, \
         **floor + required work** (`bench-bare --database --required`): bare rmcp + SQL plus the work \
         mcp-connect may not leave out, each piece by mcp-connect's own code — the bearer token verified \
         against the issuer's keys on every request (with the same cache of recently verified tokens), the \
         access line and request metrics, the `requestState` sealed and bound to the request and opened on \
         the retry, the stored upstream token sealed at rest and opened for each use: \"floor + required \
         work ÷ floor\" is the price of those pieces, \"ours ÷ floor + required work\" what the rest of \
         mcp-connect costs.\n\n\
         {scenarios}\n\
         ## This run\n\n\
         {date}; {} s per run after {} s of warm-up, {} rounds per cell interleaved across servers (one for the Python SDK and, in S2 and S3, for \
         bare rmcp: no target is measured against them; S5's cells half as many; S6's cells {}; medians shown; errors summed; peak RSS is the highest of the rounds, reset before each); concurrency {}; whole run {:.0} s.\n\
         Load average {:.2} at the start, {:.2} at the end; other builds (rustc/cargo) were running during {} of {} cells \
         (marked ⚠). The machine is shared: compare ratios within a row group, not absolute numbers across runs.\n\n\
         {}\n\
         CPU columns are seconds of CPU per 1,000 requests (S5: per 1,000 flows, i.e. milliseconds per flow): \
         *server* is the server process (utime + stime; for S4, and for mcp-connect in S5, also the demo provider's, another mcp-connect dev that every server calls upstream), *DB* the Postgres backends of the server's database, \
         *client* the load generator. \"ours ÷ X\" is the ratio of requests per second.\n\n\
         {}\n\
         {}\
         {}\
         ## Targets\n\n{}\n\
         ## Notes\n\n{}",
        num(options.duration.as_secs_f64()),
        num(options.warmup.as_secs_f64()),
        options.rounds,
        options.scale_rounds(),
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
        if c.census.lines().count() > 2 {
            format!(
                "SQL statements per request of mcp-connect (one client: 200 requests of each of S1–S4 and 20 \
                 connect flows of one new user, S5's row per flow; from `pg_stat_database`, where every \
                 autocommit statement is one transaction; counted on S6's empty side while the other database \
                 is seeded, or before S1 when S6 does not run):\n\n{}\n",
                c.census
            )
        } else {
            String::new()
        },
        c.targets,
        notes
    )
}

fn num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}
