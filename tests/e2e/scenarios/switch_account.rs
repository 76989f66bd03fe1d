//! Scenario 5: alice opens her own link while her browser is signed in to
//! the server with her other account (alice-work). She gets the "made for
//! another account" page, presses "Sign out and use another account", is
//! asked by the authorization server to sign in again (prompt=login, though
//! its own session is still alive), signs in as herself, and lands on the
//! consent page of the same link; the rest of the flow completes.

use anyhow::{Context, ensure};

use super::{Scenario, connect_in_browser, expect_account};
use crate::client::Style;

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let w = s.world;
    let (user, other, account) = ("alice-switch", "alice-work", "alice-switch.cloud");
    let token = s.token(user).await?;
    let (mut client, link) = s.whoami_link(&token, Style::Manual).await?;
    let link = link["url"].as_str().context("url")?.to_owned();

    let browser = s.browser("alice").await?;
    browser.goto(&format!("{}/connections", w.base)).await?;
    s.signs_in(other);
    browser.sign_in_at(&w.as_issuer, other, "idp").await?;
    browser
        .wait_for_url(&format!("{}/connections", w.base))
        .await?;

    browser.goto(&link).await?;
    browser.wait_for_url(&format!("{}/connect", w.base)).await?;
    browser.shot("mismatch").await?;
    ensure!(
        browser.status().await? == 403,
        "the mismatch page must be a 403"
    );
    browser
        .click_text("Sign out and use another account")
        .await?;

    // The authorization server must ask again, not reuse alice-work's session.
    connect_in_browser(s, &browser, "", Some(user), account)
        .await
        .context("after switching accounts")?;
    client.answer("accept").await?;
    expect_account(&client.expect("result").await?, account)?;
    client.finish().await?;
    browser.close().await?;
    s.check_secrets().await
}
