//! The scenarios, and what each gets: the world, its own screenshot folder,
//! browsers and MCP clients that log under its name, and a record of the
//! secrets it saw, checked against every log and the database at its end.

pub mod alice_connects;
pub mod alice_pastes_a_key;
pub mod client_grants;
pub mod compose_stack;
pub mod decline_and_cancel;
pub mod legacy_client;
pub mod phishing_link;
pub mod switch_account;

use std::sync::{Arc, atomic::AtomicU32};

use anyhow::{Context, bail, ensure};
use serde_json::Value;

use crate::{
    browser::Browser,
    client::{McpClient, Style},
    secrets::Secrets,
    tokens,
    world::{PROVIDER, PROVIDER_DISPLAY, World},
};

pub struct Scenario<'w> {
    pub world: &'w World,
    pub name: &'static str,
    counter: Arc<AtomicU32>,
    clients: usize,
    pub secrets: Secrets,
    /// (authorization server subjects, third-party accounts) this scenario
    /// signed in as, whose issued codes and tokens are checked at the end.
    accounts: (Vec<String>, Vec<String>),
}

impl<'w> Scenario<'w> {
    pub fn new(world: &'w World, name: &'static str) -> Self {
        Scenario {
            world,
            name,
            counter: Arc::new(AtomicU32::new(0)),
            clients: 0,
            secrets: Secrets::default(),
            accounts: (Vec::new(), Vec::new()),
        }
    }

    pub async fn browser(&self, who: &str) -> anyhow::Result<Browser> {
        Browser::open(
            self.world,
            who,
            self.world.shots.join(self.name),
            self.counter.clone(),
        )
        .await
    }

    /// An MCP bearer token for `user`, from the authorization server.
    pub async fn token(&mut self, user: &str) -> anyhow::Result<String> {
        self.token_for(user, crate::world::MCP_CLIENT_ID).await
    }

    /// An MCP bearer token for `user` of the MCP client `client_id`.
    pub async fn token_for(&mut self, user: &str, client_id: &str) -> anyhow::Result<String> {
        let token = tokens::mcp_token_for(self.world, user, client_id)
            .await
            .with_context(|| format!("get an MCP token for {user} of {client_id}"))?;
        self.secrets.add("MCP bearer token", &token);
        self.signs_in(user);
        Ok(token)
    }

    /// `user` signs in at the authorization server in this scenario.
    pub fn signs_in(&mut self, user: &str) {
        self.accounts.0.push(user.to_owned());
    }

    /// `account` signs in at the third-party provider in this scenario.
    pub fn connects_as(&mut self, account: &str) {
        self.accounts.1.push(account.to_owned());
    }

    /// Starts the Python MCP client calling `tool`.
    pub fn client(
        &mut self,
        token: &str,
        style: Style,
        tool: &str,
        args: Value,
    ) -> anyhow::Result<McpClient> {
        self.clients += 1;
        McpClient::call(
            self.world,
            &format!("{}-client-{}", self.name, self.clients),
            token,
            style,
            tool,
            args,
        )
    }

    /// Starts `whoami` for the third-party provider and returns the client
    /// and the link it shows, after checking the link's shape.
    pub async fn whoami_link(
        &mut self,
        token: &str,
        style: Style,
    ) -> anyhow::Result<(McpClient, Value)> {
        let mut client = self.client(
            token,
            style,
            "whoami",
            serde_json::json!({ "provider": PROVIDER }),
        )?;
        let event = client.elicitation().await?;
        let link = event["url"].as_str().context("elicitation without url")?;
        let prefix = format!("{}/connect?ticket=", self.world.base);
        ensure!(link.starts_with(&prefix), "the link {link:?} is not ours");
        let ticket = &link[prefix.len()..];
        ensure!(
            ticket.len() >= 43 && !ticket.contains('&'),
            "the link should carry exactly one ticket"
        );
        self.secrets.add("connect ticket", ticket);
        if let Some(state) = event["request_state"].as_str() {
            self.secrets.add("requestState", state);
        }
        let message = event["message"].as_str().unwrap_or_default();
        ensure!(
            message.contains(PROVIDER_DISPLAY),
            "the elicitation message should name {PROVIDER_DISPLAY}: {message:?}"
        );
        Ok((client, event))
    }

    /// The browser's cookies for the current site go on the secrets list.
    pub async fn note_cookies(&mut self, browser: &Browser) -> anyhow::Result<()> {
        for value in browser.cookie_values().await? {
            self.secrets
                .add(&format!("{}'s cookie", browser.who), &value);
        }
        Ok(())
    }

