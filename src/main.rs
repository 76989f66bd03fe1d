//! The `mcp-connect` command line.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use mcp_connect::{
    config::{MigrationSettings, Settings},
    crypto::KeyRing,
    db,
    startup::Application,
    telemetry,
};

mod commands {
    pub mod users;
}

/// mimalloc rather than the C library's allocator: a request makes a few
/// hundred small allocations across two worker threads, and glibc's spent
/// about a tenth of a request's CPU on them (its free lists, and
/// `malloc_consolidate` whenever a response buffer grew past a kilobyte);
/// see `bench/NOTES.md`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "mcp-connect", version, about = "An MCP server that lets MCP clients use a person's \
third-party accounts without ever seeing their credentials.", long_about = None)]
struct Cli {
    /// A TOML configuration file; `MCP_CONNECT_…` environment variables override it.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "MCP_CONNECT_CONFIG_FILE"
    )]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the service (production). Migrates the database first.
    Serve,
    /// Run a self-contained development server on 127.0.0.1 with a built-in
    /// identity provider; needs nothing but a Postgres.
    Dev(mcp_connect::dev::DevArgs),
    /// Apply database migrations and exit. Needs only `database_url` (and
    /// reads `database_create_if_missing` and `log_format`).
    Migrate,
    /// Manage encryption keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Manage the stored third-party tokens.
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
    /// Who has connections, what is kept about one person, and removing
    /// them (audits, offboarding, an erasure request). Needs the service's
    /// configuration and applies pending migrations first, as `serve` does
    /// (`list` and `show` too): run it from the image version the instances
    /// run.
    Users {
        #[command(subcommand)]
        command: commands::users::UsersCommand,
    },
    /// Ask a running instance whether it is ready (its `/readyz`, or
    /// `--url`): exits 0 on a 2xx answer, 1 otherwise. For container health
    /// checks (the image has no other HTTP client).
    Health {
        /// The URL to ask [default: `/readyz` on the port of `bind`, as the
        /// configuration file and MCP_CONNECT_BIND set it (8080 unless
        /// they do), on 127.0.0.1 when it binds every address].
        #[arg(long)]
        url: Option<String>,
        /// Seconds to wait for the answer (at least 1).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        timeout: u64,
    },
    /// Delete expired tickets, OAuth flows and sessions, audit rows past
    /// `audit.retention_days` and failed webhook events past
    /// `webhooks.failed_retention_days`, now (the service also does this in
    /// the background). Paced as the background sweep is, unless
    /// `--no-pause`. Needs the service's whole configuration, as `serve`
    /// reads it (keys, public URL, issuer, and each provider's client
    /// secret), and applies pending migrations first, as `serve` does: run
    /// it from the image version the instances run.
    Purge {
        /// Delete without resting between batches and without the cap of
        /// 250,000 audit rows per sweep: for a maintenance window, when a
        /// large backlog should go as fast as Postgres deletes it (requests
        /// served meanwhile compete with it).
        #[arg(long)]
        no_pause: bool,
    },
}

