//! Dev keys against a real Postgres (127.0.0.1:5432, user `postgres`): each
//! test makes its own database and drops it afterwards, even on failure.

use std::{panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::JwkSet};
use sqlx::{ConnectOptions, PgPool, postgres::PgConnectOptions};

use super::{AES_KEY_SECRET, DevError, DevServices, SIGNING_KEY_SECRET, dev_key_entry};
use crate::db;

const BASE: &str = "http://127.0.0.1:8080";

/// A database on the tests' Postgres server (`TEST_DATABASE_SERVER`, as
/// for the API tests; the local one by default).
fn options(name: &str) -> PgConnectOptions {
    let server = std::env::var("TEST_DATABASE_SERVER")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    server
        .parse::<PgConnectOptions>()
        .unwrap_or_else(|e| panic!("TEST_DATABASE_SERVER: {e}"))
        .database(name)
}

/// Runs `body` against a fresh migrated database, then drops it.
async fn with_database<F, Fut>(body: F)
where
    F: FnOnce(PgPool, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let name = format!("mcp_connect_dev_test_{}", uuid::Uuid::new_v4().simple());
    db::create_database_if_missing(&options(&name), db::ANSWER_WITHIN)
        .await
        .unwrap();
    let pool = db::pool(options(&name), 2);
    let outcome = AssertUnwindSafe(async {
        db::migrate(&pool, db::ANSWER_WITHIN).await.unwrap();
        body(pool.clone(), name.clone()).await;
    })
    .catch_unwind()
    .await;
    pool.close().await;
    let mut admin = options("postgres").connect().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn verify(
    token: &str,
    jwks: serde_json::Value,
) -> Result<serde_json::Value, jsonwebtoken::errors::Error> {
    let jwks: JwkSet = serde_json::from_value(jwks).unwrap();
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_audience(&[format!("{BASE}/mcp")]);
    let key = DecodingKey::from_jwk(&jwks.keys[0])?;
    jsonwebtoken::decode(token, &key, &validation).map(|d| d.claims)
}

#[tokio::test]
async fn keys_survive_a_restart_so_tokens_stay_valid() {
    with_database(|pool, _| async move {
        let first = DevServices::load_or_create(&pool, BASE).await.unwrap();
        let token = first
            .mint_access_token("alice", "cli", &[], Duration::from_secs(60))
            .unwrap();
        // A "restart": new services from the same database.
        let second = DevServices::load_or_create(&pool, BASE).await.unwrap();
        assert_eq!(first.signing_kid(), second.signing_kid());
        assert_eq!(verify(&token, second.jwks()).unwrap()["sub"], "alice");
        let loaded = DevServices::load(&pool, BASE).await.unwrap();
        assert_eq!(loaded.jwks(), first.jwks());
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM dev_secrets WHERE name = $1")
            .bind(SIGNING_KEY_SECRET)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(rows, 1);
    })
    .await;
}

#[tokio::test]
async fn aes_key_entry_is_generated_once_and_valid() {
    with_database(|pool, _| async move {
        let first = dev_key_entry(&pool).await.unwrap();
        assert_eq!(dev_key_entry(&pool).await.unwrap(), first);
        assert!(first.starts_with("dev1:"));
        assert!(crate::crypto::KeyRing::from_entries([first.as_str()]).is_ok());
        let stored = crate::db::dev_secrets::get(&pool, AES_KEY_SECRET)
            .await
            .unwrap();
        assert_eq!(stored.as_deref(), Some(first.as_str()));
    })
    .await;
}

#[tokio::test]
async fn token_command_needs_dev_mode_to_have_run() {
    with_database(|pool, name| async move {
        // Migrated but never started in dev mode: no key row.
        assert!(matches!(
            DevServices::load(&pool, BASE).await,
            Err(DevError::NotInitialised)
        ));
        // A database that does not exist at all.
        let missing = db::pool(options(&format!("{name}_missing")), 1);
        let err = DevServices::load(&missing, BASE).await.unwrap_err();
        assert!(matches!(err, DevError::NotInitialised), "{err}");
        assert!(err.to_string().contains("run `mcp-connect dev` once first"));
    })
    .await;
}

#[tokio::test]
async fn a_corrupt_stored_key_is_reported_not_replaced() {
    with_database(|pool, _| async move {
        crate::db::dev_secrets::get_or_insert(&pool, SIGNING_KEY_SECRET, "bm90IGEga2V5")
            .await
            .unwrap();
        let err = DevServices::load_or_create(&pool, BASE).await.unwrap_err();
        assert!(matches!(err, DevError::BadStoredKey(_)), "{err}");
    })
    .await;
}

#[tokio::test]
async fn a_first_start_racing_another_gets_the_value_the_other_stored() {
    with_database(|pool, _| async move {
        // The other start has inserted but not committed yet.
        let mut other = pool.begin().await.unwrap();
        sqlx::query("INSERT INTO dev_secrets (name, value) VALUES ('race', 'theirs')")
            .execute(&mut *other)
            .await
            .unwrap();
        let ours = tokio::spawn({
            let pool = pool.clone();
            async move { crate::db::dev_secrets::get_or_insert(&pool, "race", "ours").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        other.commit().await.unwrap();
        assert_eq!(ours.await.unwrap().unwrap(), "theirs");
    })
    .await;
}
