//! Scenario 3: a 2025-11-25 client (the SDK in `mode="legacy"`: initialize
//! handshake) gets `-32042` URLElicitationRequiredError with the link and an
//! elicitationId; the user completes in the browser; the same call, sent
//! again as it was, succeeds.

use anyhow::{Context, ensure};

use super::{Scenario, connect_in_browser, expect_account};
use crate::client::Style;

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let (user, account) = ("alice-legacy", "alice-legacy.cloud");
    let token = s.token(user).await?;
    let (mut client, link) = s.whoami_link(&token, Style::Legacy).await?;
    ensure!(link["code"] == -32042, "expected -32042: {link}");
    let id = link["elicitation_id"].as_str().unwrap_or_default();
    ensure!(
        uuid::Uuid::parse_str(id).is_ok(),
        "elicitationId should be an id, not the ticket: {link}"
    );
    let link = link["url"].as_str().context("url")?.to_owned();

    let browser = s.browser("alice").await?;
    connect_in_browser(s, &browser, &link, Some(user), account).await?;
    client.answer("accept").await?;
    expect_account(&client.expect("result").await?, account)?;
    client.finish().await?;
    browser.close().await?;
    s.check_secrets().await
}
