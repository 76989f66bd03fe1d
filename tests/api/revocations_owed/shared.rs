//! Two people here who connected the same account at a provider whose
//! revocation may end the whole grant (Google: one grant per account and
//! client, a shared mailbox's): one person's disconnect forgets their
//! tokens here and leaves the grant live at the provider, since revoking
//! would end the other's connection too; once nobody else holds it, a
//! disconnect revokes as always.

use provider_fakes as fakes;
use serde_json::json;

use super::{Revocation, audited, connect_account, disconnect, live, make_due, owed, vault};
use crate::{helpers::TestApp, key_connect, provider_flows::app_with, provider_flows::connect_as};

/// How many `revocation_abandoned` rows give `reason`.
async fn given_up_for(app: &TestApp, reason: &str) -> usize {
    let rows = audited(app, "revocation_abandoned").await;
    rows.iter().filter(|d| d["reason"] == reason).count()
}

/// Through the tool, as a client would: alice and bob both connected the
/// fake's one Google account in the browser. Alice's disconnect says the
/// access was kept for someone else, calls nothing at Google, and leaves
/// bob's connection working; bob's own disconnect then revokes it.
#[tokio::test]
async fn a_disconnect_spares_the_grant_of_an_account_someone_else_connected() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect_as(&app, &fake, "google", "alice").await;
    connect_as(&app, &fake, "google", "bob").await;

    let gone = key_connect::disconnect(&app, "google").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "shared", "{gone}");
    assert!(result.get("error").is_none(), "{gone}");
    let said = gone["result"]["content"][1]["text"].as_str().unwrap();
    assert!(said.contains("another person using this server"), "{said}");
    assert_eq!(fake.calls().revoke, 0, "Google was not asked");
    assert_eq!(owed(&app).await, 0);
    assert_eq!(given_up_for(&app, "account_shared").await, 1);
    let (_, bobs) = app
        .call_tool("bob", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(bobs["result"]["resultType"], "complete", "{bobs}");
    assert!(bobs["result"]["isError"] != true, "{bobs}");

    assert_eq!(disconnect(&app, "bob").await, Revocation::Revoked);
    assert!(
        fake.calls().revoke >= 1,
        "the last holder's disconnect revokes"
    );
    assert_eq!(audited(&app, "revoked_upstream").await.len(), 1);
}

/// A revocation still owed (Google was down at the disconnect) is given
/// up, not tried, once someone else connects the same account: revoking
/// it now would end their connection.
#[tokio::test]
async fn a_revocation_owed_is_spared_once_someone_else_connects_the_account() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect_account(&app, &fake, "alice", "shared-id").await;
    fake.fail_at("/revoke", Some(503));
    assert_eq!(disconnect(&app, "alice").await, Revocation::Retrying);
    fake.fail_at("/revoke", None);
    let (_, bobs) = connect_account(&app, &fake, "bob", "shared-id").await;
    let revokes = fake.calls().revoke;
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert_eq!(owed(&app).await, 0);
    assert_eq!(fake.calls().revoke, revokes, "not tried");
    assert!(live(&fake, &bobs).await);
    assert_eq!(given_up_for(&app, "account_shared").await, 1);
}

/// Another person's connection of a *different* account spares nothing.
#[tokio::test]
async fn another_persons_other_account_spares_nothing() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (_, alices) = connect_account(&app, &fake, "alice", "alice-id").await;
    connect_account(&app, &fake, "bob", "bob-id").await;
    assert_eq!(disconnect(&app, "alice").await, Revocation::Revoked);
    assert!(!live(&fake, &alices).await);
}

/// The connections page says why the access was left live at Google.
#[tokio::test]
async fn the_connections_page_says_a_shared_account_was_left_live() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (id, alices) = connect_account(&app, &fake, "alice", "shared-id").await;
    connect_account(&app, &fake, "bob", "shared-id").await;
    let page = super::disconnect_on_the_page(&app, id, "shared").await;
    assert!(page.contains("Google disconnected."), "{page}");
    assert!(
        page.contains("was not revoked at Google: the same account is also connected here"),
        "{page}"
    );
    assert!(live(&fake, &alices).await, "left live, as said");
}

