//! Scenario 6: alice's MCP client calls `api_request` for OpenAI, an
//! API-key provider (the shipped entry, enabled by naming it; the peer plays
//! its API). The link opens our own page, not the provider's: after signing
//! in she sees a form with OpenAI's instructions and a link to where keys
//! are made. A key OpenAI refuses is not stored and the page says so; the
//! right key connects, the client's retry completes with the API's answer,
//! and her connections page shows only the key's last four characters.

use anyhow::{Context, ensure};
use serde_json::json;

use super::{Scenario, result_text};
use crate::client::Style;

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let w = s.world;
    let user = "alice-keys";
    let key = w.openai_key.clone();
    s.secrets.add("OpenAI API key", &key);
    let token = s.token(user).await?;
    let mut client = s.client(
        &token,
        Style::Manual,
        "api_request",
        json!({ "provider": "openai", "path": "models" }),
    )?;
    let event = client.elicitation().await?;
    let link = event["url"].as_str().context("elicitation without url")?;
    ensure!(
        link.starts_with(&format!("{}/connect?ticket=", w.base)),
        "the link {link:?} is not ours"
    );
    s.secrets.add(
        "connect ticket",
        link.rsplit('=').next().unwrap_or_default(),
    );
    let message = event["message"].as_str().unwrap_or_default();
    ensure!(message.contains("OpenAI"), "the message: {message:?}");

    let browser = s.browser("alice").await?;
    browser.goto(link).await?;
    s.signs_in(user);
    browser.sign_in_at(&w.as_issuer, user, "idp").await?;
    browser
        .wait_for_url(&format!("{}/connect/consent", w.base))
        .await?;
    browser.shot("key-form").await?;
    let text = browser.text().await?;
    for expected in [
        "OpenAI",
        "Create a project API key",
        "API key",
        "never shown again",
    ] {
        ensure!(
            text.contains(expected),
            "the key form should show {expected:?}:\n{text}"
        );
    }

    // A key OpenAI refuses: said on the page, nothing stored.
    let wrong = format!("sk-e2e{}", "0".repeat(32));
    s.secrets.add("refused API key", &wrong);
    browser.fill("#field-api_key", &wrong).await?;
    browser.click_text("Connect OpenAI").await?;
    browser.wait_for_url(&format!("{}/connect", w.base)).await?;
    browser.shot("key-refused").await?;
    ensure!(browser.status().await? == 422, "refused key page status");
    let text = browser.text().await?;
    ensure!(
        text.contains("OpenAI refused these credentials (HTTP 401). Nothing was stored."),
        "the page should say the key was refused:\n{text}"
    );

    browser.fill("#field-api_key", &key).await?;
    browser.click_text("Connect OpenAI").await?;
    browser.wait_for_url(&format!("{}/connect", w.base)).await?;
    browser.shot("key-connected").await?;
    ensure!(browser.status().await? == 200, "success page status");
    let hint = format!("…{}", &key[key.len() - 4..]);
    let text = browser.text().await?;
    ensure!(
        text.contains(&format!("OpenAI connected as key {hint}")),
        "the success page should name the key by its last characters:\n{text}"
    );
    s.note_cookies(&browser).await?;

    client.answer("accept").await?;
    let result = client.expect("result").await?;
    ensure!(
        result["is_error"] == false && result["structured"]["http_status"] == 200,
        "api_request after connecting: {result}"
    );
    ensure!(
        result_text(&result).contains("OpenAI answered HTTP 200"),
        "{result}"
    );
    ensure!(
        result["structured"]["body"]["data"][0]["id"] == "gpt-e2e",
        "the API's answer: {result}"
    );
    client.finish().await?;

    browser.goto(&format!("{}/connections", w.base)).await?;
    browser
        .wait_for_url(&format!("{}/connections", w.base))
        .await?;
    browser.shot("connections").await?;
    let text = browser.text().await?;
    ensure!(
        text.contains("OpenAI") && text.contains(&hint),
        "the connections page should list OpenAI with {hint}:\n{text}"
    );
    browser.close().await?;
    s.check_secrets().await
}
