//! A disconnect against a database that freezes while the row is
//! deleted: the call answers within its deadlines, and nothing is lost.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{OwnPostgres, connect};
use crate::helpers::spawn_app_on;

/// The confirmed disconnect waits for the row another transaction holds
/// (as a refresh under way would), and the database freezes during the
/// wait: a frozen Postgres runs neither its lock timeout nor anything
/// else, so only this side's deadline can end the call. It answers
/// retryable, the connection is still there, and disconnecting again
/// once the database is back works.
#[tokio::test]
async fn a_disconnect_waiting_for_its_row_answers_a_frozen_database_within_its_deadline() {
    let pg = OwnPostgres::start(&[]);
    let app = spawn_app_on(&pg.url(), |t| {
        let mut database = toml::Table::new();
        database.insert("statement_timeout_ms".into(), 1_000.into());
        t.insert("database".into(), toml::Value::Table(database));
    })
    .await;
    connect(&app, "alice").await;
    let args = json!({"provider": "demo"});
    let (_, asked) = app.call_tool("alice", "disconnect", args.clone()).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    let confirmed = json!({"name": "disconnect", "arguments": args, "requestState": state,
        "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": true}}}});

    // As a refresh holds it: the refresh claim's foreign key check (a
    // key share) passes, the disconnect's row lock waits.
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections FOR NO KEY UPDATE")
        .fetch_all(&mut *holder)
        .await
        .unwrap();
    let started = Instant::now();
    let freezing = async {
        // The disconnect has read the account and waits for the row.
        tokio::time::sleep(Duration::from_secs(2)).await;
        pg.freeze();
    };
    // Longer than the test client's usual 30 s, so that only the
    // server's deadline can end the call.
    let calling = async {
        let body = crate::helpers::request("tools/call", confirmed.clone());
        let sent = app
            .mcp_request(Some(&app.token("alice")), &body)
            .timeout(Duration::from_secs(90))
            .send()
            .await
            .expect("answered");
        crate::helpers::read(sent).await
    };
    let (answer, ()) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(60), calling),
        freezing
    );
    let took = started.elapsed();
    pg.thaw();
    let (status, body) = answer.expect("the call ends while the database stays frozen");
    // Twenty seconds of waiting for a refresh's row, two of deadline, two
    // for the claim's release.
    assert!(took < Duration::from_secs(35), "{took:?}");
    assert_eq!(status, 503, "retryable: {body}");
    holder.rollback().await.unwrap();
    // The refresh claim the disconnect took could not be released while
    // the database was frozen: it ends by itself when it expires (a
    // minute here), which this test does not wait for.
    sqlx::query("DELETE FROM refresh_claims")
        .execute(&app.db)
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 1, "the delete was cut off before its commit");

    // Asked again once the database answers: disconnected.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = app.mcp("alice", "tools/call", confirmed.clone()).await;
        if status == 200 {
            assert_eq!(
                body["result"]["structuredContent"]["revocation"], "revoked",
                "{body}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never settled: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 0);
}
