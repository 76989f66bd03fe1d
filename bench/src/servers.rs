//! Starting and stopping the servers under test, each its own process on
//! loopback: mcp-connect in dev mode (its own database), the Python SDK
//! comparator (in a virtual environment the harness makes), and bench-bare.
//! They are stopped with SIGTERM, and die with the harness (`kill_on_drop`);
//! logs go to files.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, anyhow, bail};
use futures::StreamExt;
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{callgrind, client::Conn};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Ours,
    Python,
    Bare,
    /// bench-bare with `--database`: bare rmcp plus mcp-connect's SQL.
    BareSql,
    /// bench-bare with `--database --required`: the floor plus the work
    /// mcp-connect may not leave out (token check, access line and metrics,
    /// sealed state, tokens sealed at rest), by mcp-connect's own code.
    Required,
    /// Not a server of its own: mcp-connect again, on the S6-seeded database.
    Seeded,
    /// S6's baseline: a second mcp-connect on an empty database of its own,
    /// measured in turn with the seeded one (same minutes, same machine).
    Empty,
    /// S2's and S3's floor in S6's conditions: a new bare rmcp + SQL on an empty database
    /// of its own, started with S6's two servers and measured in turn with
    /// them, so that the empty side can be read against a floor in the same
    /// conditions (S1–S5's servers stopped, nothing of theirs left).
    EmptyFloor,
    /// Not measured: the demo provider that S4's calls go to (a second
    /// mcp-connect dev, see [`DemoUpstream`]).
    Upstream,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ours => "mcp-connect",
            Kind::Python => "Python SDK",
            Kind::Bare => "bare rmcp",
            Kind::BareSql => "bare rmcp + SQL",
            Kind::Required => "floor + required work",
            Kind::Seeded => "mcp-connect, seeded (S6)",
            Kind::Empty => "mcp-connect, empty (S6)",
            Kind::EmptyFloor => "bare rmcp + SQL, empty (S6)",
            Kind::Upstream => "the demo provider (S4's upstream)",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ours" | "mcp-connect" => Some(Kind::Ours),
            "python" => Some(Kind::Python),
            "bare" => Some(Kind::Bare),
            "bare-sql" => Some(Kind::BareSql),
            "required" => Some(Kind::Required),
            _ => None,
        }
    }
}

/// Where things are.
pub struct Paths {
    /// The workspace root.
    pub root: PathBuf,
    /// Where the built binaries are (beside this harness).
    pub bin_dir: PathBuf,
    pub logs: PathBuf,
}

/// How long a server may take to exit after SIGTERM before it is killed
/// (mcp-connect's own drain is longer, but the load has stopped by then).
const STOP_GRACE: Duration = Duration::from_secs(10);

pub struct Server {
    pub kind: Kind,
    pub base: String,
    pub pid: u32,
    child: Child,
}

impl Server {
    /// Stops the server as an operator would, with SIGTERM: mcp-connect
    /// drains and flushes its log queue, and a build made with
    /// `-Cprofile-generate` writes its profile at exit (a kill writes
    /// none). One that has not exited after `STOP_GRACE` is killed.
    pub async fn stop(mut self) {
        let terminated = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await
            .is_ok_and(|status| status.success());
        if terminated
            && tokio::time::timeout(STOP_GRACE, self.child.wait())
                .await
                .is_ok()
        {
            return;
        }
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// What `mcp-connect dev --json` announces.
pub struct DevInfo {
    pub web_url: String,
    pub token: String,
    pub port: u16,
}

fn log_file(paths: &Paths, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(&paths.logs)?;
    let path = paths.logs.join(name);
    std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))
}

/// The first line the child prints on stdout, within `limit`.
async fn first_line(child: &mut Child, what: &str, limit: Duration) -> anyhow::Result<String> {
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("{what}: no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    match tokio::time::timeout(limit, lines.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        Ok(Ok(None)) => bail!("{what} exited before it was ready (see its log)"),
        Ok(Err(e)) => bail!("{what}: {e}"),
        Err(_) => bail!("{what} was not ready within {limit:?} (see its log)"),
    }
}

