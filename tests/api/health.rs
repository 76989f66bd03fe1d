//! Liveness and readiness.

use crate::helpers::{server_url, spawn_app};
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
    sqlx::query(&format!("DROP DATABASE \"{}\" WITH (FORCE)", app.db_name))
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
        sqlx::query(&format!(
            "INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, expires_at)
             VALUES ($1, $2, 'i', 's', 'c', 'demo', now() - interval '{age}')"
        ))
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
        mcp_connect::sweeper::sweep_once(&app.db).await.unwrap(),
        None
    );
    holder.rollback().await.unwrap();

    assert_eq!(
        mcp_connect::sweeper::sweep_once(&app.db).await.unwrap(),
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
