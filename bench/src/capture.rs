//! The statements of the request paths, as the service itself logs them:
//! a second `mcp-connect dev` on the run's (seeded) database with
//! `sqlx::query` at trace, through every request path once — sign-in, an
//! ask (S2), the browser's connect flow (S5), the retry that completes
//! (S3), a call as the user (S4), the connections page — then stopped and
//! its log read. Whatever SQL the service runs today (strings or macros),
//! this is what reaches Postgres.

use std::collections::HashMap;

use anyhow::Context;

use crate::{
    browser::Browser,
    plans::{self, Statement},
    scenarios::{self, Scenario},
    servers::{self, Kind, Paths},
    setup::World,
};

const LOG: &str = "mcp-connect-statements.log";

pub async fn request_path_statements(
    paths: &Paths,
    database_url: &str,
) -> anyhow::Result<Vec<Statement>> {
    let (server, dev) = servers::start_ours(
        paths,
        database_url,
        Some("warn,sqlx::query=trace"),
        LOG,
        None,
    )
    .await
    .context("starting mcp-connect for the plan check")?;
    // Startup's statements (migrations, LISTEN) are not a request path:
    // read only what is logged after it (the log is written in batches
    // gathered for 10 ms).
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let start = std::fs::metadata(paths.logs.join(LOG)).map_or(0, |m| m.len() as usize);
    let (ask, conn) = (vec!["plan-ask".to_owned()], vec!["plan-conn".to_owned()]);
    let users: Vec<String> = ask.iter().chain(&conn).cloned().collect();
    let tokens = servers::mint_tokens(paths, database_url, dev.port, &users).await?;
    let mut world = World {
        dev,
        servers: vec![server],
        tokens,
        ask_users: ask,
        conn_users: conn,
        retries: HashMap::new(),
        flow_times: Vec::new(),
        demo_upstream: None,
    };
    let exercised = exercise(&mut world).await;
    world.stop_servers().await;
    exercised?;
    let log = std::fs::read(paths.logs.join(LOG))?;
    let after = log.get(start..).unwrap_or_default();
    Ok(plans::logged(&String::from_utf8_lossy(after)))
}

async fn exercise(world: &mut World) -> anyhow::Result<()> {
    // Sign-in, ask, connect flow and the completing retry.
    world.connect_users(Kind::Ours).await?;
    for scenario in [Scenario::Ask, Scenario::RetryComplete, Scenario::CallAsUser] {
        let mut jobs = scenarios::mcp_jobs(world, scenario, Kind::Ours, 1)?;
        if jobs[0].repeat(3).await != 3 {
            anyhow::bail!("{} failed on the plan check's instance", scenario.id());
        }
    }
    // The signed-in pages read sessions and connections.
    let mut browser = Browser::new(world.base(Kind::Ours)?)?;
    crate::flows::sign_in(&mut browser, &world.conn_users[0]).await?;
    let page = browser.get("/connections").await?;
    crate::browser::expect(&page, 200, "GET /connections")?;
    Ok(())
}

/// The sweeper's deletes: one sweep of the database at `database_url` by
/// the service's own code, as every instance runs it (expired tickets,
/// flows and sessions, audit rows past retention, failed webhook events),
/// its statements gathered as sqlx logs them. Run on the freshly seeded
/// database, nothing is past its grace yet: each delete runs once and
/// deletes nothing, and the check reads the plan each gets with its
/// representative parameters. Only the deletes are kept: the advisory
/// lock and the pool's connection setup read no table of the service.
/// The server on that database sweeps every five minutes from its start;
/// should that sweep hold the sweepers' lock now, this waits for it.
pub async fn sweeper_statements(database_url: &str) -> anyhow::Result<Vec<Statement>> {
    let pool = mcp_connect::db::pool(mcp_connect::db::connect_options(&database_url.into())?, 1);
    let retention = mcp_connect::config::AuditSettings::default().retention();
    let webhooks = mcp_connect::config::WebhookSettings::default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (swept, sql) = crate::statement_log::gather(async {
        loop {
            match mcp_connect::sweeper::sweep_once(&pool, retention).await? {
                Some(_) => break,
                None if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                None => anyhow::bail!("another sweep held the sweepers' lock for a minute"),
            }
        }
        mcp_connect::sweeper::sweep_outbox(&pool, &webhooks).await?;
        anyhow::Ok(())
    })
    .await;
    pool.close().await;
    swept.context("sweeping the seeded database for the plan check")?;
    let origin = "sweeper (every instance's background sweep)";
    Ok(sql
        .into_iter()
        .filter(|sql| {
            sql.get(..6)
                .is_some_and(|w| w.eq_ignore_ascii_case("DELETE"))
        })
        .map(|sql| Statement {
            origin: origin.to_owned(),
            sql,
        })
        .collect())
}
