//! One clock for a provider's tokens too: when an access token expires is
//! written as the database's `now()` plus the provider's `expires_in`, and
//! judged against the database's `now()` of the read that found it; the
//! once-a-minute note of a use and the "stored within the last minute"
//! of a refused token likewise. An instance whose own clock is off then
//! refreshes neither early (every call, or long before the provider
//! would) nor late (calling with a token the provider has let expire),
//! and every instance agrees on each.

use provider_fakes::{self as fakes, FakeProvider};
use serde_json::json;

use crate::{
    helpers::{TestApp, count, spawn_app_with_database_clock},
    provider_flows::connect,
};

/// Further off than the refresh margin and the once-a-minute throttles.
const FAR: chrono::Duration = chrono::Duration::minutes(15);

/// Google's fake, and the app on a database whose clock is `offset` from
/// this process's, with alice connected.
async fn connected(offset: chrono::Duration) -> (FakeProvider, TestApp) {
    let fake = fakes::google::start().await;
    let app = spawn_app_with_database_clock(offset, |t| fake.configure(t, "google")).await;
    connect(&app, &fake, "google").await;
    (fake, app)
}

async fn run(app: &TestApp, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&app.db)
        .await
        .unwrap();
}

async fn whoami(app: &TestApp) -> serde_json::Value {
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

fn served(body: &serde_json::Value) {
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice@example.com",
        "{body}"
    );
}

/// Google's tokens live 3599 seconds, counted from its answer: stored a
/// moment later, one has that long left, less the moment (well under the
/// quarter of an hour the clocks are apart here).
fn as_google_said(lifetime: f64, when: &str) {
    assert!(
        (3599.0 - 60.0..=3599.0).contains(&lifetime),
        "{when}: {lifetime} s left"
    );
}

/// The stored token's lifetime in seconds, from when it was stored.
async fn lifetime(app: &TestApp) -> f64 {
    sqlx::query_scalar(
        "SELECT extract(epoch FROM access_token_expires_at - tokens_stored_at)::float8 FROM connections",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_token_expires_when_the_provider_said_by_the_database_clock() {
    let (fake, app) = connected(FAR).await;
    as_google_said(lifetime(&app).await, "as connected");
    // Past by any clock here: refreshed, and the new token is counted as
    // the first was.
    run(
        &app,
        "UPDATE connections SET access_token_expires_at = now() - interval '1 hour', \
                                tokens_stored_at = now() - interval '2 hours'",
    )
    .await;
    served(&whoami(&app).await);
    assert_eq!(fake.calls().refresh, 1);
    as_google_said(lifetime(&app).await, "as refreshed");
}

#[tokio::test]
async fn a_token_expired_by_the_database_clock_is_refreshed_on_an_instance_behind_it() {
    let (fake, app) = connected(FAR).await;
    // Expired a second ago for the database; this instance would still
    // give it a quarter of an hour, and the provider refuse it.
    run(
        &app,
        "UPDATE connections SET access_token_expires_at = now() - interval '1 second', \
                                tokens_stored_at = now() - interval '1 hour'",
    )
    .await;
    fake.expire_access_tokens();
    let called = fake.calls().userinfo;
    served(&whoami(&app).await);
    assert_eq!(fake.calls().refresh, 1);
    assert_eq!(
        fake.calls().userinfo,
        called + 1,
        "refreshed before the call, not after the provider refused it"
    );
    let fresh: bool = sqlx::query_scalar(
        "SELECT access_token_expires_at > now() + interval '50 minutes' FROM connections",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!(fresh, "the new token's expiry, by the database clock");
}

#[tokio::test]
async fn a_token_with_minutes_left_by_the_database_clock_is_not_refreshed_on_an_instance_ahead_of_it()
 {
    let (fake, app) = connected(-FAR).await;
    // Ten minutes left for the database (as an instance in step with it
    // stored it); expired five minutes ago by this instance's clock.
    run(
        &app,
        "UPDATE connections SET access_token_expires_at = now() + interval '10 minutes', \
                                tokens_stored_at = now() - interval '50 minutes'",
    )
    .await;
    served(&whoami(&app).await);
    served(&whoami(&app).await);
    assert_eq!(fake.calls().refresh, 0, "not due yet");
}

#[tokio::test]
async fn a_use_is_noted_by_the_database_clock_on_an_instance_behind_it() {
    let (_fake, app) = connected(FAR).await;
    // Last noted two minutes ago for the database; in this instance's
    // future, thirteen minutes from now.
    run(
        &app,
        "UPDATE connections SET last_used_at = now() - interval '2 minutes'; \
         UPDATE client_grants SET last_used_at = now() - interval '2 minutes'",
    )
    .await;
    served(&whoami(&app).await);
    for table in ["connections", "client_grants"] {
        let noted = count(
            &app,
            &format!(
                "SELECT count(*) FROM {table} WHERE last_used_at > now() - interval '30 seconds'"
            ),
        )
        .await;
        assert_eq!(noted, 1, "the use noted in {table}");
    }
}

#[tokio::test]
async fn a_use_is_noted_once_a_minute_by_the_database_clock_on_an_instance_ahead_of_it() {
    let (_fake, app) = connected(-FAR).await;
    served(&whoami(&app).await);
    // Every UPDATE statement on the two tables, whether or not it changed
    // a row: a note sent is a write on the hot path.
    run(
        &app,
        "CREATE TABLE updates_seen (tbl text NOT NULL);
         CREATE FUNCTION note_update() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO updates_seen VALUES (TG_TABLE_NAME); RETURN NULL; END $$;
         CREATE TRIGGER note_update AFTER UPDATE ON connections
           FOR EACH STATEMENT EXECUTE FUNCTION note_update();
         CREATE TRIGGER note_update AFTER UPDATE ON client_grants
           FOR EACH STATEMENT EXECUTE FUNCTION note_update();",
    )
    .await;
    for _ in 0..3 {
        served(&whoami(&app).await);
    }
    assert_eq!(
        count(&app, "SELECT count(*) FROM updates_seen").await,
        0,
        "noted seconds ago by the database clock: nothing to note"
    );
}

#[tokio::test]
async fn a_token_stored_minutes_ago_by_the_database_clock_is_refreshed_when_refused_on_an_instance_behind_it()
 {
    let (fake, app) = connected(FAR).await;
    // Stored five minutes ago for the database: ten minutes from now for
    // this instance, which would take it for fresh.
    run(
        &app,
        "UPDATE connections SET tokens_stored_at = now() - interval '5 minutes'",
    )
    .await;
    fake.expire_access_tokens();
    served(&whoami(&app).await);
    assert_eq!(fake.calls().refresh, 1, "refreshed for the refusal");
}

#[tokio::test]
async fn a_token_stored_seconds_ago_by_the_database_clock_is_not_refreshed_when_refused_on_an_instance_ahead_of_it()
 {
    let (fake, app) = connected(-FAR).await;
    // Just stored, for the database; a quarter of an hour ago for this
    // instance.
    fake.expire_access_tokens();
    let body = whoami(&app).await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert_eq!(fake.calls().refresh, 0, "no refresh for fresh tokens");
}