/// S4's upstream: the demo provider of a second `mcp-connect dev` on a
/// database of its own. Every server calls it — mcp-connect as its `demo`
/// provider, the floors with tokens it issued — so that each one's upstream
/// answers in another process, as a real provider does on its own
/// machines; none of them serves the calls of another on its own workers.
pub struct DemoUpstream {
    pub server: Server,
    /// The demo client's secret, from the upstream's `dev_secrets`.
    pub secret: String,
}

impl DemoUpstream {
    pub fn base(&self) -> &str {
        self.server.base.trim_end_matches('/')
    }

    /// The settings (as environment variables) that make mcp-connect's
    /// `demo` provider this one.
    fn provider_env(&self) -> Vec<(String, String)> {
        demo_provider_env(self.base(), &self.secret)
    }
}

/// mcp-connect's `demo` provider at `base`: each endpoint of the shipped
/// preset that lies under the server's own base URL, moved there, and the
/// client secret.
fn demo_provider_env(base: &str, secret: &str) -> Vec<(String, String)> {
    const PRESET: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../catalog/demo.toml"));
    PRESET
        .lines()
        .filter_map(|line| {
            let (field, value) = line.split_once(" = ")?;
            let path = value.trim().trim_matches('"').strip_prefix("{base_url}")?;
            Some((field.trim().to_uppercase(), format!("{base}{path}")))
        })
        .chain([("CLIENT_SECRET".to_owned(), secret.to_owned())])
        .map(|(field, value)| (format!("MCP_CONNECT_PROVIDERS__DEMO__{field}"), value))
        .collect()
}

/// Starts S4's upstream on `database_url` (created by it).
pub async fn start_demo_upstream(
    paths: &Paths,
    database_url: &str,
    rust_log: Option<&str>,
) -> anyhow::Result<DemoUpstream> {
    let (server, _) = spawn_dev(
        paths,
        Kind::Upstream,
        database_url,
        rust_log,
        "demo-upstream.log",
        &[],
    )
    .await?;
    let secret = crate::psql::value(
        database_url,
        "SELECT value FROM dev_secrets WHERE name = 'demo_client_secret'",
    )
    .await?;
    Ok(DemoUpstream { server, secret })
}

/// mcp-connect dev on `database_url`; `rust_log` overrides its log filter
/// (`warn` for quiet runs; the plan check's instance logs its statements),
/// `log` names its log file. With `upstream`, its `demo` provider is that
/// one; without, the one it serves itself.
pub async fn start_ours(
    paths: &Paths,
    database_url: &str,
    rust_log: Option<&str>,
    log: &str,
    upstream: Option<&DemoUpstream>,
) -> anyhow::Result<(Server, DevInfo)> {
    let env = upstream.map(DemoUpstream::provider_env).unwrap_or_default();
    spawn_dev(paths, Kind::Ours, database_url, rust_log, log, &env).await
}

async fn spawn_dev(
    paths: &Paths,
    kind: Kind,
    database_url: &str,
    rust_log: Option<&str>,
    log: &str,
    env: &[(String, String)],
) -> anyhow::Result<(Server, DevInfo)> {
    let binary = paths.bin_dir.join("mcp-connect");
    let mut command = if kind == Kind::Ours {
        callgrind::command(&binary, kind)
    } else {
        Command::new(&binary)
    };
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    let mut child = command
        .args([
            "dev",
            "--port",
            "0",
            "--json",
            "--database-url",
            database_url,
        ])
        // The production log format: one JSON line per event, to stderr.
        .env("MCP_CONNECT_LOG_FORMAT", "json")
        // S2 asks the same few users for links thousands of times a second:
        // the per-user limit still counts every one, but never refuses.
        .env("MCP_CONNECT_FLOW__LINKS_PER_MINUTE", "4000000000")
        // S3's sealed states are minted once, before the first scenario, and
        // replayed until S6's seeded runs, which come after the default ten
        // minutes have passed.
        .env("MCP_CONNECT_FLOW__REQUEST_STATE_TTL_SECS", "7200")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file(paths, log)?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let line = first_line(
        &mut child,
        "mcp-connect dev",
        callgrind::patience(Duration::from_secs(90)),
    )
    .await?;
    let info: Value = serde_json::from_str(&line).context("mcp-connect dev --json output")?;
    let web_url = info["web_url"]
        .as_str()
        .ok_or_else(|| anyhow!("no web_url in the dev output"))?
        .to_owned();
    let token = info["token"]
        .as_str()
        .ok_or_else(|| anyhow!("no token in the dev output"))?
        .to_owned();
    let port = url::Url::parse(&web_url)?
        .port()
        .ok_or_else(|| anyhow!("no port in {web_url}"))?;
    let pid = child.id().ok_or_else(|| anyhow!("mcp-connect exited"))?;
    if kind == Kind::Ours {
        callgrind::track(kind, pid);
    }
    let server = Server {
        kind,
        base: web_url.clone(),
        pid,
        child,
    };
    Ok((
        server,
        DevInfo {
            web_url,
            token,
            port,
        },
    ))
}

