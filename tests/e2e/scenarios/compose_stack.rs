//! The compose smoke test (run only with `E2E_COMPOSE`, see
//! scripts/compose-smoke.sh): the operator's docker compose stack behind
//! Caddy's TLS. alice connects through the real browser; the stack goes
//! down and up again and her connection is still there (the database and
//! the keys survived); then it runs two instances behind Caddy and bob
//! connects across them.

use anyhow::{Context, ensure};
use serde_json::json;

use super::{Scenario, connect_in_browser, expect_account, result_text};
use crate::{client::Style, world::PROVIDER};

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let compose = s.world.compose.as_ref().context("not in compose mode")?;
    let alice = connect(s, "alice", "alice.cloud").await?;
    api_request(s, &alice, "alice.cloud").await?;

    compose.run("restart", &[], &s.world.logs)?;
    s.world.wait_ready().await?;
    // No link this time: the connection outlived the containers.
    api_request(s, &alice, "alice.cloud").await?;

    compose.run("scale", &[], &s.world.logs)?;
    s.world.wait_ready().await?;
    let bob = connect(s, "bob", "bob.cloud").await?;
    api_request(s, &bob, "bob.cloud").await?;
    api_request(s, &alice, "alice.cloud").await?;
    s.check_secrets().await
}

/// `user` is handed a link by `whoami`, connects in the browser as
/// `account`, and the client's retry answers with that account. Returns the
/// user's MCP token.
async fn connect(s: &mut Scenario<'_>, user: &str, account: &str) -> anyhow::Result<String> {
    let token = s.token(user).await?;
    let (mut client, link) = s.whoami_link(&token, Style::Manual).await?;
    let link = link["url"].as_str().context("url")?.to_owned();
    let browser = s.browser(user).await?;
    connect_in_browser(s, &browser, &link, Some(user), account).await?;
    client.answer("accept").await?;
    let result = client.expect("result").await?;
    expect_account(&result, account)?;
    client.finish().await?;
    browser.close().await?;
    Ok(token)
}

/// `api_request` reaches the provider's API as `account` without a link.
async fn api_request(s: &mut Scenario<'_>, token: &str, account: &str) -> anyhow::Result<()> {
    let mut api = s.client(
        token,
        Style::Callback,
        "api_request",
        json!({ "provider": PROVIDER, "method": "GET", "path": "me" }),
    )?;
    api.expect("connected").await?;
    let result = api.expect("result").await?;
    ensure!(
        result["is_error"] == false,
        "api_request failed: {}",
        result_text(&result)
    );
    let shown = format!("{} {}", result["structured"], result_text(&result));
    ensure!(
        shown.contains(account),
        "the API should answer for {account}: {shown}"
    );
    api.finish().await
}
