//! Which action writes which event: connecting (through the demo
//! provider's real flow), approving and removing a client, a refused
//! refresh, a token the provider refuses, reconnecting, disconnecting —
//! each its own events and no other, none with a credential in it; a
//! change that fails writes none; without an endpoint nothing is written.

use mcp_connect::domain::{ProviderName, UserRef};
use std::{collections::BTreeSet, time::Duration};

use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::{
    PATIENCE,
    receiver::{Mode, Receiver},
    with_webhooks,
};
use crate::{
    browser::Browser,
    full_flow::connect_demo,
    grants::{approval_page, asked, remove_form},
    helpers::{TestApp, allow, count, refuse, spawn_app, spawn_app_with, store_demo_connection},
};

const OTHER: &str = "other-client";

/// The events acknowledged since the last call, sorted by type; waits for
/// `expected` of them and a little longer for any extra.
async fn next_events(receiver: &Receiver, seen: &mut usize, expected: &[&str]) -> Vec<Value> {
    receiver
        .wait_for_acknowledged(*seen + expected.len(), PATIENCE)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut bodies: Vec<Value> = receiver
        .attempts()
        .into_iter()
        .filter(|a| a.status == 200)
        .map(|a| {
            assert!(a.verified, "{:?}", a.body);
            a.body
        })
        .collect();
    let new = bodies.split_off(*seen);
    *seen += new.len();
    let mut types: Vec<&str> = new.iter().map(|b| b["type"].as_str().unwrap()).collect();
    types.sort_unstable();
    let mut wanted = expected.to_vec();
    wanted.sort_unstable();
    assert_eq!(types, wanted, "{new:#?}");
    let mut new = new;
    new.sort_by_key(|b| b["type"].as_str().unwrap().to_owned());
    new
}

fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    &events.iter().find(|e| e["type"] == kind).unwrap()["data"]
}

async fn demo_secrets(app: &TestApp, into: &mut Vec<String>) {
    let token = app.demo_token("alice").await;
    into.push(token.access_token.expose_secret().to_owned());
    if let Some(r) = app.state.connect.refresh_token_of(&token).unwrap() {
        into.push(r.expose_secret().to_owned());
    }
}

#[tokio::test]
async fn each_action_writes_its_own_events_and_never_a_credential() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, &[], "")).await;
    let (mut seen, mut all, mut secrets) = (0, Vec::new(), Vec::new());

    connect_demo(&app, "alice", "octo").await;
    let got = next_events(
        &receiver,
        &mut seen,
        &["connection.created", "grant.created"],
    )
    .await;
    let created = event(&got, "connection.created");
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(
        *created,
        json!({"connection_id": id, "issuer": app.dev.issuer(), "subject": "alice",
               "provider": "demo", "account_id": created["account_id"],
               "account_label": "octo", "reconnected": false})
    );
    assert_eq!(event(&got, "grant.created")["client_id"], "test-client");
    demo_secrets(&app, &mut secrets).await;
    all.extend(got);

    // Another client, approved on the approval page; then its access removed.
    let (url, _, _) = asked(&app, OTHER).await;
    let browser = Browser::new(&app);
    let page = approval_page(&browser, &url).await;
    let done = browser
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    let got = next_events(&receiver, &mut seen, &["grant.created"]).await;
    assert_eq!(event(&got, "grant.created")["client_id"], OTHER);
    all.extend(got);
    let list = browser.get("/connections").await;
    let form = remove_form(&list, OTHER);
    let removed = browser.post_form("/connections/access/remove", &form).await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    let got = next_events(&receiver, &mut seen, &["grant.removed"]).await;
    assert_eq!(event(&got, "grant.removed")["client_id"], OTHER);
    assert_eq!(event(&got, "grant.removed")["account_label"], "octo");
    all.extend(got);

    // A refresh the provider refuses (a reused refresh token).
    let (old_refresh, key_id): (Vec<u8>, String) =
        sqlx::query_as("SELECT refresh_token, key_id FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    expire(&app).await;
    let (_, first) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        first["result"]["structuredContent"]["account"], "octo",
        "{first}"
    );
    demo_secrets(&app, &mut secrets).await;
    sqlx::query("UPDATE connections SET refresh_token = $1, key_id = $2")
        .bind(old_refresh)
        .bind(key_id)
        .execute(&app.db)
        .await
        .unwrap();
    expire(&app).await;
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let got = next_events(
        &receiver,
        &mut seen,
        &["connection.reauth_required", "connection.refresh_failed"],
    )
    .await;
    assert_eq!(
        event(&got, "connection.refresh_failed")["reason"],
        "invalid_grant"
    );
    assert_eq!(
        event(&got, "connection.reauth_required")["reason"],
        "invalid_grant"
    );
    all.extend(got);

    // Connecting again: the same connection, back in use.
    tokio::time::sleep(Duration::from_millis(10)).await;
    connect_demo(&app, "alice", "octo").await;
    let got = next_events(&receiver, &mut seen, &["connection.created"]).await;
    assert_eq!(event(&got, "connection.created")["reconnected"], true);
    assert_eq!(
        event(&got, "connection.created")["connection_id"],
        json!(id)
    );
    demo_secrets(&app, &mut secrets).await;
    all.extend(got);

    // The provider refuses the access token on an API call.
    let token = app.demo_token("alice").await;
    let settings = app.dev.demo().provider_settings();
    app.http
        .post(format!("{}/dev/demo/revoke", app.addr))
        .basic_auth(
            settings["client_id"].as_str().unwrap(),
            settings["client_secret"].as_str(),
        )
        .form(&[("token", token.access_token.expose_secret())])
        .send()
        .await
        .unwrap();
    let (_, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "method": "GET", "path": "me"}),
        )
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["http_status"], 401,
        "{body}"
    );
    let got = next_events(&receiver, &mut seen, &["connection.reauth_required"]).await;
    assert_eq!(
        event(&got, "connection.reauth_required")["reason"],
        "token_rejected"
    );
    all.extend(got);

    // Disconnect, confirmed.
    let (_, asked) = app
        .call_tool("alice", "disconnect", json!({"provider": "demo"}))
        .await;
    let state = asked["result"]["requestState"].as_str().unwrap();
    let (_, gone) = app
        .mcp("alice", "tools/call", json!({"name": "disconnect", "arguments": {"provider": "demo"},
            "requestState": state,
            "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": true}}}}))
        .await;
    assert!(gone.to_string().contains("disconnected"), "{gone}");
    let got = next_events(&receiver, &mut seen, &["connection.deleted"]).await;
    assert_eq!(
        event(&got, "connection.deleted")["connection_id"],
        json!(id)
    );
    all.extend(got);

    // Never a credential: only these fields, and no token anywhere.
    let allowed: BTreeSet<&str> = [
        "connection_id",
        "issuer",
        "subject",
        "provider",
        "account_id",
        "account_label",
        "reconnected",
        "client_id",
        "reason",
    ]
    .into();
    let text = serde_json::to_string(&all).unwrap();
    for e in &all {
        let keys: BTreeSet<&str> = e["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(keys.is_subset(&allowed), "{e}");
        assert_eq!(
            e.as_object().unwrap().len(),
            3,
            "type, timestamp, data: {e}"
        );
    }
    assert!(secrets.len() >= 4, "{}", secrets.len());
    for secret in &secrets {
        assert!(!text.contains(secret.as_str()), "a token in an event");
    }
    let client_secret = settings["client_secret"].as_str().unwrap();
    assert!(!text.contains(client_secret));
}

