//! Behind a reverse proxy every peer address is the proxy's. With the
//! proxy in `trusted_proxies`, audit rows and access lines name the client
//! its `X-Forwarded-For` reports; without it, or from any other peer, the
//! header is the client's own words and is never believed.

use serde_json::json;

use super::*;
use crate::helpers::{request, spawn_app_with};

/// What a client wrote itself.
const WRITTEN_BY_THE_CLIENT: &str = "203.0.113.66";

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_is_recorded() {
    let client = address_of_this_test();
    let (audited, lines) = record_one_of_each(Some("127.0.0.0/8"), &client).await;
    assert_eq!(audited, client, "the proxy's report, not the client's");
    assert_eq!(
        lines.len(),
        2,
        "the page's line and the MCP one: {lines:#?}"
    );
    assert!(lines.iter().all(|l| !l.contains(WRITTEN_BY_THE_CLIENT)));
}

#[tokio::test]
async fn without_trusted_proxies_the_header_is_ignored() {
    let client = address_of_this_test();
    let (audited, lines) = record_one_of_each(None, &client).await;
    assert_eq!(audited, "127.0.0.1");
    assert_eq!(
        lines,
        Vec::<String>::new(),
        "no line names the forwarded address"
    );
    // A peer that is no trusted proxy is not believed either.
    let (audited, lines) = record_one_of_each(Some("10.0.0.0/8"), &client).await;
    assert_eq!(audited, "127.0.0.1");
    assert_eq!(lines, Vec::<String>::new());
}

/// An address no other test forwards, so that this test's lines can be
/// told from theirs in the shared log capture.
fn address_of_this_test() -> String {
    let [a, b, ..] = *Uuid::new_v4().as_bytes();
    format!("198.18.{a}.{b}")
}

/// Makes an audited refusal (a provider callback with a foreign `iss`) and
/// an MCP request, each forwarded for `client` (after an address the client
/// wrote itself); returns the audit row's address and the access lines
/// that name `client`.
async fn record_one_of_each(trusted: Option<&str>, client: &str) -> (String, Vec<String>) {
    let forwarded = format!("{WRITTEN_BY_THE_CLIENT}, {client}");
    crate::logs::init();
    let app = spawn_app_with(|settings| {
        if let Some(trusted) = trusted {
            settings.insert("trusted_proxies".into(), toml::Value::from(vec![trusted]));
        }
    })
    .await;
    let subject = format!("behind-{}", Uuid::new_v4().simple());
    let (t, _) = ticket(&app, &subject, 600).await;
    let browser = signed_in(&app, &subject).await;
    let url = start_flow(&app, &browser, &t).await;
    let state = param(&url, "state").unwrap();
    let callback =
        format!("/oauth/callback/demo?code=abc&state={state}&iss=https%3A%2F%2Fevil.example");
    let refused = browser
        .client
        .get(browser.url(&callback))
        .header("X-Forwarded-For", &forwarded)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let audited: String =
        sqlx::query_scalar("SELECT ip FROM audit_events WHERE kind = 'callback_rejected'")
            .fetch_one(&app.db)
            .await
            .unwrap();

    let token = app.token(&subject);
    let listed = app
        .mcp_request(Some(&token), &request("tools/list", json!({})))
        .header("X-Forwarded-For", &forwarded)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let logs = crate::logs::captured();
    let mcp_line = logs
        .lines()
        .find(|l| l.contains("mcp request") && l.contains(&subject));
    assert!(mcp_line.is_some(), "the MCP request was logged");
    let lines = logs
        .lines()
        .filter(|l| l.contains(&format!("\"{client}\"")))
        .map(str::to_owned)
        .collect();
    (audited, lines)
}
