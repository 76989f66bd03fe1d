//! Connecting an account again: a provider that answers a repeated consent
//! without a refresh token leaves the stored one valid, so it is kept
//! (re-sealed by the current key); one the provider already refused is not
//! brought back.

use secrecy::ExposeSecret;

use crate::helpers::{TestApp, spawn_app, store_demo_connection};

async fn connect(app: &TestApp, access_token: &str, refresh_token: Option<&str>) {
    store_demo_connection(
        &app.state.connect,
        &app.dev.issuer(),
        "alice",
        access_token,
        refresh_token.map(str::to_owned),
    )
    .await;
}

async fn stored_key_id(app: &TestApp) -> String {
    sqlx::query_scalar("SELECT key_id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_reconnect_without_a_refresh_token_keeps_the_stored_one_under_the_current_key() {
    let app = spawn_app().await;
    connect(&app, "at-1", Some("rt-1")).await;
    assert_eq!(stored_key_id(&app).await, "dev1");

    // The ring rotated: "k2" seals, the old key still opens.
    let old = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let new = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let rotated = app
        .second_instance_with(|t| {
            t.insert(
                "keys".into(),
                toml::Value::Array(vec![new.into(), old.into()]),
            );
        })
        .await;
    connect(&rotated, "at-2", None).await;

    assert_eq!(
        stored_key_id(&app).await,
        "k2",
        "one key id for both tokens"
    );
    let token = rotated.demo_token("alice").await;
    assert_eq!(token.access_token.expose_secret(), "at-2");
    let kept = rotated.state.connect.refresh_token_of(&token).unwrap();
    assert_eq!(kept.as_ref().map(ExposeSecret::expose_secret), Some("rt-1"));
}

#[tokio::test]
async fn a_new_refresh_token_replaces_the_stored_one() {
    let app = spawn_app().await;
    connect(&app, "at-1", Some("rt-1")).await;
    connect(&app, "at-2", Some("rt-2")).await;
    let token = app.demo_token("alice").await;
    let stored = app.state.connect.refresh_token_of(&token).unwrap();
    assert_eq!(
        stored.as_ref().map(ExposeSecret::expose_secret),
        Some("rt-2")
    );
}

#[tokio::test]
async fn a_refresh_token_the_provider_refused_is_not_brought_back() {
    let app = spawn_app().await;
    connect(&app, "at-1", Some("rt-1")).await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth'")
        .execute(&app.db)
        .await
        .unwrap();
    connect(&app, "at-2", None).await;
    let has_refresh: bool = sqlx::query_scalar("SELECT refresh_token IS NOT NULL FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(!has_refresh);
    assert_eq!(
        app.demo_token("alice").await.access_token.expose_secret(),
        "at-2"
    );
}

#[tokio::test]
async fn a_stored_refresh_token_that_no_longer_opens_is_dropped_not_an_error() {
    let app = spawn_app().await;
    connect(&app, "at-1", Some("rt-1")).await;
    sqlx::query("UPDATE connections SET key_id = 'retired1'")
        .execute(&app.db)
        .await
        .unwrap();
    connect(&app, "at-2", None).await;
    let (key_id, has_refresh): (String, bool) =
        sqlx::query_as("SELECT key_id, refresh_token IS NOT NULL FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((key_id.as_str(), has_refresh), ("dev1", false));
}

/// A connection stored before account ids carried their site (`42`, now
/// `42@acme`) is renamed when the same account at the same site connects
/// again — and only then.
#[tokio::test]
async fn a_row_from_before_scoped_account_ids_is_adopted_only_for_its_own_site() {
    use mcp_connect::{
        db::{connections::adopt_unscoped, params::Params},
        domain::{ProviderName, UserRef},
    };
    let app = spawn_app().await;
    connect(&app, "at-1", Some("rt-1")).await;
    sqlx::query("UPDATE connections SET params = '{\"site\": \"acme\"}'")
        .execute(&app.db)
        .await
        .unwrap();
    let issuer = app.dev.issuer();
    let user = UserRef::new(&issuer, "alice");
    let demo = ProviderName::parse("demo").unwrap();
    let site = |s: &str| Params::from([("site".to_owned(), s.to_owned())]);
    let mut conn = app.db.acquire().await.unwrap();
    let (beta, acme) = (site("beta"), site("acme"));
    let other = adopt_unscoped(&mut conn, user, &demo, "id-alice", "id-alice@beta", &beta);
    assert!(!other.await.unwrap(), "another site is another account");
    let own = adopt_unscoped(&mut conn, user, &demo, "id-alice", "id-alice@acme", &acme);
    assert!(own.await.unwrap());
    let id: String = sqlx::query_scalar("SELECT account_id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(id, "id-alice@acme");
}

/// A connection the provider stopped accepting is connected again with
/// the scopes it had: the new grant does not quietly lose what the old one
/// allowed (the tools would then meet refusals instead of asking).
#[tokio::test]
async fn connecting_again_after_a_refusal_asks_for_the_scopes_the_connection_had() {
    let app = spawn_app().await;
    connect(&app, "at-1", Some("rt-1")).await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth', scopes = '{profile,email,repo}'")
        .execute(&app.db)
        .await
        .unwrap();
    let (_, body) = app
        .call_tool("alice", "whoami", serde_json::json!({"provider": "demo"}))
        .await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let scopes: Vec<String> = sqlx::query_scalar("SELECT scopes FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    for scope in ["profile", "email", "repo"] {
        assert!(scopes.iter().any(|s| s == scope), "{scope}: {scopes:?}");
    }
}
