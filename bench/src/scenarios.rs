//! The scenarios, which servers each applies to, and the workers each one
//! runs with (built from the [`World`] that setup prepared).

use std::collections::VecDeque;

use serde_json::json;

use crate::{
    browser::Browser,
    client::Conn,
    load::Job,
    mcp::{Expect, Prepared},
    servers::{self, Kind, Paths},
    setup::World,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    Discover,
    Ask,
    RetryComplete,
    CallAsUser,
    ConnectFlow,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::Discover,
        Scenario::Ask,
        Scenario::RetryComplete,
        Scenario::CallAsUser,
        Scenario::ConnectFlow,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Scenario::Discover => "S1",
            Scenario::Ask => "S2",
            Scenario::RetryComplete => "S3",
            Scenario::CallAsUser => "S4",
            Scenario::ConnectFlow => "S5",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Scenario::Discover => "discover",
            Scenario::Ask => "ask",
            Scenario::RetryComplete => "retry-complete",
            Scenario::CallAsUser => "call-as-user",
            Scenario::ConnectFlow => "connect flow",
        }
    }

    pub fn what(self) -> &'static str {
        match self {
            Scenario::Discover => "`server/discover`: protocol and auth overhead",
            Scenario::Ask => {
                "`tools/call whoami {provider: demo}`, user not connected → `input_required` (ticket insert + sealed state)"
            }
            Scenario::RetryComplete => {
                "retry of `connect {provider: demo}` with `inputResponses` accept + the sealed state, user connected → `complete` (open state + connection lookup + token decrypt)"
            }
            Scenario::CallAsUser => {
                "`whoami {provider: demo}` on a connected account; the demo provider of another mcp-connect dev (S4's upstream, which every server calls) answers upstream"
            }
            Scenario::ConnectFlow => {
                "browser flow with a signed-in session: `GET /connect?ticket` → consent → `POST /connect` → demo provider Allow → callback → tokens stored (one \"request\" = one whole flow)"
            }
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Scenario::ALL
            .into_iter()
            .find(|sc| sc.id().eq_ignore_ascii_case(s) || sc.title() == s)
    }

    /// The floor the scenario is held against: bare rmcp for S1, bare rmcp
    /// + SQL (with the same upstream call for S4) for the others.
    pub fn floor(self) -> Kind {
        match self {
            Scenario::Discover => Kind::Bare,
            _ => Kind::BareSql,
        }
    }

    /// The servers a scenario is run on.
    pub fn applies_to(self, kind: Kind) -> bool {
        if matches!(kind, Kind::Seeded | Kind::Empty) {
            return crate::scale::SEEDED.contains(&self);
        }
        match self {
            // bare rmcp + SQL is there for the database's share of S2–S4.
            Scenario::Discover => kind != Kind::BareSql,
            Scenario::Ask | Scenario::RetryComplete => true,
            // bare rmcp + SQL + the same upstream call: S4's floor.
            Scenario::CallAsUser => matches!(kind, Kind::Ours | Kind::BareSql | Kind::Required),
            Scenario::ConnectFlow => kind == Kind::Ours,
        }
    }
}

fn whoami_demo() -> serde_json::Value {
    json!({ "provider": "demo" })
}

/// Workers for an MCP scenario (S1–S4) at `concurrency` against `kind`.
pub fn mcp_jobs(
    world: &World,
    scenario: Scenario,
    kind: Kind,
    concurrency: usize,
) -> anyhow::Result<Vec<Job>> {
    let base = world.base(kind)?;
    (0..concurrency)
        .map(|w| {
            let (request, expect) = match scenario {
                Scenario::Discover => (Prepared::discover(&world.dev.token)?, Expect::Discover),
                Scenario::Ask => {
                    let user = &world.ask_users[w % world.ask_users.len()];
                    (
                        Prepared::call(world.token(user)?, "whoami", whoami_demo())?,
                        Expect::InputRequired {
                            key: "connect_demo".to_owned(),
                            url_prefix: format!("{base}/connect?ticket="),
                        },
                    )
                }
                Scenario::RetryComplete => {
                    let retries = world.retries(kind)?;
                    let (request, user) = &retries[w % retries.len()];
                    (
                        request.clone(),
                        Expect::Complete {
                            account: user.clone(),
                        },
                    )
                }
                Scenario::CallAsUser => {
                    let user = &world.conn_users[w % world.conn_users.len()];
                    (
                        Prepared::call(world.token(user)?, "whoami", whoami_demo())?,
                        Expect::Complete {
                            account: user.clone(),
                        },
                    )
                }
                Scenario::ConnectFlow => anyhow::bail!("S5 workers are built by flow_jobs"),
            };
            Ok(Job::Mcp {
                conn: Conn::new(base)?,
                request,
                expect,
            })
        })
        .collect()
}

/// Workers for S5: one signed-in browser per worker, each with its links.
pub fn flow_jobs(browsers: Vec<(Browser, String, VecDeque<String>)>) -> Vec<Job> {
    browsers
        .into_iter()
        .map(|(browser, account, links)| Job::Flow {
            browser,
            account,
            links,
        })
        .collect()
}

/// S5's worker for `user`, a user new to the server of `world` (on
/// `database_url`): a token minted for it, a signed-in browser and `flows`
/// links minted (asks) before anything is measured. The first flow is a
/// first connect, the others re-connect the same account.
pub async fn new_user_flows(
    world: &mut World,
    paths: &Paths,
    database_url: &str,
    user: &str,
    flows: usize,
) -> anyhow::Result<Job> {
    let user = user.to_owned();
    let minted = servers::mint_tokens(
        paths,
        database_url,
        world.dev.port,
        std::slice::from_ref(&user),
    )
    .await?;
    world.tokens.extend(minted);
    let mut jobs = flow_jobs(world.flow_workers_for(&[user], flows).await?);
    Ok(jobs.swap_remove(0))
}
