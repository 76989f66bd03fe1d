//! Scenario 6: per-client grants. alice connects the provider through
//! client A (her browser, the provider's consent). Her second MCP client,
//! B, calling `whoami` is handed a link to our approval page, not to the
//! provider; she allows it in the browser and B's retry completes. After
//! she removes B's access on her connections page, B is asked again. A,
//! whose consent made the connection, is never asked.

use anyhow::{Context, ensure};
use serde_json::json;

use super::{Scenario, connect_in_browser, expect_account};
use crate::{
    client::Style,
    world::{MCP_CLIENT_B_ID, MCP_CLIENT_ID, PROVIDER, PROVIDER_DISPLAY},
};

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let (user, account) = ("alice-grants", "alice-grants.cloud");
    let base = s.world.base.clone();
    let token_a = s.token(user).await?;
    let token_b = s.token_for(user, MCP_CLIENT_B_ID).await?;

    // A connects: its consent there grants it the connection.
    let (mut a, link) = s.whoami_link(&token_a, Style::Manual).await?;
    let link = link["url"].as_str().context("url")?.to_owned();
    let browser = s.browser("alice").await?;
    connect_in_browser(s, &browser, &link, Some(user), account).await?;
    a.answer("accept").await?;
    expect_account(&a.expect("result").await?, account)?;
    a.finish().await?;

    // B, same user, same connection: asked to get approval first.
    let (mut b, link) = s.whoami_link(&token_b, Style::Manual).await?;
    is_approval(&link, account)?;
    let link = link["url"].as_str().context("url")?.to_owned();
    browser.goto(&link).await?;
    browser
        .wait_for_url(&format!("{base}/connect/consent"))
        .await?;
    browser.shot("approve").await?;
    let text = browser.text().await?;
    let asks = format!("{MCP_CLIENT_B_ID} wants to use your {PROVIDER_DISPLAY} account {account}");
    ensure!(
        text.contains(&asks),
        "the approval page should say {asks:?}:\n{text}"
    );
    browser.click_text("Allow").await?;
    // No provider round trip: the answer comes from our server at once.
    let text = browser
        .wait_for_text("the allowed notice", |t| {
            t.contains(&format!("{MCP_CLIENT_B_ID} allowed"))
        })
        .await?;
    ensure!(
        browser.url().await?.as_str().starts_with(&base),
        "allowing went somewhere else: {text}"
    );
    browser.shot("allowed").await?;
    b.answer("accept").await?;
    expect_account(&b.expect("result").await?, account)?;
    b.finish().await?;
    never_asked(s, &token_a, account).await?;

    // Remove B's access on the connections page: the connection stays.
    browser.goto(&format!("{base}/connections")).await?;
    browser.wait_for_url(&format!("{base}/connections")).await?;
    let text = browser.text().await?;
    ensure!(
        text.contains(MCP_CLIENT_ID) && text.contains(MCP_CLIENT_B_ID),
        "the connections page should list both clients:\n{text}"
    );
    browser.shot("connections-two-clients").await?;
    browser
        .click(&format!(
            "form[action=\"/connections/access/remove\"]:has(input[name=\"client\"][value=\"{MCP_CLIENT_B_ID}\"]) button"
        ))
        .await?;
    let text = browser
        .wait_for_text("the list without B", |t| {
            !t.contains(MCP_CLIENT_B_ID) && t.contains(MCP_CLIENT_ID)
        })
        .await?;
    ensure!(
        text.contains(account),
        "removing access must not remove the connection:\n{text}"
    );
    browser.shot("access-removed").await?;
    s.note_cookies(&browser).await?;

    // B is asked again (and this time the user lets it be); A is not.
    let (mut b, link) = s.whoami_link(&token_b, Style::Manual).await?;
    is_approval(&link, account)?;
    b.answer("cancel").await?;
    let result = b.expect("result").await?;
    ensure!(
        result["is_error"] == true,
        "a cancelled approval is no answer: {result}"
    );
    b.finish().await?;
    never_asked(s, &token_a, account).await?;

    browser.close().await?;
    s.check_secrets().await
}

/// The link is to the approval page, not a connect link. Its message
/// names no account: B is not approved for it (the page says which).
fn is_approval(event: &serde_json::Value, account: &str) -> anyhow::Result<()> {
    let message = event["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains("not yet allowed") && !message.contains(account),
        "expected an approval link naming no account: {event}"
    );
    Ok(())
}

/// A's `whoami` completes with no link.
async fn never_asked(s: &mut Scenario<'_>, token_a: &str, account: &str) -> anyhow::Result<()> {
    let mut a = s.client(
        token_a,
        Style::Manual,
        "whoami",
        json!({ "provider": PROVIDER }),
    )?;
    a.expect("connected").await?;
    let result = a.next().await?;
    ensure!(
        result["event"] != "elicitation",
        "client A was asked: {result}"
    );
    expect_account(&result, account)?;
    a.finish().await
}
