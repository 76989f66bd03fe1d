//! An oversubscribed Postgres: when a per-thread connection cannot be
//! opened, the request is served by the pool instead of failing.

use serde_json::json;
use sqlx::{Connection, PgConnection};

use super::{OwnPostgres, connect};
use crate::helpers::spawn_app_on;

#[tokio::test]
async fn requests_fall_back_to_the_pool_when_no_new_connection_can_be_opened() {
    // Room for both instances' set-up (each also holds a LISTEN connection
    // outside its pool, and a loaded machine opens more of the rest); the
    // hogs below take whatever is left, however much that is.
    let pg = OwnPostgres::start(&["max_connections = 40"]);
    let app = spawn_app_on(&pg.url(), |t| {
        t.insert("database_max_connections".into(), 8.into());
        patient(t);
    })
    .await;
    // Connected through another instance of the deployment, so this one
    // has opened no per-thread connection yet (the demo provider, served
    // here, still knows the token).
    {
        // Four connections, not two: with two (one pooled, one for the hot
        // path) the flow's pages sometimes waited past the database
        // deadline on a loaded machine and answered 503.
        let other = app
            .second_instance_with(|t| {
                t.insert("database_max_connections".into(), 4.into());
                patient(t);
            })
            .await;
        connect(&other, "alice").await;
    }
    // Warm the pool: a few of its connections open and idle.
    for _ in 0..3 {
        let r = app
            .http
            .get(format!("{}/readyz", app.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // Someone else takes every connection left.
    let url = format!("{}/{}", pg.url(), app.db_name);
    let mut hogs = Vec::new();
    while let Ok(Ok(conn)) = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        PgConnection::connect(&url),
    )
    .await
    {
        hogs.push(conn);
        assert!(hogs.len() < 40, "max_connections is not in effect");
    }
    assert!(!hogs.is_empty());
    assert_eq!(
        app.state.connect.hot_connections_open(),
        0,
        "no per-thread connection yet"
    );
    for _ in 0..8 {
        let (status, body) = app
            .call_tool("alice", "connect", json!({"provider": "demo"}))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["resultType"], "complete", "{body}");
    }
    drop(hogs);
}

/// Database waits far longer than the defaults: on a machine loaded by
/// parallel tests, a flow's step waiting for one of so few connections
/// must not turn into a 503, which is not what this test is about.
fn patient(t: &mut toml::Table) {
    let mut database = toml::Table::new();
    database.insert("statement_timeout_ms".into(), 20_000.into());
    database.insert("connect_timeout_secs".into(), 20.into());
    t.insert("database".into(), toml::Value::Table(database));
}