/// Bearer tokens for `users`, minted by `mcp-connect dev token`.
pub async fn mint_tokens(
    paths: &Paths,
    database_url: &str,
    port: u16,
    users: &[String],
) -> anyhow::Result<HashMap<String, String>> {
    let binary = paths.bin_dir.join("mcp-connect");
    let port = port.to_string();
    let minted: Vec<anyhow::Result<(String, String)>> = futures::stream::iter(users.iter())
        .map(|user| {
            let (binary, port) = (&binary, &port);
            async move {
                let out = Command::new(binary)
                    .args([
                        "dev",
                        "token",
                        "--sub",
                        user,
                        "--port",
                        port,
                        "--database-url",
                        database_url,
                    ])
                    .stdin(Stdio::null())
                    .output()
                    .await?;
                if !out.status.success() {
                    bail!(
                        "dev token --sub {user}: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                Ok((
                    user.clone(),
                    String::from_utf8(out.stdout)?.trim().to_owned(),
                ))
            }
        })
        .buffer_unordered(6)
        .collect()
        .await;
    minted.into_iter().collect()
}

/// The Python virtual environment, made (or brought up to date) from
/// `bench/python/requirements.txt`. Returns its interpreter.
pub async fn python_venv(paths: &Paths) -> anyhow::Result<PathBuf> {
    let bench = paths.root.join("bench");
    let requirements = bench.join("python/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements)?;
    let venv = bench.join(".venv");
    let python = venv.join("bin/python");
    let stamp = venv.join("requirements.installed");
    if python.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(python);
    }
    let system = std::env::var("BENCH_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    eprintln!(
        "bench: preparing the Python comparator in {} …",
        venv.display()
    );
    run(
        Command::new(&system).arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
    )
    .await?;
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements),
        "pip install -r bench/python/requirements.txt",
    )
    .await?;
    std::fs::write(&stamp, wanted)?;
    Ok(python)
}

async fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command.stdin(Stdio::null()).status().await?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// The fields of a JWT's payload, unverified (to tell the comparator which
/// issuer and audience to expect).
pub fn jwt_claims(token: &str) -> anyhow::Result<Value> {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| anyhow!("not a JWT"))?;
    Ok(serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload)?)?)
}

