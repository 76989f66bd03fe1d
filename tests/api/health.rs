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
