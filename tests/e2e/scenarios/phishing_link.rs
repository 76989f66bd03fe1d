//! Scenario 2, the phishing attack: alice's connect link, opened in bob's
//! signed-in browser, gets our "made for another account" page (403) and
//! nothing else: no navigation to the provider, no OAuth flow, the ticket
//! left unused, no connection for anyone. Then alice opens the same link in
//! her own browser and completes; bob still has nothing.

use anyhow::{Context, ensure};
use sqlx::Row;

use super::{Scenario, connect_in_browser, expect_account};
use crate::{browser::Browser, client::Style, world::World};

pub async fn run(s: &mut Scenario<'_>) -> anyhow::Result<()> {
    let w = s.world;
    let (alice, bob, account) = ("alice-phish", "bob-phish", "alice-phish.cloud");
    let token = s.token(alice).await?;
    let (mut client, link) = s.whoami_link(&token, Style::Manual).await?;
    let link = link["url"].as_str().context("url")?.to_owned();

    // Bob is signed in to the server's pages, as himself.
    let bobs = s.browser("bob").await?;
    bobs.goto(&format!("{}/connections", w.base)).await?;
    s.signs_in(bob);
    bobs.sign_in_at(&w.as_issuer, bob, "idp").await?;
    bobs.wait_for_url(&format!("{}/connections", w.base))
        .await?;
    bobs.shot("connections").await?;

    // The link reaches him.
    bobs.goto(&link).await?;
    let url = bobs.wait_for_url(&format!("{}/connect", w.base)).await?;
    bobs.shot("mismatch").await?;
    ensure!(
        bobs.status().await? == 403,
        "the mismatch page must be a 403"
    );
    let text = bobs.text().await?;
    ensure!(
        text.contains("This link was made for another account"),
        "bob should be told the link is not his:\n{text}"
    );
    // And stays there.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let still = bobs.url().await?;
    ensure!(still == url, "bob's browser moved on to {still}");
    // A link that does not exist: an error page that still knows him and
    // leads back to his connections.
    bobs.goto(&format!("{}/connect?ticket=tno-such-ticket", w.base))
        .await?;
    bobs.wait_for_url(&format!("{}/connect", w.base)).await?;
    bobs.shot("unknown-link").await?;
    ensure!(bobs.status().await? >= 400, "an unknown link is an error");
    let text = bobs.text().await?;
    ensure!(
        text.contains(&format!("Signed in as {bob}")) && !text.contains("Not signed in"),
        "the error page should show bob signed in:\n{text}"
    );
    bobs.click_text("Go to your connections").await?;
    bobs.wait_for_url(&format!("{}/connections", w.base))
        .await?;
    s.note_cookies(&bobs).await?;
    nothing_happened_for(w, &[alice, bob]).await?;

    // Alice opens the very same link herself and completes.
    let alices = s.browser("alice").await?;
    connect_in_browser(s, &alices, &link, Some(alice), account).await?;
    client.answer("accept").await?;
    expect_account(&client.expect("result").await?, account)?;
    client.finish().await?;
    ensure!(
        connections_of(w, bob).await? == 0,
        "bob must have no connection"
    );
    ensure!(
        connections_of(w, alice).await? == 1,
        "alice has exactly one connection"
    );

    close(bobs).await?;
    close(alices).await?;
    s.check_secrets().await
}

async fn close(browser: Browser) -> anyhow::Result<()> {
    browser.close().await
}

/// After bob's visit: one ticket, unused; no OAuth flow for it; a mismatch
/// in the audit log and no consent; no connections.
async fn nothing_happened_for(w: &World, subjects: &[&str]) -> anyhow::Result<()> {
    let mut db = w.db().await?;
    let tickets = sqlx::query(
        "SELECT id, redeemed_at IS NULL AS unused, declined_at IS NULL AS undeclined \
         FROM connect_tickets WHERE subject = $1",
    )
    .bind(subjects[0])
    .fetch_all(&mut db)
    .await?;
    ensure!(
        tickets.len() == 1,
        "expected one ticket, found {}",
        tickets.len()
    );
    let ticket: uuid::Uuid = tickets[0].get("id");
    ensure!(
        tickets[0].get::<bool, _>("unused") && tickets[0].get::<bool, _>("undeclined"),
        "the ticket must be left as it was"
    );
    let flows: i64 = sqlx::query_scalar("SELECT count(*) FROM oauth_flows WHERE ticket_id = $1")
        .bind(ticket)
        .fetch_one(&mut db)
        .await?;
    ensure!(flows == 0, "an OAuth flow was started for the ticket");
    let kinds: Vec<String> =
        sqlx::query_scalar("SELECT kind FROM audit_events WHERE subject = $1 ORDER BY id")
            .bind(subjects[0])
            .fetch_all(&mut db)
            .await?;
    ensure!(
        kinds.iter().any(|k| k == "identity_mismatch"),
        "no identity_mismatch audit event: {kinds:?}"
    );
    ensure!(
        !kinds
            .iter()
            .any(|k| k == "consent_given" || k == "connected"),
        "consent or connection recorded: {kinds:?}"
    );
    for subject in subjects {
        ensure!(
            connections_of(w, subject).await? == 0,
            "{subject} has a connection"
        );
    }
    Ok(())
}

async fn connections_of(w: &World, subject: &str) -> anyhow::Result<i64> {
    let mut db = w.db().await?;
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM connections WHERE subject = $1")
            .bind(subject)
            .fetch_one(&mut db)
            .await?,
    )
}
