//! The one read of a connected tool call (`db::call_accounts`): the user's
//! connections to the provider in the order the single-row lookup picks
//! them, each with the calling client's grant and no one else's.

use chrono::{Duration, Utc};
use mcp_connect::db::{self, connections::StoredTokens};
use mcp_connect::domain::{ProviderName, UserRef};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{plan_of_prepared, spawn_app};

const ISSUER: &str = "https://issuer.example";

/// A connection of `subject` to `demo`, created `age_minutes` ago; an empty
/// `account_id` leaves it a placeholder (claimed, never stored).
async fn connection(db: &PgPool, subject: &str, account_id: &str, age_minutes: i64) -> Uuid {
    let mut conn = db.acquire().await.unwrap();
    let id = db::connections::claim_id(
        &mut conn,
        UserRef::new(ISSUER, subject),
        &ProviderName::parse("demo").unwrap(),
        account_id,
    )
    .await
    .unwrap();
    if !account_id.is_empty() {
        let tokens = StoredTokens {
            account_id,
            account_label: account_id,
            scopes: &[],
            access_token: b"sealed",
            refresh_token: None,
            key_id: "k",
            expires_in: None,
        };
        db::connections::store(&mut *conn, id, tokens)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE connections SET created_at = $2 WHERE id = $1")
        .bind(id)
        .bind(Utc::now() - Duration::minutes(age_minutes))
        .execute(&mut *conn)
        .await
        .unwrap();
    id
}

#[tokio::test]
async fn a_call_reads_the_users_accounts_in_lookup_order_with_the_callers_grants() {
    let app = spawn_app().await;
    let db = &app.db;
    // The placeholder is the oldest row, and still comes last.
    let placeholder = connection(db, "alice", "", 30).await;
    let work = connection(db, "alice", "work", 20).await;
    let personal = connection(db, "alice", "personal", 10).await;
    let bobs = connection(db, "bob", "bob", 40).await;
    for (id, client) in [
        (personal, "client-a"),
        (work, "client-b"),
        (bobs, "client-a"),
    ] {
        db::client_grants::insert(db, id, client).await.unwrap();
    }

    let (alice, demo) = (
        UserRef::new(ISSUER, "alice"),
        ProviderName::parse("demo").unwrap(),
    );
    let read = db::call_accounts::read(db, alice, &demo, "client-a")
        .await
        .unwrap();
    let ids: Vec<Uuid> = read.iter().map(|a| a.row.id).collect();
    assert_eq!(
        ids,
        [work, personal, placeholder],
        "bob's row is not alice's"
    );
    let granted: Vec<bool> = read.iter().map(|a| a.grant.is_some()).collect();
    assert_eq!(granted, [false, true, false], "only client-a's own grant");
    assert_eq!(read[0].row.access_token, b"sealed");

    let first = db::connections::find_account(db, alice, &demo, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.id, read[0].row.id, "the same row the lookup picks");

    let other = db::call_accounts::read(db, alice, &demo, "client-c")
        .await
        .unwrap();
    assert!(other.iter().all(|a| a.grant.is_none()));
    let carol = UserRef::new(ISSUER, "carol");
    let nobody = db::call_accounts::read(db, carol, &demo, "client-a")
        .await
        .unwrap();
    assert!(nobody.is_empty());
}

/// The read's plan on a small, analyzed database (a new deployment's): the
/// grant is probed per account row, never hashed. As a plain `LEFT JOIN`,
/// Postgres built a hash table of the user's rows and scanned every grant
/// on each call once `client_grants` was small and analyzed, ≈20 µs of its
/// CPU per call under load (bench/NOTES.md, "Seeded ÷ empty").
#[tokio::test]
async fn the_read_probes_the_grant_and_never_hashes_a_small_table() {
    let app = spawn_app().await;
    let db = &app.db;
    for i in 0..16 {
        let id = connection(db, &format!("user-{i}"), "acct", 1).await;
        db::client_grants::insert(db, id, "client-a").await.unwrap();
    }
    sqlx::query("ANALYZE connections, client_grants")
        .execute(db)
        .await
        .unwrap();

    // The statement as the read prepared it, on the same connection.
    let mut conn = db.acquire().await.unwrap();
    let (alice, demo) = (
        UserRef::new(ISSUER, "user-3"),
        ProviderName::parse("demo").unwrap(),
    );
    let read = db::call_accounts::read(&mut *conn, alice, &demo, "client-a")
        .await
        .unwrap();
    assert!(read[0].grant.is_some());
    let plan = plan_of_prepared(
        &mut conn,
        "%FROM connections c%client_grants g%",
        &format!("'{ISSUER}', 'user-3', 'demo', 'client-a'"),
    )
    .await;
    assert!(plan.contains("Nested Loop"), "{plan}");
    assert!(!plan.contains("Hash"), "the grant is hashed: {plan}");
}

/// A reconnect's claim of the row and a disconnect of the same account,
/// interleaved: the disconnect has locked the row (as it does before
/// deleting it) when the claim comes, and deletes it and commits while the
/// claim waits. The claim must then make a new row, not fail because the
/// row it saw is gone.
#[tokio::test]
async fn a_claim_waiting_on_a_disconnect_makes_a_new_row_when_the_old_one_is_deleted() {
    let app = spawn_app().await;
    let old = connection(&app.db, "alice", "work", 5).await;

    let mut disconnect = app.db.begin().await.unwrap();
    assert!(
        db::connections::find_for_update(&mut *disconnect, old)
            .await
            .unwrap()
            .is_some()
    );
    let db = app.db.clone();
    let claim = tokio::spawn(async move {
        let mut tx = db.begin().await.unwrap();
        let id = db::connections::claim_id(
            &mut tx,
            UserRef::new(ISSUER, "alice"),
            &ProviderName::parse("demo").unwrap(),
            "work",
        )
        .await;
        tx.commit().await.unwrap();
        id
    });
    crate::helpers::until_blocked(&app, 1).await;
    assert!(
        db::connections::delete(&mut *disconnect, old)
            .await
            .unwrap()
    );
    disconnect.commit().await.unwrap();

    let claimed = claim.await.unwrap().expect("the claim made a new row");
    assert_ne!(claimed, old);
    let status: String = sqlx::query_scalar("SELECT status::text FROM connections WHERE id = $1")
        .bind(claimed)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(
        status, "revoked",
        "a new claim is a placeholder until stored"
    );
}
