//! When a stored provider token expires: counted from the provider's
//! answer (`db::connections::Lifetime`), by the database's clock, however
//! long it took to write it; and a refresh written again after its lost
//! commit keeps the times that commit wrote.

use std::time::{Duration, Instant};

use mcp_connect::db::{
    self,
    connections::{Lifetime, RefreshedTokens, StoredTokens},
};
use mcp_connect::domain::{ProviderName, UserRef};
use uuid::Uuid;

use crate::helpers::{TestApp, spawn_app};

/// An hour, as a provider says it, from an answer `ago`.
fn an_hour_answered(ago: Duration) -> Lifetime {
    Lifetime {
        said: Duration::from_secs(3600),
        since: Instant::now().checked_sub(ago).unwrap(),
    }
}

async fn stored(app: &TestApp) -> Uuid {
    let mut conn = app.db.acquire().await.unwrap();
    let id = db::connections::claim_id(
        &mut conn,
        UserRef::new("https://issuer.example", "alice"),
        &ProviderName::parse("demo").unwrap(),
        "octo",
    )
    .await
    .unwrap();
    let tokens = StoredTokens {
        account_id: "octo",
        account_label: "octo",
        scopes: &[],
        access_token: b"sealed-first",
        refresh_token: None,
        key_id: "k",
        expires_in: Some(an_hour_answered(Duration::from_secs(30))),
    };
    db::connections::store(&mut *conn, id, tokens)
        .await
        .unwrap();
    id
}

/// Seconds from when the tokens were stored to when they expire.
async fn left_when_stored(app: &TestApp) -> f64 {
    sqlx::query_scalar(
        "SELECT extract(epoch FROM access_token_expires_at - tokens_stored_at)::float8 FROM connections",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_lifetime_counts_from_the_providers_answer_not_from_the_write() {
    let app = spawn_app().await;
    stored(&app).await;
    // Answered half a minute before it was written: half a minute less.
    let left = left_when_stored(&app).await;
    assert!((3565.0..=3570.0).contains(&left), "{left}");
}

#[tokio::test]
async fn tokens_written_again_after_their_lost_commit_keep_the_times_it_wrote() {
    let app = spawn_app().await;
    let id = stored(&app).await;
    let refreshed = RefreshedTokens {
        access_token: b"sealed-second",
        refresh_token: None,
        key_id: "k",
        expires_in: Some(an_hour_answered(Duration::ZERO)),
    };
    let first = db::connections::store_refreshed(&app.db, id, refreshed)
        .await
        .unwrap();
    // The commit was made, but its answer lost: written again a while
    // later, over the row that already holds these tokens.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again =
        db::connections::store_refreshed_if_current(&app.db, id, b"sealed-first", refreshed)
            .await
            .unwrap()
            .expect("the row holds these tokens: written");
    assert_eq!(again.access_token_expires_at, first.access_token_expires_at);
    assert_eq!(again.tokens_stored_at, first.tokens_stored_at);
    assert!(again.read_at > first.read_at);
    // Written over the first tokens, a second try counts from the answer.
    let mut conn = app.db.acquire().await.unwrap();
    sqlx::query("UPDATE connections SET access_token = 'sealed-first'")
        .execute(&mut *conn)
        .await
        .unwrap();
    let late = db::connections::store_refreshed_if_current(&app.db, id, b"sealed-first", refreshed)
        .await
        .unwrap()
        .expect("the row is as read: written");
    let left = (late.access_token_expires_at.unwrap() - late.tokens_stored_at).num_milliseconds();
    assert!((3_597_000..=3_599_000).contains(&left), "{left} ms");
}
