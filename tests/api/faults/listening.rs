//! The instance's `LISTEN` for stored connections (`connect::events`)
//! across a lost connection: waiters are told to look again, and a
//! connection that died without a word is noticed and replaced.

use std::time::Duration;

use mcp_connect::connect::events::{self, RECHECK};
use tokio::sync::broadcast;

use super::relay::Relay;
use crate::helpers::{server_url, spawn_app, spawn_app_on};

/// Waits until the app's listening connection is up (it starts in the
/// background) and returns how many there are.
async fn listening(db: &sqlx::PgPool) -> i64 {
    for _ in 0..50 {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_one(db)
        .await
        .unwrap();
        if n > 0 {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    0
}

/// The next wake-up, within `limit`.
async fn next(rx: &mut broadcast::Receiver<String>, limit: Duration) -> Option<String> {
    tokio::time::timeout(limit, rx.recv()).await.ok()?.ok()
}

#[tokio::test]
async fn waiters_look_again_after_the_listening_connection_was_lost() {
    let app = spawn_app().await;
    let mut rx = app.state.connect.events().subscribe();
    assert_eq!(listening(&app.db).await, 1, "one listening connection");
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await.as_deref(),
        Some(RECHECK)
    );
    // And it listens again.
    let alice = mcp_connect::domain::UserRef::new("https://idp.example", "alice");
    events::notify(&app.db, &app.state.keys, alice, "demo")
        .await
        .unwrap();
    let sent = events::tags(&app.state.keys, alice, "demo").join(",");
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await.as_deref(),
        Some(sent.as_str())
    );
}

#[tokio::test]
async fn a_listening_connection_gone_silent_is_replaced() {
    let relay = Relay::to_test_server().await;
    let app = spawn_app_on(&relay.url(), |_| {}).await;
    let mut rx = app.state.connect.events().subscribe();
    let direct = sqlx::PgPool::connect(&format!("{}/{}", server_url(), app.db_name))
        .await
        .unwrap();
    assert_eq!(listening(&direct).await, 1, "one listening connection");
    relay.silence_open_connections();
    // Noticed at the next check of an idle listener (15 s, its answer
    // awaited 5 s), then replaced over a new connection.
    assert_eq!(
        next(&mut rx, Duration::from_secs(40)).await.as_deref(),
        Some(RECHECK)
    );
    let alice = mcp_connect::domain::UserRef::new("https://idp.example", "alice");
    events::notify(&direct, &app.state.keys, alice, "demo")
        .await
        .unwrap();
    let sent = events::tags(&app.state.keys, alice, "demo").join(",");
    assert_eq!(
        next(&mut rx, Duration::from_secs(10)).await.as_deref(),
        Some(sent.as_str())
    );
    // The app's own clean-up would go through the relay, gone with this
    // test: its database is dropped here, directly.
    let name = app.db_name.clone();
    drop(app);
    direct.close().await;
    crate::helpers::drop_database(&name).await;
}
