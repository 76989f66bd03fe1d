//! One clock for what the database keeps: a connect link's, a connect
//! flow's and a sign-in's expiry are set and judged by the database's
//! clock, so an instance whose own clock is minutes off neither issues
//! links and sign-ins that are over at once nor ones that outlive their
//! lifetime, and every instance agrees on each.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    browser::Browser,
    full_flow::{approve_at_demo, elicit, open_and_continue, retry_accepted},
    helpers::{TestApp, spawn_app_with_database_clock},
};

/// Further off than a link's ten minutes.
const FAR: chrono::Duration = chrono::Duration::minutes(15);

fn settings(table: &mut toml::Table, section: &str, entries: &str) {
    table.insert(
        section.into(),
        toml::Value::Table(toml::from_str(entries).unwrap()),
    );
}

fn link_of(body: &Value) -> &str {
    body["result"]["inputRequests"]["connect_demo"]["params"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("a connect link: {body}"))
}

/// How long each row of `table` lives, by its own `created_at`: both are
/// the database's clock's when the expiry is.
async fn lifetimes(app: &TestApp, table: &str) -> Vec<f64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM {table}"
    )))
    .fetch_all(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_link_issued_by_an_instance_behind_the_database_clock_connects() {
    let app = spawn_app_with_database_clock(FAR, |t| {
        settings(t, "flow", "connect_wait_ms = 200");
    })
    .await;
    let args = json!({"provider": "demo"});
    let (url, state) = elicit(&app, "alice", "connect", args.clone(), "connect_demo").await;
    // Not connected yet: the client's retry is sent the same link, which
    // the link's page then finds as usable.
    let again = retry_accepted(
        &app,
        "alice",
        "connect",
        args.clone(),
        &state,
        "connect_demo",
    )
    .await;
    assert_eq!(link_of(&again), url, "{again}");
    let state = again["result"]["requestState"].as_str().unwrap();

    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let done = approve_at_demo(&browser, &to_provider, "octo").await;
    assert!(done.body.contains("Demo connected as"), "{}", done.body);
    let body = retry_accepted(&app, "alice", "connect", args, state, "connect_demo").await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");

    assert_eq!(lifetimes(&app, "connect_tickets").await, [600.0]);
    assert_eq!(lifetimes(&app, "oauth_flows").await, [600.0]);
    assert_eq!(lifetimes(&app, "web_sessions").await, [8.0 * 3600.0]);
}

#[tokio::test]
async fn a_sign_in_lasts_its_lifetime_on_an_instance_behind_the_database_clock() {
    let app = spawn_app_with_database_clock(FAR, |t| {
        settings(t, "web", "session_ttl_secs = 600");
    })
    .await;
    let alice = Browser::new(&app);
    let landed = alice.sign_in("alice").await;
    assert_eq!(landed.location.as_deref(), Some("/connections"));
    let page = alice.get("/connections").await;
    assert_eq!(
        page.status, 200,
        "signed in: {:?} {}",
        page.location, page.body
    );
}

#[tokio::test]
async fn a_link_ends_by_the_database_clock_on_an_instance_ahead_of_it() {
    let app = spawn_app_with_database_clock(-FAR, |t| {
        settings(t, "flow", "ticket_ttl_secs = 1\nconnect_wait_ms = 200");
    })
    .await;
    let alice = Browser::new(&app);
    alice.sign_in("alice").await;
    let args = json!({"provider": "demo"});
    let (url, state) = elicit(&app, "alice", "connect", args.clone(), "connect_demo").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let page = alice.get(&url).await;
    assert_eq!(page.status, 410, "{}", page.body);
    assert!(page.body.contains("This link has expired"), "{}", page.body);
    // And the client's retry is sent a new one.
    let again = retry_accepted(&app, "alice", "connect", args, &state, "connect_demo").await;
    assert_ne!(link_of(&again), url, "{again}");
}
