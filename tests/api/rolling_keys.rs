//! A rolling key rotation: the new key reaches one instance before the
//! others, and that instance seals what it refreshes with it. A call on
//! another instance that finds the row so re-sealed while it waited for a
//! refresh (its own instance's, or another's) has no key to open it with:
//! that says nothing about the connection, which stays active; the call
//! fails as retryable, as when the first read finds such a row.

use std::time::Duration;

use provider_fakes as fakes;
use serde_json::json;

use crate::{
    helpers::{TestApp, count, spawn_app_with},
    provider_flows::connect,
};

async fn run(app: &TestApp, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&app.db)
        .await
        .unwrap();
}

/// Waits until this instance has tried to claim a refresh.
async fn until_a_claim_was_tried(app: &TestApp) {
    for _ in 0..500 {
        if count(app, "SELECT count(*) FROM claims_tried").await > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no refresh was claimed");
}

#[tokio::test]
async fn a_row_resealed_elsewhere_by_a_key_this_instance_lacks_is_left_active() {
    let fake = fakes::google::start().await;
    let app = spawn_app_with(|t| fake.configure(t, "google")).await;
    connect(&app, &fake, "google").await;
    // Expired, and another instance (with the new key) is refreshing it:
    // its claim holds. Every claim this instance tries is seen.
    run(
        &app,
        "UPDATE connections SET access_token_expires_at = now() - interval '1 second',
                                tokens_stored_at = now() - interval '1 hour';
         INSERT INTO refresh_claims (connection_id, claim_id, claimed_until)
           SELECT id, gen_random_uuid(), now() + interval '1 minute' FROM connections;
         CREATE TABLE claims_tried (at timestamptz NOT NULL DEFAULT now());
         CREATE FUNCTION claim_tried() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO claims_tried DEFAULT VALUES; RETURN NULL; END $$;
         CREATE TRIGGER claim_tried BEFORE INSERT ON refresh_claims
           FOR EACH STATEMENT EXECUTE FUNCTION claim_tried();",
    )
    .await;
    let args = json!({"provider": "google"});
    let (waited_for_the_claim, waited_for_the_lock, ()) = tokio::join!(
        // Read the row, took this instance's refresh lock, found the
        // refresh claimed elsewhere: waits for its tokens.
        app.call_tool("alice", "whoami", args.clone()),
        // Read the row, and waits for the lock the first call holds.
        async {
            until_a_claim_was_tried(&app).await;
            app.call_tool("alice", "whoami", args.clone()).await
        },
        // The other instance's refresh ends: new tokens, sealed by a key
        // this instance does not have yet.
        async {
            until_a_claim_was_tried(&app).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            run(
                &app,
                "UPDATE connections SET key_id = 'rotated1',
                        access_token = decode(md5(random()::text), 'hex'),
                        access_token_expires_at = now() + interval '1 hour',
                        tokens_stored_at = now();
                 DELETE FROM refresh_claims;",
            )
            .await;
        },
    );
    for (status, body) in [waited_for_the_claim, waited_for_the_lock] {
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["data"]["retryable"], true, "{body}");
    }
    let status: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "active", "an instance with the key serves it");
    assert_eq!(fake.calls().refresh, 0, "the other instance refreshed it");
}