async fn expire(app: &TestApp) {
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_change_that_fails_writes_no_event() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, &[], "")).await;
    let issuer = app.dev.issuer();
    store_demo_connection(&app.state.connect, &issuer, "alice", "a-1", None).await;
    let mut seen = 0;
    next_events(
        &receiver,
        &mut seen,
        &["connection.created", "grant.created"],
    )
    .await;

    // The database refuses the last statement of each change.
    refuse(&app.db, "connections", "DELETE").await;
    refuse(&app.db, "client_grants", "INSERT").await;
    let disconnected = app
        .state
        .connect
        .disconnect(
            UserRef::new(&issuer, "alice"),
            &ProviderName::parse("demo").unwrap(),
        )
        .await;
    assert!(disconnected.is_err());
    let stored = tokio::spawn({
        let state = app.state.clone();
        let issuer = issuer.clone();
        async move { store_demo_connection(&state.connect, &issuer, "bob", "b-1", None).await }
    })
    .await;
    assert!(stored.is_err(), "the store failed");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.attempts().len(), 2, "no event of a failed change");
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);

    allow(&app.db, "connections").await;
    assert!(
        app.state
            .connect
            .disconnect(
                UserRef::new(&issuer, "alice"),
                &ProviderName::parse("demo").unwrap()
            )
            .await
            .unwrap()
    );
    next_events(&receiver, &mut seen, &["connection.deleted"]).await;
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_written() {
    let app = spawn_app().await;
    let issuer = app.dev.issuer();
    store_demo_connection(&app.state.connect, &issuer, "alice", "a-1", None).await;
    assert!(
        app.state
            .connect
            .disconnect(
                UserRef::new(&issuer, "alice"),
                &ProviderName::parse("demo").unwrap()
            )
            .await
            .unwrap()
    );
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 0);
}

#[tokio::test]
async fn an_endpoint_gets_only_the_events_it_asked_for() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, &["connection.deleted"], "")).await;
    let issuer = app.dev.issuer();
    store_demo_connection(&app.state.connect, &issuer, "alice", "a-1", None).await;
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 0);
    assert!(
        app.state
            .connect
            .disconnect(
                UserRef::new(&issuer, "alice"),
                &ProviderName::parse("demo").unwrap()
            )
            .await
            .unwrap()
    );
    let mut seen = 0;
    next_events(&receiver, &mut seen, &["connection.deleted"]).await;
}
