//! Scenario 1: alice's MCP client (the manual 2026-07-28 loop) calls
//! `whoami` for the third-party provider and is handed a link; her browser
//! signs her in at the authorization server, shows our consent page, goes to
//! the provider, where she approves; the client's retry completes with her
//! account there. Then her connections page lists it, and `api_request`
//! reaches the provider's API (which checks the token by introspection)
//! without any further link, refreshing the provider's short-lived access
//! token on the way. Last, she disconnects on that page: the provider's
//! tokens stop working at its API, and the next call asks for a link again.

use anyhow::{Context, ensure};
use serde_json::json;

use super::{Scenario, connect_in_browser, expect_account, result_text};
use crate::{
    client::Style,
    tokens,
    world::{PROVIDER, PROVIDER_DISPLAY},
};

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let (user, account) = ("alice", "alice.cloud");
    let token = s.token(user).await?;
    let (mut client, link) = s.whoami_link(&token, Style::Manual).await?;
    ensure!(
        link["key"] == format!("connect_{PROVIDER}"),
        "inputRequests key: {link}"
    );
    ensure!(link["round"] == 1, "first round: {link}");
    let link = link["url"].as_str().context("url")?.to_owned();

    let browser = s.browser("alice").await?;
    connect_in_browser(s, &browser, &link, Some(user), account).await?;
    let connected_at = std::time::Instant::now();

    client.answer("accept").await?;
    let result = client.expect("result").await?;
    expect_account(&result, account)?;
    client.finish().await?;

    browser
        .goto(&format!("{}/connections", s.world.base))
        .await?;
    browser
        .wait_for_url(&format!("{}/connections", s.world.base))
        .await?;
    browser.shot("connections").await?;
    let text = browser.text().await?;
    ensure!(
        text.contains(PROVIDER_DISPLAY) && text.contains(account),
        "the connections page should list {PROVIDER_DISPLAY} as {account}:\n{text}"
    );

    // Connected now: another tool reaches the provider's API at once. Past
    // half the life of the provider's 10 s access token, that goes through
    // the refresh grant first.
    tokio::time::sleep(
        std::time::Duration::from_millis(5500).saturating_sub(connected_at.elapsed()),
    )
    .await;
    let mut api = s.client(
        &token,
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
    api.finish().await?;

    // So using the connection went through the refresh grant at the real
    // provider.
    let mut db = s.world.db().await?;
    let kinds: Vec<String> = sqlx::query_scalar(
        "SELECT kind FROM audit_events WHERE subject = $1 AND provider = $2 ORDER BY id",
    )
    .bind(user)
    .bind(PROVIDER)
    .fetch_all(&mut db)
    .await?;
    ensure!(
        kinds.iter().any(|k| k == "refreshed") && !kinds.iter().any(|k| k == "refresh_failed"),
        "expected a successful refresh: {kinds:?}"
    );

    // Disconnect on the connections page: the server revokes at the
    // provider (RFC 7009), which ends the grant, so none of the access
    // tokens it issued for her works at its API any more, and its refresh
    // token gets no new one. (The access tokens live 10 s, so they alone
    // could pass by expiring; the refresh token lives a day.)
    let all_issued = tokens::issued(&s.world.tp_issuer, account).await?;
    let of_kind = |wanted: &str| -> Vec<String> {
        all_issued
            .iter()
            .filter(|(kind, _)| kind == wanted)
            .map(|(_, value)| value.clone())
            .collect()
    };
    let issued = of_kind("access_token");
    let refresh_tokens = of_kind("refresh_token");
    let refresh_token = refresh_tokens
        .last()
        .context("the provider issued no refresh token")?;
    let latest = issued
        .last()
        .context("the provider issued no access token")?;
    ensure!(
        tokens::api_status(s.world, latest).await? == 200,
        "the latest access token should work before disconnecting"
    );
    browser.click_text("Disconnect").await?;
    browser
        .wait_for_url(&format!(
            "{}/connections/{PROVIDER}/disconnect",
            s.world.base
        ))
        .await?;
    browser.shot("confirm-disconnect").await?;
    browser.click_text("Disconnect").await?;
    browser
        .wait_for_url(&format!("{}/connections?done=disconnected", s.world.base))
        .await?;
    browser.shot("disconnected").await?;
    let text = browser.text().await?;
    ensure!(
        !text.contains(account),
        "the connections page still lists {account}:\n{text}"
    );
    ensure!(
        text.contains(&format!("{PROVIDER_DISPLAY} disconnected.")),
        "no notice after disconnecting:\n{text}"
    );
    for token in &issued {
        ensure!(
            tokens::api_status(s.world, token).await? == 401,
            "an access token still works at the provider after disconnecting"
        );
    }
    let refused = tokens::refresh_grant_error(s.world, refresh_token).await?;
    ensure!(
        refused.as_deref() == Some("invalid_grant"),
        "the refresh token should be refused with invalid_grant after disconnecting, got {refused:?}"
    );
    // And the next call asks to connect again.
    let (mut again, _) = s.whoami_link(&token, Style::Manual).await?;
    again.answer("cancel").await?;
    again.expect("result").await?;
    again.finish().await?;

    browser.close().await?;
    s.check_secrets().await
}