/// `users remove` counts the connection it left live for someone else,
/// and its `user_removed` row says so.
#[tokio::test]
async fn removing_a_person_counts_the_shared_account_left_live() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (_, alices) = connect_account(&app, &fake, "alice", "shared-id").await;
    connect_account(&app, &fake, "bob", "shared-id").await;
    let issuer = app.dev.issuer();
    let alice = mcp_connect::domain::UserRef::new(&issuer, "alice");
    let removed = mcp_connect::connect::users::remove(&app.state.connect, alice)
        .await
        .unwrap();
    assert_eq!(
        (removed.connections, removed.revoked),
        (1, 0),
        "{removed:?}"
    );
    assert_eq!((removed.shared, removed.not_revoked), (1, 0), "{removed:?}");
    assert_eq!(fake.calls().revoke, 0);
    assert!(live(&fake, &alices).await);
    let row = audited(&app, "user_removed").await;
    assert_eq!(row[0]["kept_for_shared_accounts"], 1, "{row:?}");
}

/// Tokens a connect does not store (the person is at the limit of
/// accounts) of an account someone else here connected are left live, and
/// the page says so rather than asking the person to remove the access at
/// the provider, which would end the other's connection.
#[tokio::test]
async fn tokens_a_connect_did_not_store_are_kept_for_the_account_someone_else_holds() {
    let fake = fakes::google::start().await;
    let (app, browser, to_provider) =
        super::unused::alice_at_the_limit_with_a_second_link(&fake).await;
    // Bob connects the shared mailbox; alice's second link reaches it too.
    fake.set_account("2049", "shared@example.com");
    connect_as(&app, &fake, "google", "bob").await;
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let refused = browser.get(callback.as_str()).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    let page = crate::browser::unescape(&refused.body);
    assert!(page.contains("left in place at Google"), "{page}");
    assert!(!page.contains("remove it in your account"), "{page}");
    assert_eq!(fake.calls().revoke, 0);
    assert_eq!(given_up_for(&app, "account_shared").await, 1);
    let limit = audited(&app, "account_limit_reached").await;
    assert_eq!(limit[0]["revoked"], false, "{limit:?}");
    assert_eq!(limit[0]["kept_for_connection"], true, "{limit:?}");
    let (_, bobs) = app
        .call_tool("bob", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(bobs["result"]["resultType"], "complete", "{bobs}");
}

/// A connection the provider refused (waiting to be connected again)
/// holds nothing worth sparing: the disconnect of the other revokes.
#[tokio::test]
async fn a_refused_connection_of_the_account_spares_nothing() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (_, alices) = connect_account(&app, &fake, "alice", "shared-id").await;
    connect_account(&app, &fake, "bob", "shared-id").await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth' WHERE subject = 'bob'")
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(disconnect(&app, "alice").await, Revocation::Revoked);
    assert!(!live(&fake, &alices).await);
}

/// A retry that cannot read whether someone holds the account (the table
/// locked past the lock timeout) sends nothing and stays owed; once it
/// can, it spares the grant.
#[tokio::test]
async fn a_retry_that_cannot_check_the_holders_waits() {
    let fake = fakes::google::start().await;
    let app = crate::helpers::spawn_app_with(|t| {
        fake.configure(t, "google");
        let mut database = toml::Table::new();
        database.insert("lock_timeout_ms".into(), 200.into());
        t.insert("database".into(), toml::Value::Table(database));
    })
    .await;
    connect_account(&app, &fake, "alice", "shared-id").await;
    fake.fail_at("/revoke", Some(503));
    assert_eq!(disconnect(&app, "alice").await, Revocation::Retrying);
    fake.fail_at("/revoke", None);
    connect_account(&app, &fake, "bob", "shared-id").await;
    let revokes = fake.calls().revoke;

    let mut locked = app.db.begin().await.unwrap();
    sqlx::query("LOCK TABLE connections IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locked)
        .await
        .unwrap();
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    locked.rollback().await.unwrap();
    assert_eq!(fake.calls().revoke, revokes, "nothing sent");
    assert_eq!(owed(&app).await, 1, "still owed");
    assert_eq!(audited(&app, "revocation_abandoned").await.len(), 0);

    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert_eq!(fake.calls().revoke, revokes);
    assert_eq!(owed(&app).await, 0);
    assert_eq!(given_up_for(&app, "account_shared").await, 1);
}