    /// At the end: what the peers issued to this scenario's accounts joins
    /// the list, then no log and no table may hold any of it.
    pub async fn check_secrets(&mut self) -> anyhow::Result<()> {
        // Let the last log lines reach the files.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let (subjects, accounts) = self.accounts.clone();
        for (issuer, names, who) in [
            (&self.world.as_issuer, subjects, "authorization server"),
            (&self.world.tp_issuer, accounts, "provider"),
        ] {
            for name in names {
                for (kind, value) in tokens::issued(issuer, &name).await? {
                    self.secrets.add(&format!("{who} {kind} of {name}"), &value);
                }
            }
        }
        ensure!(
            self.secrets.len() > 3,
            "too few secrets seen to check anything"
        );
        self.world.seen.lock().expect("seen").extend(&self.secrets);
        self.secrets.check_logs(self.world)?;
        self.secrets.check_database(self.world).await
    }
}

/// The text of a `result` event, joined.
pub fn result_text(event: &Value) -> String {
    event["text"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The client's final answer must be a successful `whoami` for `account`.
pub fn expect_account(event: &Value, account: &str) -> anyhow::Result<()> {
    if event["event"] != "result" || event["is_error"] != Value::Bool(false) {
        bail!("expected a successful result, got {event}");
    }
    let s = &event["structured"];
    ensure!(s["provider"] == PROVIDER, "provider in {s}");
    ensure!(
        s["account"] == account,
        "account label should be {account}: {s}"
    );
    ensure!(
        s["account_id"] == account,
        "account id should be {account}: {s}"
    );
    Ok(())
}

/// The browser part every connect shares: from the link (empty: the
/// browser is on its way already) to the success page, signing in at the
/// authorization server as `user` (unless the browser is signed in already)
/// and at the provider as `account`.
pub async fn connect_in_browser(
    s: &mut Scenario<'_>,
    browser: &Browser,
    link: &str,
    user: Option<&str>,
    account: &str,
) -> anyhow::Result<()> {
    let w = s.world;
    if !link.is_empty() {
        browser.goto(link).await?;
    }
    if let Some(user) = user {
        s.signs_in(user);
        browser.sign_in_at(&w.as_issuer, user, "idp").await?;
    }
    consent_page(s, browser).await?;
    browser
        .click_text(&format!("Continue to {PROVIDER_DISPLAY}"))
        .await?;
    s.connects_as(account);
    browser
        .sign_in_at(&w.tp_issuer, account, "provider")
        .await?;
    browser
        .wait_for_url(&format!("{}/oauth/callback/{PROVIDER}", w.base))
        .await?;
    browser.shot("connected").await?;
    ensure!(browser.status().await? == 200, "success page status");
    let text = browser.text().await?;
    ensure!(
        text.contains(&format!("{PROVIDER_DISPLAY} connected")) && text.contains(account),
        "the success page should say {PROVIDER_DISPLAY} is connected as {account}:\n{text}"
    );
    // Reloaded (the code in its address is spent), it still says so.
    browser.reload().await?;
    browser
        .wait_for_url(&format!("{}/oauth/callback/{PROVIDER}", w.base))
        .await?;
    browser.shot("connected-reloaded").await?;
    ensure!(
        browser.status().await? == 200,
        "reloaded success page status"
    );
    let again = browser.text().await?;
    ensure!(
        again.contains(&format!("{PROVIDER_DISPLAY} connected")) && again.contains(account),
        "the reloaded success page should still say {PROVIDER_DISPLAY} is connected as {account}:\n{again}"
    );
    s.note_cookies(browser).await
}

/// Our consent page, reached after sign-in: no ticket in the address (only
/// the ticket's id and this session's tag for it), and it names the
/// provider, this server and the MCP client.
pub async fn consent_page(s: &Scenario<'_>, browser: &Browser) -> anyhow::Result<()> {
    let w = s.world;
    let url = browser
        .wait_for_url(&format!("{}/connect/consent", w.base))
        .await?;
    browser.shot("consent").await?;
    // The ticket itself never stays in the address (history, screenshots,
    // a Referer): `t` is its id, a UUID, and `m` the session's tag for it.
    let names_only_the_id = url.query_pairs().all(|(name, value)| match name.as_ref() {
        "t" => uuid::Uuid::parse_str(&value).is_ok(),
        "m" => true,
        _ => false,
    });
    ensure!(
        names_only_the_id && url.query_pairs().any(|(name, _)| name == "t"),
        "the consent page address should name the link by its id only: {url}"
    );
    ensure!(browser.status().await? == 200, "consent page status");
    let text = browser.text().await?;
    let host = w
        .base
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    for expected in [
        format!("{host} wants to connect your {PROVIDER_DISPLAY} account"),
        host.to_owned(),
        crate::world::MCP_CLIENT_ID.to_owned(),
    ] {
        ensure!(
            text.contains(&expected),
            "the consent page should show {expected:?}:\n{text}"
        );
    }
    Ok(())
}
