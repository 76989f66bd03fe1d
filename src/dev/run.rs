//! `mcp-connect dev`: prepares the dev database and keys, starts the real
//! application on 127.0.0.1 with the dev identity provider as its issuer,
//! prints where to find it and a token, and serves until stopped.

use std::{
    io::Write,
    net::{Ipv4Addr, TcpListener},
    time::Duration,
};

use anyhow::{Context, bail};
use secrecy::ExposeSecret;

use super::{
    DevServices,
    cli::{
        CLI_CLIENT_ID, CLI_TOKEN_TTL_SECS, DEFAULT_DATABASE_URL, DevArgs, DevCommand,
        WEB_CLIENT_ID, print_token,
    },
    database, dev_key_entry,
    environment::{connect_env, refuse_settings_dev_sets},
};
use crate::{
    config::{ENV_PREFIX, LogFormat, Settings},
    startup::Application,
};

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    if let Some(DevCommand::Token(token_args)) = &args.command {
        return print_token(&args, token_args).await;
    }
    let env = connect_env()?;
    refuse_settings_dev_sets(&env)?;
    let (options, database) = database::options(&args.database_url)?;
    let _log = crate::telemetry::init_for_serving(log_format_from_env());

    let password_files = database::PasswordFiles::check(&args.database_url);
    password_files.warn();
    let pool = database::prepare(options, &database, &password_files).await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, args.port)).with_context(|| {
        format!("cannot listen on 127.0.0.1:{} (is something else using it? --port 0 picks a free port)", args.port)
    })?;
    let port = listener.local_addr()?.port();
    let public_url = format!("http://127.0.0.1:{port}");
    let dev = DevServices::load_or_create(&pool, &public_url).await?;
    let key_entry = dev_key_entry(&pool).await?;
    pool.close().await;

    let mut settings = Settings::from_sources(
        None,
        env,
        base_settings(&public_url, &args, &dev, key_entry),
    )
    .context("dev mode settings")?;
    // On loopback, for whoever runs it: /metrics needs no token (one set in
    // MCP_CONNECT_METRICS_TOKEN is still asked for).
    settings.metrics_open = true;
    let app = Application::build_with_listener(settings, listener, Some(dev.routes())).await?;
    let handle = app.handle();
    let state = app.state().clone();
    let mut server = tokio::spawn(app.run_until_stopped());
    wait_until_ready(port, &mut server).await?;

    let token = dev.mint_access_token(
        "alice",
        CLI_CLIENT_ID,
        &[],
        Duration::from_secs(CLI_TOKEN_TTL_SECS),
    )?;
    announce(&args, &public_url, port, &token, &database.to_string())?;

    let signals =
        crate::shutdown::drain_until_second_signal(handle, move || state.begin_shutdown());
    tokio::select! {
        finished = server => finished
            .context("the server task failed")?
            .context("the server stopped"),
        () = signals => Ok(()),
    }
}

/// Logs are pretty unless `MCP_CONNECT_LOG_FORMAT=json` asks otherwise.
fn log_format_from_env() -> LogFormat {
    match std::env::var(format!("{ENV_PREFIX}LOG_FORMAT")) {
        Ok(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
        _ => LogFormat::Pretty,
    }
}

fn base_settings(
    public_url: &str,
    args: &DevArgs,
    dev: &DevServices,
    key_entry: String,
) -> toml::Table {
    let mut auth = toml::Table::new();
    auth.insert("issuer".into(), dev.issuer().into());
    auth.insert("web_client_id".into(), WEB_CLIENT_ID.into());
    let mut base = toml::Table::new();
    base.insert("public_url".into(), public_url.into());
    base.insert(
        "bind".into(),
        public_url.trim_start_matches("http://").into(),
    );
    base.insert(
        "database_url".into(),
        args.database_url.expose_secret().into(),
    );
    base.insert("keys".into(), toml::Value::Array(vec![key_entry.into()]));
    base.insert("insecure_http".into(), true.into());
    // Clients configured with http://localhost:PORT reach the same server.
    let port = public_url.rsplit(':').next().unwrap_or_default();
    base.insert(
        "allowed_hosts".into(),
        toml::Value::Array(vec![
            "127.0.0.1".into(),
            format!("127.0.0.1:{port}").into(),
            "localhost".into(),
            format!("localhost:{port}").into(),
        ]),
    );
    base.insert(
        "allowed_origins".into(),
        toml::Value::Array(vec![
            public_url.into(),
            format!("http://localhost:{port}").into(),
        ]),
    );
    base.insert("log_format".into(), "pretty".into());
    base.insert("auth".into(), toml::Value::Table(auth));
    // The demo OAuth provider mounted on this server, so the whole connect
    // flow works with no external account.
    let mut providers = toml::Table::new();
    providers.insert(
        "demo".into(),
        toml::Value::Table(dev.demo().provider_settings()),
    );
    base.insert("providers".into(), toml::Value::Table(providers));
    base
}

type ServerTask = tokio::task::JoinHandle<Result<(), std::io::Error>>;

/// Polls `/readyz` until it answers 200, failing early if the server exits.
async fn wait_until_ready(port: u16, server: &mut ServerTask) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()?;
    let url = format!("http://127.0.0.1:{port}/readyz");
    for _ in 0..300 {
        if server.is_finished() {
            server
                .await
                .context("the server task failed")?
                .context("the server stopped while starting")?;
            bail!("the server stopped while starting");
        }
        if client
            .get(&url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the server did not become ready within 30 seconds (see the log above)")
}

fn announce(
    args: &DevArgs,
    public_url: &str,
    port: u16,
    token: &str,
    database: &str,
) -> anyhow::Result<()> {
    let mcp_url = format!("{public_url}/mcp");
    let mut out = std::io::stdout().lock();
    if args.json {
        let line = serde_json::json!({ "mcp_url": mcp_url, "web_url": public_url, "token": token });
        writeln!(out, "{line}")?;
    } else {
        writeln!(
            out,
            "\nmcp-connect dev is ready.\n\n  \
             MCP URL    {mcp_url}\n  \
             Web        {public_url}/connections\n  \
             Issuer     {public_url}/dev/idp (dev sign-in: any user name, no password)\n  \
             Database   {database}\n\n  \
             Bearer token for alice (valid {hours} hours):\n\n{token}\n\n  \
             A token for another user:\n    mcp-connect dev --port {port} token --sub bob\n\n  \
             Press Ctrl-C to stop.\n",
            hours = CLI_TOKEN_TTL_SECS / 3600,
        )?;
        if args.database_url.expose_secret() != DEFAULT_DATABASE_URL {
            writeln!(
                out,
                "    (with the same --database-url or DATABASE_URL as this server)\n"
            )?;
        }
    }
    out.flush()?;
    Ok(())
}
