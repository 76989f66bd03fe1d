//! The compose smoke test's side of the world (`E2E_COMPOSE`): instead of
//! starting the binary, a hook script (scripts/compose-smoke.sh) brings up
//! the operator's docker compose stack — Postgres, the service, Caddy with
//! TLS — configured for this run's peers, which listen where Caddy can reach
//! them and are themselves reached through Caddy at `https://*.localhost`.
//! The hook also restarts the stack and scales it, on the scenario's cue.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail};

use crate::procs::{Proc, tail};

pub struct Compose {
    hook: PathBuf,
    /// The port Caddy publishes on 127.0.0.1 (and listens on inside).
    pub https_port: u16,
    /// Where the peers listen: an address of this host that Caddy's
    /// container reaches (the Docker bridge's gateway).
    pub peer_bind: String,
    /// A file holding the stack's database URL (published on 127.0.0.1 for
    /// the checks), written by the hook's `up`.
    database_url_file: PathBuf,
    /// The ports the stack publishes once it is up (Caddy's, the
    /// database's): none of the peers may be given one of them.
    pub published_ports: Vec<u16>,
}

/// The names the peers have behind Caddy. Chromium and these clients map
/// `*.localhost` to loopback, where Caddy's port is published; inside the
/// compose network they are aliases of the Caddy container.
pub const PEER_NAMES: [&str; 3] = ["idp.localhost", "provider.localhost", "api.localhost"];

impl Compose {
    pub fn from_env() -> anyhow::Result<Option<Compose>> {
        let Some(hook) = std::env::var_os("E2E_COMPOSE") else {
            return Ok(None);
        };
        let var =
            |name: &str| std::env::var(name).with_context(|| format!("E2E_COMPOSE needs {name}"));
        Ok(Some(Compose {
            hook: PathBuf::from(hook),
            https_port: var("E2E_HTTPS_PORT")?.parse().context("E2E_HTTPS_PORT")?,
            peer_bind: var("E2E_PEER_BIND")?,
            database_url_file: var("E2E_DATABASE_URL_FILE")?.into(),
            published_ports: var("E2E_PUBLISHED_PORTS")?
                .split_whitespace()
                .map(|p| p.parse().context("E2E_PUBLISHED_PORTS"))
                .collect::<anyhow::Result<_>>()?,
        }))
    }

    pub fn database_url(&self) -> String {
        std::fs::read_to_string(&self.database_url_file)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    }

    pub fn base(&self) -> String {
        format!("https://localhost:{}", self.https_port)
    }

    pub fn url(&self, name: &str) -> String {
        format!("https://{name}:{}", self.https_port)
    }

    /// Runs `hook <action>` with `env`, its output in `compose-<action>.log`.
    pub fn run(&self, action: &str, env: &[(&str, String)], logs: &Path) -> anyhow::Result<()> {
        let log = logs.join(format!("compose-{action}.log"));
        let out = std::fs::File::create(&log)?;
        let status = Command::new(&self.hook)
            .arg(action)
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()
            .with_context(|| format!("run {}", self.hook.display()))?;
        if !status.success() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("compose {action} failed ({status}):\n{}", tail(&text, 40));
        }
        Ok(())
    }

    /// The service's logs, followed into `mcp-connect.log` for the scans.
    pub fn follow_logs(&self, logs: &Path) -> anyhow::Result<Proc> {
        let mut cmd = Command::new(&self.hook);
        cmd.arg("logs");
        Proc::spawn("mcp-connect", logs, cmd)
    }
}

/// An HTTP client that finds the peers' `*.localhost` names on loopback, as
/// the browser does (RFC 6761), and trusts Caddy's CA of this run (the file
/// `E2E_CA_FILE`, once the hook's `up` has written it).
pub fn http() -> reqwest::ClientBuilder {
    let builder = PEER_NAMES
        .iter()
        .fold(reqwest::Client::builder(), |b, name| {
            b.resolve(name, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        });
    let ca = std::env::var_os("E2E_CA_FILE")
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|pem| reqwest::Certificate::from_pem(&pem).ok());
    match ca {
        Some(ca) => builder.tls_certs_only([ca]),
        None => builder,
    }
}