#[derive(Subcommand, Debug)]
enum TokensCommand {
    /// Re-seal every stored token with the first key of MCP_CONNECT_KEYS, so
    /// an older key can be retired (connections, and the tokens of
    /// revocations still owed). Exits 1 while a connection or a revocation
    /// owed is left on an older key, holds tokens sealed by a key not in
    /// MCP_CONNECT_KEYS, or could not be re-sealed (each is named). Needs
    /// the service's configuration and applies
    /// pending migrations first, as `serve` does: run it from the image
    /// version the instances run.
    Rekey,
    /// For a key that is gone for good: ask the users of every connection
    /// sealed by KEY_ID to connect again (their tokens cannot be opened by
    /// any instance) and drop those tokens, so that start-up and `tokens
    /// rekey` stop naming the key; revocations still owed whose tokens the
    /// key sealed are given up (their access may stay live at the provider
    /// until it expires). Refused while MCP_CONNECT_KEYS holds the
    /// key. If the key can still be found, add it back instead: nothing is
    /// lost then, while after this the users must connect again. Without
    /// --yes it prints what it would change, changes nothing, and exits 1
    /// where something would change.
    ForgetKey {
        /// The key id, as start-up's warning or `tokens rekey` names it.
        key_id: String,
        /// Forget the key, rather than print what forgetting it would change.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand, Debug)]
enum KeysCommand {
    /// Print a new random AES-256 key entry (`kid:base64`) for MCP_CONNECT_KEYS.
    Generate {
        /// The key id to give it: 1 to 32 letters, digits, `-` or `_`
        /// (default: `k`, today's date and six random hex digits, e.g.
        /// `k20260514-3fa91c`, so that keys made on one day differ).
        #[arg(long, value_parser = key_id)]
        id: Option<String>,
    },
}

/// `keys generate --id`, checked as the key ring will check it.
fn key_id(id: &str) -> Result<String, String> {
    if mcp_connect::crypto::is_key_id(id) {
        Ok(id.to_owned())
    } else {
        Err("a key id is 1 to 32 letters, digits, `-` or `_`".to_owned())
    }
}

/// The application's state without serving and without background tasks:
/// for maintenance commands.
async fn offline_state(
    config: Option<&std::path::Path>,
) -> anyhow::Result<mcp_connect::state::AppState> {
    let settings = Settings::load(config)?;
    telemetry::init(settings.log_format);
    Ok(mcp_connect::startup::for_maintenance(settings).await?)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Keys {
            command: KeysCommand::Generate { id },
        } => {
            let id = id.unwrap_or_else(mcp_connect::crypto::new_key_id);
            let entry = KeyRing::generate_entry(&id);
            KeyRing::from_entries([entry.as_str()])?;
            println!("{entry}");
            Ok(())
        }
        Command::Health { url, timeout } => {
            let url = match url {
                Some(url) => url,
                None => mcp_connect::config::ListenSettings::load(cli.config.as_deref())?
                    .readiness_url(),
            };
            let status =
                mcp_connect::healthcheck::probe(&url, std::time::Duration::from_secs(timeout))
                    .await?;
            println!("{url}: {status}");
            Ok(())
        }
        Command::Dev(args) => {
            // Dev mode makes its own settings (a built-in issuer, the demo
            // provider, loopback URLs); a file meant for `serve` would be
            // silently half-applied at best.
            if let Some(file) = cli.config.or_else(|| args.config.clone()) {
                anyhow::bail!(
                    "dev does not read a configuration file ({}, from --config or MCP_CONNECT_CONFIG_FILE); \
                     it reads MCP_CONNECT_… environment variables only. The file is for serve, migrate, purge, tokens, users and health.",
                    file.display()
                );
            }
            mcp_connect::dev::run(args).await
        }
        Command::Migrate => {
            let settings = MigrationSettings::load(cli.config.as_deref())?;
            telemetry::init(settings.log_format);
            let options = db::connect_options(&settings.database_url)?;
            if settings.database_create_if_missing {
                db::create_database_if_missing(&options, db::ANSWER_WITHIN).await?;
            }
            let pool = db::pool(options, 2);
            db::migrate(&pool, db::ANSWER_WITHIN).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Tokens {
            command: TokensCommand::Rekey,
        } => {
            let state = offline_state(cli.config.as_deref()).await?;
            let rekeyed = state.connect.rekey().await?;
            let n = rekeyed.resealed;
            tracing::info!(
                resealed = n,
                key = state.keys.current_key_id(),
                "tokens re-sealed"
            );
            println!(
                "re-sealed {n} connection(s) with key {}",
                state.keys.current_key_id()
            );
            for (id, why) in &rekeyed.failed {
                println!("connection {id} not re-sealed: {why}");
            }
            if rekeyed.resealed_revocations > 0 {
                println!(
                    "re-sealed {} revocation(s) still owed with key {}",
                    rekeyed.resealed_revocations,
                    state.keys.current_key_id()
                );
            }
            for (id, why) in &rekeyed.failed_revocations {
                println!("revocation still owed {id} not re-sealed: {why}");
            }
            if rekeyed.revocations_on_older_keys > 0 {
                println!(
                    "{} revocation(s) still owed were sealed by an older key while this ran, run this again",
                    rekeyed.revocations_on_older_keys
                );
            }
            let owed_missing =
                mcp_connect::connect::stale_keys::missing_revocation_keys(&state.connect).await?;
            if !owed_missing.is_empty() {
                let rows: i64 = owed_missing.iter().map(|(_, n)| n).sum();
                let ids: Vec<&str> = owed_missing.iter().map(|(kid, _)| kid.as_str()).collect();
                println!(
                    "{rows} revocation(s) still owed are sealed by keys not in MCP_CONNECT_KEYS: {} (add those keys back and run this again; for a key that is gone for good, `tokens forget-key KEY_ID` gives them up)",
                    ids.join(", ")
                );
            }
            let missing = mcp_connect::connect::stale_keys::missing_keys(&state.connect).await?;
            if !missing.is_empty() {
                let rows: i64 = missing.iter().map(|(_, n)| n).sum();
                let ids: Vec<&str> = missing.iter().map(|(kid, _)| kid.as_str()).collect();
                println!(
                    "{rows} connection(s) still sealed by keys not in MCP_CONNECT_KEYS: {} (add those keys back and run this again; for a key that is gone for good, `tokens forget-key KEY_ID` asks their users to connect again)",
                    ids.join(", ")
                );
            }
            if rekeyed.left_on_older_keys > 0 {
                println!(
                    "{} connection(s) were sealed again by an older key while this ran (an instance still seals with it: give every instance the new key first), run this again",
                    rekeyed.left_on_older_keys
                );
            }
            // A script must not read either as done.
            let mut left = Vec::new();
            if !rekeyed.finished() {
                // The older keys still seal rows: not yet safe to retire.
                left.push(format!(
                    "not every connection and revocation still owed is sealed by key {} yet; do not retire the older keys",
                    state.keys.current_key_id()
                ));
            }
            if !owed_missing.is_empty() {
                left.push(
                    "revocations still owed hold tokens sealed by keys not in MCP_CONNECT_KEYS (above)"
                        .to_owned(),
                );
            }
            if !missing.is_empty() {
                left.push(
                    "connections hold tokens sealed by keys not in MCP_CONNECT_KEYS (above)"
                        .to_owned(),
                );
            }
            if !left.is_empty() {
                anyhow::bail!("{}", left.join("; "));
            }
            Ok(())
        }
        Command::Tokens {
            command: TokensCommand::ForgetKey { key_id, yes },
        } => {
            use mcp_connect::connect::stale_keys;
            let state = offline_state(cli.config.as_deref()).await?;
            if !yes {
                // Not undone once done: run against a ring that lacks a key
                // the serving instances still hold (a shell with another
                // MCP_CONNECT_KEYS), it would drop tokens they open.
                let would = stale_keys::would_forget(&state.connect, &key_id).await?;
                for line in would.report(&key_id) {
                    println!("{line}");
                }
                if would.changes_anything() {
                    anyhow::bail!(
                        "nothing was changed: add --yes to forget key {key_id} (only for a key gone for good: \
                         one that can still be found is added back to MCP_CONNECT_KEYS instead)"
                    );
                }
                return Ok(());
            }
            let done = stale_keys::forget_key(&state.connect, &key_id).await?;
            let (marked, failed, dropped) = (done.marked, done.failed, done.dropped);
            tracing::info!(marked, failed, dropped, key_id = %key_id, "connections of a forgotten key marked");
            if failed > 0 {
                anyhow::bail!(
                    "{marked} connection(s) sealed by key {key_id} now ask their users to connect again, \
                     and {} revocation(s) still owed were given up, \
                     but {failed} could not be marked (see the log); run the command again",
                    done.revocations_dropped
                );
            }
            for line in done.report(&key_id) {
                println!("{line}");
            }
            Ok(())
        }
        Command::Users { command } => {
            let state = offline_state(cli.config.as_deref()).await?;
            commands::users::run(&state, command).await
        }
        Command::Purge { no_pause } => {
            use mcp_connect::sweeper::{Pace, sweep_all};
            let state = offline_state(cli.config.as_deref()).await?;
            let pace = if no_pause {
                Pace::FLAT_OUT
            } else {
                Pace::SHARED
            };
            match sweep_all(&state.db, &state.settings, pace).await? {
                Some(swept) => {
                    println!("deleted {} expired row(s)", swept.deleted);
                    if swept.capped {
                        println!(
                            "more audit rows (or failed webhook events) past retention may be left: \
                             a paced purge deletes at most {} of each per run; run it again, \
                             or use --no-pause in a maintenance window",
                            mcp_connect::sweeper::AUDIT_ROWS_PER_SWEEP
                        );
                    }
                }
                // A script or a maintenance window must not read this as done.
                None => anyhow::bail!(
                    "another instance is sweeping right now; nothing was deleted: run purge again when it is done"
                ),
            }
            Ok(())
        }
        Command::Serve => {
            let settings = Settings::load(cli.config.as_deref())?;
            let _log = telemetry::init_for_serving(settings.log_format);
            tracing::info!(
                public_url = %settings.public_url,
                bind = %settings.bind,
                issuer = %settings.auth.issuer,
                "starting mcp-connect"
            );
            // Stoppable while it waits for the database, as when serving:
            // in a container it is the process a stop signals.
            let app = tokio::select! {
                app = Application::build(settings) => app?,
                () = mcp_connect::shutdown::signalled() => {
                    tracing::info!("stopped before serving");
                    return Ok(());
                }
            };
            tracing::info!(port = app.port(), "listening");
            app.run_until_signalled().await?;
            Ok(())
        }
    }
}
