//! Liveness and readiness.

use crate::helpers::{server_url, spawn_app};
use mcp_connect::domain::{ProviderName, UserRef};
use sqlx::{Connection, PgConnection};

#[tokio::test]
async fn healthz_and_readyz_are_ok_when_the_database_is() {
    let app = spawn_app().await;
    let r = app
        .http
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn readyz_flips_to_503_when_the_database_goes_away() {
    let app = spawn_app().await;
    let mut conn = PgConnection::connect(&format!("{}/postgres", server_url()))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{}\" WITH (FORCE)",
        app.db_name
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let r = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    // Liveness does not depend on the database.
    let r = app
        .http
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn the_sweeper_deletes_what_expired_long_ago_and_runs_on_one_instance_at_a_time() {
    let app = spawn_app().await;
    for (age, secret) in [("2 hours", "old"), ("1 minute", "recent")] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, expires_at)
             VALUES ($1, $2, 'i', 's', 'c', 'demo', now() - interval '{age}')"
        )))
        .bind(uuid::Uuid::new_v4())
        .bind(secret.as_bytes())
        .execute(&app.db)
        .await
        .unwrap();
    }
    // Another instance holding the lock: this one stands aside.
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(7882267328089908592)")
        .execute(&mut *holder)
        .await
        .unwrap();
    assert_eq!(
        mcp_connect::sweeper::sweep_once(&app.db, app.state.settings.audit.retention())
            .await
            .unwrap(),
        None
    );
    holder.rollback().await.unwrap();

    assert_eq!(
        mcp_connect::sweeper::sweep_once(&app.db, app.state.settings.audit.retention())
            .await
            .unwrap(),
        Some(1)
    );
    let left: Vec<Vec<u8>> = sqlx::query_scalar("SELECT ticket_hash FROM connect_tickets")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(
        left,
        vec![b"recent".to_vec()],
        "only the long-expired one goes"
    );
}

#[tokio::test]
async fn readyz_is_503_while_a_migration_is_missing() {
    let app = spawn_app().await;
    sqlx::query(
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let r = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
}

/// The documented minimum: two connections, and the LISTEN connection
/// comes on top, so the pool keeps its own.
#[tokio::test]
async fn two_database_connections_are_enough_to_serve() {
    use mcp_connect::{
        connect::vault::{NewConnection, store_connection},
        providers::{Account, TokenSet},
    };
    let app = crate::helpers::spawn_app_with(|t| {
        t.insert("database_max_connections".into(), 2.into());
    })
    .await;
    // Give the listener time to take its connection.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let ready = app
        .http
        .get(format!("{}/readyz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let first = app
        .call_tool("alice", "whoami", serde_json::json!({"provider": "demo"}))
        .await;
    assert_eq!(
        first.1["result"]["resultType"], "input_required",
        "{}",
        first.1
    );
    let tokens = TokenSet {
        access_token: secrecy::SecretString::from("alice-access".to_owned()),
        received: std::time::Instant::now(),
        refresh_token: None,
        expires_in: Some(std::time::Duration::from_secs(3600)),
        scopes: Some(vec!["profile".to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        store_connection(
            &app.state.connect,
            NewConnection {
                user: UserRef::new(&app.dev.issuer(), "alice"),
                provider: &ProviderName::parse("demo").unwrap(),
                account: &Account {
                    id: "1".into(),
                    label: "alice".into(),
                },
                tokens: &tokens,
                requested_scopes: &[],
                client_id: Some("test-client"),
            },
        ),
    )
    .await
    .expect("a transaction gets a connection")
    .unwrap();
    let (status, body) = app
        .call_tool("alice", "whoami", serde_json::json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
}

/// While the instance drains (a stop signal received, requests under way
/// still answered), `/readyz` says so: a load balancer asking on a
/// kept-alive connection sends nothing new here.
#[tokio::test]
async fn readyz_is_503_while_draining() {
    let app = crate::helpers::spawn_app().await;
    let ready = app
        .http
        .get(format!("{}/readyz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    app.state.begin_shutdown();
    let draining = app
        .http
        .get(format!("{}/readyz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(draining.status(), 503);
    let body: serde_json::Value = draining.json().await.unwrap();
    assert_eq!(body["status"], "stopping");
}
