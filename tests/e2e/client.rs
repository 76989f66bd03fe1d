//! Drives `e2e/client/connect_client.py` — the MCP Python SDK as the
//! agent — over its stdin and stdout: it reports each link it would show its
//! user; the scenario opens that link in a real browser, then tells the
//! client what the user did. Its stderr goes to a log file of its own.

use std::{process::Stdio, time::Duration};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

use crate::world::World;

/// How long one answer of the client may take (a retry may wait for the
/// connection for a few seconds on the server).
const EVENT_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
pub enum Style {
    /// 2026-07-28, `session.call_tool(..., allow_input_required=True)`.
    Manual,
    /// 2026-07-28, `Client(elicitation_callback=...)`.
    Callback,
    /// 2025-11-25, `-32042`.
    Legacy,
}

impl Style {
    fn arg(self) -> &'static str {
        match self {
            Style::Manual => "manual",
            Style::Callback => "callback",
            Style::Legacy => "legacy",
        }
    }
}

pub struct McpClient {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    pub stderr_log: std::path::PathBuf,
}

impl McpClient {
    /// Starts one tool call as `token`'s holder.
    pub fn call(
        world: &World,
        log_name: &str,
        token: &str,
        style: Style,
        tool: &str,
        args: Value,
    ) -> anyhow::Result<McpClient> {
        let stderr_log = world.logs.join(format!("{log_name}.stderr.log"));
        let stderr = std::fs::File::create(&stderr_log)?;
        let mut command = Command::new(&world.python);
        // Behind Caddy's TLS: trust its CA of this run. Passed by its own
        // name, since a TLS library in this process may rewrite
        // SSL_CERT_FILE in our environment (openssl-probe does).
        if let Some(bundle) = std::env::var_os("E2E_CA_BUNDLE") {
            command.env("SSL_CERT_FILE", bundle);
        }
        let mut child = command
            .arg(world.repo.join("e2e/client/connect_client.py"))
            .args([
                "--url",
                &world.mcp_url(),
                "--style",
                style.arg(),
                "--tool",
                tool,
            ])
            .arg("--args")
            .arg(args.to_string())
            .env("E2E_MCP_TOKEN", token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .context("start the Python MCP client")?;
        let stdin = child.stdin.take().context("client stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("client stdout")?).lines();
        Ok(McpClient {
            child,
            stdin,
            stdout,
            stderr_log,
        })
    }

    /// The client's next event (one JSON object).
    pub async fn next(&mut self) -> anyhow::Result<Value> {
        let line = tokio::time::timeout(EVENT_WAIT, self.stdout.next_line())
            .await
            .context("the MCP client said nothing for a minute")??;
        let Some(line) = line else {
            let status = self.child.wait().await?;
            let stderr = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
            bail!("the MCP client exited ({status}); its stderr:\n{stderr}");
        };
        serde_json::from_str(&line).with_context(|| format!("client printed {line:?}"))
    }

    /// The next event, which must be `kind`.
    pub async fn expect(&mut self, kind: &str) -> anyhow::Result<Value> {
        let event = self.next().await?;
        if event["event"] != kind {
            bail!("expected the client's {kind:?} event, got {event}");
        }
        // Every structured result went through the SDK's outputSchema
        // validation and the check of its first text block.
        if kind == "result" && !event["structured"].is_null() && event["checked"] != true {
            bail!("the client did not check the result against the tool's outputSchema: {event}");
        }
        Ok(event)
    }

    /// Skips `connected`, returns the first elicitation.
    pub async fn elicitation(&mut self) -> anyhow::Result<Value> {
        let mut event = self.next().await?;
        if event["event"] == "connected" {
            event = self.next().await?;
        }
        if event["event"] != "elicitation" {
            bail!("expected a link for the user, the client reported {event}");
        }
        Ok(event)
    }

    /// Tells the client what the user did with the link.
    pub async fn answer(&mut self, action: &str) -> anyhow::Result<()> {
        let line = format!("{}\n", json!({ "action": action }));
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Waits for the process to end.
    pub async fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin);
        let status = tokio::time::timeout(EVENT_WAIT, self.child.wait()).await??;
        if !status.success() {
            let stderr = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
            bail!("the MCP client failed ({status}); its stderr:\n{stderr}");
        }
        Ok(())
    }
}
