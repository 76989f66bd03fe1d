//! Scenario 4: every way of saying no, and what the client's retry then
//! answers.
//! 1. Cancel on our consent page: the retry completes with an error saying
//!    the user declined.
//! 2. Deny at the provider (its consent page's Cancel: `access_denied`): our
//!    "you declined" page; the retry says the same.
//! 3. The client itself answers the elicitation with `decline`, then with
//!    `cancel` (the user closed the prompt): each says so.
//!
//! Nothing gets connected.

use anyhow::{Context, ensure};
use serde_json::Value;

use super::{Scenario, consent_page, result_text};
use crate::{client::Style, world::PROVIDER_DISPLAY};

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let w = s.world;
    let (user, account) = ("alice-decline", "alice-decline.cloud");
    let token = s.token(user).await?;

    // 1. Cancel on our consent page.
    let (mut client, link) = s.whoami_link(&token, Style::Callback).await?;
    let first = link["url"].as_str().context("url")?.to_owned();
    let browser = s.browser("alice").await?;
    browser.goto(&first).await?;
    s.signs_in(user);
    browser.sign_in_at(&w.as_issuer, user, "idp").await?;
    consent_page(s, &browser).await?;
    browser.click_text("Cancel").await?;
    browser.wait_for_url(&format!("{}/connect", w.base)).await?;
    browser.shot("cancelled").await?;
    let text = browser.text().await?;
    ensure!(text.contains("Cancelled"), "the page after Cancel:\n{text}");
    client.answer("accept").await?;
    declined(&client.expect("result").await?, "declined")?;
    client.finish().await?;
    s.note_cookies(&browser).await?;
    browser.close().await?;

    // 2. Deny at the provider, in a fresh browser (so the provider asks).
    let (mut client, link) = s.whoami_link(&token, Style::Manual).await?;
    let second = link["url"].as_str().context("url")?.to_owned();
    ensure!(
        second != first,
        "a declined link must not be handed out again"
    );
    let browser = s.browser("alice").await?;
    browser.goto(&second).await?;
    browser.sign_in_at(&w.as_issuer, user, "idp").await?;
    consent_page(s, &browser).await?;
    browser
        .click_text(&format!("Continue to {PROVIDER_DISPLAY}"))
        .await?;
    s.connects_as(account);
    browser
        .wait_for_url(&format!("{}/interaction/", w.tp_issuer))
        .await?;
    browser.shot("provider-login").await?;
    browser.fill("input[name=login]", account).await?;
    browser.fill("input[name=password]", "any password").await?;
    browser.click("button[type=submit]").await?;
    browser.refuse_at(&w.tp_issuer, "provider").await?;
    browser
        .wait_for_url(&format!("{}/oauth/callback/", w.base))
        .await?;
    browser.shot("denied").await?;
    let text = browser.text().await?;
    ensure!(
        text.contains(&format!("You declined access at {PROVIDER_DISPLAY}")),
        "the page after Deny:\n{text}"
    );
    client.answer("accept").await?;
    declined(&client.expect("result").await?, "declined")?;
    client.finish().await?;
    s.note_cookies(&browser).await?;
    browser.close().await?;

    // 3. The client says no before any browser is involved.
    for (action, word) in [("decline", "declined"), ("cancel", "cancelled")] {
        let (mut client, _) = s.whoami_link(&token, Style::Manual).await?;
        client.answer(action).await?;
        declined(&client.expect("result").await?, word)?;
        client.finish().await?;
    }

    let mut db = w.db().await?;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM connections WHERE subject = $1")
        .bind(user)
        .fetch_one(&mut db)
        .await?;
    ensure!(n == 0, "nothing may be connected after saying no");
    s.check_secrets().await
}

/// A completed call that failed, saying `word`.
fn declined(event: &Value, word: &str) -> anyhow::Result<()> {
    ensure!(
        event["event"] == "result" && event["is_error"] == true,
        "expected an error result, got {event}"
    );
    let text = result_text(event);
    ensure!(
        text.to_lowercase().contains(word),
        "the result should say {word}: {text:?}"
    );
    Ok(())
}