pub async fn start_python(
    paths: &Paths,
    python: &Path,
    dev: &DevInfo,
    quiet: bool,
) -> anyhow::Result<Server> {
    let mut conn = Conn::new(&dev.web_url)?;
    let jwks = conn.get("/dev/idp/jwks").await?;
    if jwks.status != 200 {
        bail!("GET /dev/idp/jwks: HTTP {}", jwks.status);
    }
    let claims = jwt_claims(&dev.token)?;
    let audience = match &claims["aud"] {
        Value::Array(a) => a.first().cloned().unwrap_or_default(),
        other => other.clone(),
    };
    // The Python server cannot report the port it got: it is told one.
    let port = provider_fakes::ports::unused_port(&[]);
    let child = Command::new(python)
        .arg(paths.root.join("bench/python/server.py"))
        .env("BENCH_PORT", port.to_string())
        .env("BENCH_JWKS", jwks.text())
        .env("BENCH_ISSUER", claims["iss"].as_str().unwrap_or_default())
        .env("BENCH_AUDIENCE", audience.as_str().unwrap_or_default())
        .env("BENCH_ACCESS_LOG", if quiet { "0" } else { "1" })
        .stdin(Stdio::null())
        .stdout(log_file(paths, "python.log")?)
        .stderr(log_file(paths, "python.err.log")?)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the Python comparator")?;
    let base = format!("http://127.0.0.1:{port}");
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("the Python comparator exited"))?;
    let mut probe = Conn::new(&base)?;
    for _ in 0..300 {
        if probe
            .get("/bench/health")
            .await
            .is_ok_and(|r| r.status == 200)
        {
            return Ok(Server {
                kind: Kind::Python,
                base,
                pid,
                child,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the Python comparator did not answer within 30 s (see python.err.log)")
}

/// bench-bare; with `database` (a URL), "bare rmcp + SQL" on that database,
/// asking `upstream` (a userinfo URL) on `whoami` (the S4 floor); with
/// `required` (the dev server's issuer and mcp-connect's audience) as well,
/// the floor plus the work mcp-connect may not leave out.
pub async fn start_bare(
    paths: &Paths,
    database: Option<&str>,
    upstream: Option<&str>,
    required: Option<(&str, &str)>,
) -> anyhow::Result<Server> {
    let binary = paths.bin_dir.join("bench-bare");
    let (kind, log) = match (database, required) {
        (Some(_), Some(_)) => (Kind::Required, "bench-bare-required.log"),
        (Some(_), None) => (Kind::BareSql, "bench-bare-sql.log"),
        (None, _) => (Kind::Bare, "bench-bare.log"),
    };
    let mut command = callgrind::command(&binary, kind);
    command.args(["--port", "0"]);
    if let Some(url) = database {
        command.args(["--database", url]);
    }
    if let Some(url) = upstream {
        command.args(["--upstream", url]);
    }
    if let (Some(_), Some((issuer, audience))) = (database, required) {
        command.args(["--required", "--issuer", issuer, "--audience", audience]);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file(paths, log)?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let line = first_line(
        &mut child,
        "bench-bare",
        callgrind::patience(Duration::from_secs(30)),
    )
    .await?;
    let info: Value = serde_json::from_str(&line)?;
    let base = info["url"]
        .as_str()
        .ok_or_else(|| anyhow!("bench-bare printed no url"))?
        .to_owned();
    let pid = child.id().ok_or_else(|| anyhow!("bench-bare exited"))?;
    callgrind::track(kind, pid);
    Ok(Server {
        kind,
        base,
        pid,
        child,
    })
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

    use super::*;

    #[test]
    fn mcp_connects_demo_provider_is_pointed_at_every_endpoint_of_the_upstream() {
        let env: HashMap<String, String> = demo_provider_env("http://127.0.0.1:9", "s")
            .into_iter()
            .collect();
        let var = |field: &str| env[&format!("MCP_CONNECT_PROVIDERS__DEMO__{field}")].as_str();
        assert_eq!(var("TOKEN_URL"), "http://127.0.0.1:9/dev/demo/token");
        assert_eq!(var("API_BASE_URL"), "http://127.0.0.1:9/dev/demo/api/");
        assert_eq!(var("ISSUER"), "http://127.0.0.1:9/dev/demo");
        assert_eq!(var("CLIENT_SECRET"), "s");
        for field in ["AUTHORIZE_URL", "REVOCATION_URL", "USERINFO_URL"] {
            assert!(
                var(field).starts_with("http://127.0.0.1:9/dev/demo/"),
                "{field}"
            );
        }
        assert_eq!(env.len(), 7, "{env:?}");
    }

    /// A child that says on standard output whether it saw SIGTERM, once it
    /// has said `ready` (a signal before its trap is set would end it
    /// unheard).
    fn child_that_reports_sigterm() -> Child {
        Command::new("sh")
            .args([
                "-c",
                "trap 'echo terminated; kill $!; exit 0' TERM; echo ready; sleep 30 >/dev/null & wait",
            ])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh runs")
    }

    #[tokio::test]
    async fn a_server_is_stopped_with_sigterm_before_any_kill() {
        let mut child = child_that_reports_sigterm();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut ready = String::new();
        stdout.read_line(&mut ready).await.expect("stdout");
        assert_eq!(ready.trim(), "ready");
        let pid = child.id().expect("running");
        let server = Server {
            kind: Kind::Ours,
            base: String::new(),
            pid,
            child,
        };
        let started = std::time::Instant::now();
        server.stop().await;
        assert!(started.elapsed() < STOP_GRACE, "it took the kill to stop");
        let mut said = String::new();
        stdout.read_to_string(&mut said).await.expect("stdout");
        assert_eq!(said.trim(), "terminated");
    }
}
