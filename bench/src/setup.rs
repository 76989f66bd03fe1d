//! Everything the scenarios need before anything is timed: the users and
//! their tokens, connected users (through the real browser flow on
//! mcp-connect; marked in memory on the comparators), the sealed states of
//! the S3 retries, and for S5 signed-in browsers with their connect links.

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

use anyhow::{Context, anyhow, bail};
use serde_json::json;

use crate::{
    browser::Browser,
    client::Conn,
    flows,
    mcp::{self, Expect, Prepared},
    servers::{DemoUpstream, DevInfo, Kind, Server},
};

/// Users of S3 and S4 (connected) and of S2 (never connected).
pub const USERS_PER_POOL: usize = 16;

pub struct World {
    pub dev: DevInfo,
    pub servers: Vec<Server>,
    pub tokens: HashMap<String, String>,
    pub ask_users: Vec<String>,
    pub conn_users: Vec<String>,
    /// Per server: the S3 retry of each connected user, and the user.
    pub retries: HashMap<Kind, Vec<(Prepared, String)>>,
    /// How long the setup's browser flows took on mcp-connect.
    pub flow_times: Vec<Duration>,
    /// S4's upstream, when the servers call one of their own (S6's
    /// servers each serve their own demo provider, alike on both sides).
    pub demo_upstream: Option<DemoUpstream>,
}

pub fn flow_user(level: usize, worker: usize) -> String {
    format!("f{level}-{worker}")
}

/// Every user name the run will need a token for.
pub fn all_users(levels: &[usize]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let ask: Vec<String> = (0..USERS_PER_POOL).map(|i| format!("ask-{i}")).collect();
    let conn: Vec<String> = (0..USERS_PER_POOL).map(|i| format!("conn-{i}")).collect();
    let flow = levels
        .iter()
        .flat_map(|&c| (0..c).map(move |w| flow_user(c, w)))
        .collect();
    (ask, conn, flow)
}

impl World {
    /// Stops every server of this world (their children die with them).
    pub async fn stop_servers(&mut self) {
        for server in std::mem::take(&mut self.servers) {
            server.stop().await;
        }
        if let Some(upstream) = self.demo_upstream.take() {
            upstream.server.stop().await;
        }
    }

    pub fn server(&self, kind: Kind) -> anyhow::Result<&Server> {
        self.servers
            .iter()
            .find(|s| s.kind == kind)
            .ok_or_else(|| anyhow!("{} is not running", kind.label()))
    }

    pub fn base(&self, kind: Kind) -> anyhow::Result<&str> {
        Ok(&self.server(kind)?.base)
    }

    pub fn token(&self, user: &str) -> anyhow::Result<&str> {
        self.tokens
            .get(user)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no token for {user}"))
    }

    pub fn retries(&self, kind: Kind) -> anyhow::Result<&Vec<(Prepared, String)>> {
        self.retries
            .get(&kind)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| anyhow!("no S3 states for {}", kind.label()))
    }

    /// Connects every S3/S4 user on `kind` and keeps the sealed state of
    /// the `connect` call that asked, for S3's retries.
    pub async fn connect_users(&mut self, kind: Kind) -> anyhow::Result<()> {
        let base = self.base(kind)?.to_owned();
        let mut conn = Conn::new(&base)?;
        let mut retries = Vec::new();
        let args = json!({ "provider": "demo" });
        for user in self.conn_users.clone() {
            let token = self.token(&user)?.to_owned();
            let ask = Prepared::call(&token, "connect", args.clone())?;
            let expect = Expect::InputRequired {
                key: "connect_demo".to_owned(),
                url_prefix: format!("{base}/connect?ticket="),
            };
            let message = mcp::check(&conn.send(ask.request()).await?, &expect)
                .map_err(|e| anyhow!("{}: first connect call for {user}: {e}", kind.label()))?;
            let (url, state) = mcp::elicitation(&message, "connect_demo")
                .ok_or_else(|| anyhow!("no elicitation in {message}"))?;
            if kind == Kind::Ours {
                // The real thing: the user signs in, consents and allows.
                let mut browser = Browser::new(&base)?;
                flows::sign_in(&mut browser, &user).await?;
                let started = Instant::now();
                flows::connect_link(&mut browser, &url, &user)
                    .await
                    .with_context(|| format!("connecting {user} in the browser"))?;
                self.flow_times.push(started.elapsed());
            } else {
                let marked = conn
                    .post_json(
                        "/bench/connected",
                        &json!({ "sub": user, "provider": "demo" }),
                    )
                    .await?;
                if marked.status != 200 {
                    bail!("{}: /bench/connected: HTTP {}", kind.label(), marked.status);
                }
            }
            let retry = Prepared::retry(&token, "connect", args.clone(), &state, "connect_demo")?;
            let expect = Expect::Complete {
                account: user.clone(),
            };
            mcp::check(&conn.send(retry.request()).await?, &expect)
                .map_err(|e| anyhow!("{}: retry for {user}: {e}", kind.label()))?;
            retries.push((retry, user));
        }
        self.retries.insert(kind, retries);
        Ok(())
    }

    /// Gives a floor server (`kind`: bare rmcp + SQL, or the floor plus the
    /// required work) a real demo-provider access token for each connected
    /// user (`secret`: the demo client's), for S4.
    pub async fn floor_tokens(&self, kind: Kind) -> anyhow::Result<()> {
        let upstream = self
            .demo_upstream
            .as_ref()
            .ok_or_else(|| anyhow!("S4's floors need the demo upstream"))?;
        let mut conn = Conn::new(self.base(kind)?)?;
        for user in &self.conn_users {
            let token = crate::demo::access_token(upstream.base(), &upstream.secret, user)
                .await
                .with_context(|| format!("a demo token for {user}"))?;
            let marked = conn
                .post_json(
                    "/bench/connected",
                    &json!({ "sub": user, "provider": "demo", "token": token }),
                )
                .await?;
            if marked.status != 200 {
                bail!("{}: /bench/connected: HTTP {}", kind.label(), marked.status);
            }
        }
        Ok(())
    }

    /// S5 at `level`: a signed-in browser per worker and `per_worker`
    /// connect links each, minted through MCP while the users are still
    /// unconnected (a link stays good after its user connects).
    pub async fn flow_workers(
        &self,
        level: usize,
        per_worker: usize,
    ) -> anyhow::Result<Vec<(Browser, String, VecDeque<String>)>> {
        let users: Vec<String> = (0..level).map(|w| flow_user(level, w)).collect();
        self.flow_workers_for(&users, per_worker).await
    }

    /// The same for named users (who must have tokens and be unconnected).
    pub async fn flow_workers_for(
        &self,
        users: &[String],
        per_worker: usize,
    ) -> anyhow::Result<Vec<(Browser, String, VecDeque<String>)>> {
        let level = users.len();
        let base = self.base(Kind::Ours)?.to_owned();
        let mut workers = Vec::new();
        for user in users {
            let mut browser = Browser::new(&base)?;
            flows::sign_in(&mut browser, user).await?;
            workers.push((browser, user.clone(), VecDeque::new()));
        }
        // Mint on 16 connections at once; each (worker, n) is one link.
        let wanted: Vec<usize> = (0..level)
            .flat_map(|w| std::iter::repeat_n(w, per_worker))
            .collect();
        let lanes = 16.min(wanted.len().max(1));
        let expect = Expect::InputRequired {
            key: "connect_demo".to_owned(),
            url_prefix: format!("{base}/connect?ticket="),
        };
        let minted = futures::future::join_all((0..lanes).map(|lane| {
            let (wanted, base, expect) = (&wanted, &base, &expect);
            async move {
                let mut conn = Conn::new(base)?;
                let mut out = Vec::new();
                for &w in wanted.iter().skip(lane).step_by(lanes) {
                    let call = Prepared::call(
                        self.token(&users[w])?,
                        "whoami",
                        json!({ "provider": "demo" }),
                    )?;
                    let message = mcp::check(&conn.send(call.request()).await?, expect)
                        .map_err(|e| anyhow!("minting a link for {}: {e}", users[w]))?;
                    let (url, _) = mcp::elicitation(&message, "connect_demo")
                        .ok_or_else(|| anyhow!("no link in {message}"))?;
                    out.push((w, url));
                }
                anyhow::Ok(out)
            }
        }))
        .await;
        for lane in minted {
            for (w, url) in lane? {
                workers[w].2.push_back(url);
            }
        }
        Ok(workers)
    }
}
