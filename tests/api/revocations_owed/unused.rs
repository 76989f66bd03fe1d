//! (f) Tokens a connect was issued and does not store (here: an account
//! past `flow.accounts_per_provider`) are owed their revocation as a
//! disconnect's are: a provider failing it now has it ended by a sweep.

use provider_fakes as fakes;
use serde_json::json;

use super::{audited, connect, live, make_due, owed};
use crate::{
    browser::{Browser, Page},
    full_flow::{elicit, open_and_continue},
    helpers::{TestApp, spawn_app_with},
};

/// An app where a person may connect one account at Google, and alice's
/// first account stored through one of two links opened before either was
/// (at the limit, another account is refused before its link): the
/// browser of the second, sent to Google for another account.
pub(super) async fn alice_at_the_limit_with_a_second_link(
    fake: &fakes::FakeProvider,
) -> (TestApp, Browser, Page) {
    let app = spawn_app_with(|t| {
        fake.configure(t, "google");
        let mut flow = toml::Table::new();
        flow.insert("accounts_per_provider".into(), 1.into());
        t.insert("flow".into(), toml::Value::Table(flow));
    })
    .await;
    let to_google = |args: serde_json::Value| {
        let app = &app;
        async move {
            let (url, _) = elicit(app, "alice", "connect", args, "connect_google").await;
            let browser = Browser::new(app);
            let to_provider = open_and_continue(&browser, &url, "alice").await;
            (browser, to_provider)
        }
    };
    let (first, to_first) = to_google(json!({"provider": "google"})).await;
    let another = json!({"provider": "google", "another_account": true});
    let (browser, to_provider) = to_google(another).await;
    let callback = fake.visit(to_first.location.as_deref().unwrap()).await;
    let stored = first.get(callback.as_str()).await;
    assert_eq!(stored.status, 200, "{}", stored.body);
    (app, browser, to_provider)
}

/// The revocation owed for tokens a connect did not store, made due and
/// tried by a sweep: the grant of `refresh` ends at Google, nothing is
/// owed any more, and the one `revoked_upstream` row (returned) says so.
async fn a_sweep_ends_the_grant(
    app: &TestApp,
    fake: &fakes::FakeProvider,
    refresh: &str,
) -> serde_json::Value {
    make_due(app).await;
    let tried = mcp_connect::connect::vault::retry_due(&app.state.connect).await;
    assert_eq!(tried.unwrap(), 1);
    assert!(!live(fake, refresh).await, "the grant has ended at Google");
    assert_eq!(owed(app).await, 0);
    let revoked = audited(app, "revoked_upstream").await;
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0]["origin"], "not_stored", "{revoked:?}");
    revoked[0].clone()
}

#[tokio::test]
async fn tokens_a_connect_did_not_store_are_revoked_by_a_later_sweep() {
    let fake = fakes::google::start().await;
    let (app, browser, to_provider) = alice_at_the_limit_with_a_second_link(&fake).await;
    fake.set_account("2049", "other@example.com");
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    fake.fail_at("/revoke", Some(503));
    let refused = browser.get(callback.as_str()).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused.body.contains("could not revoke the access"),
        "{}",
        refused.body
    );
    let refresh = fake.refresh_tokens().pop().unwrap();
    assert!(live(&fake, &refresh).await);
    let (origin, account): (String, Option<String>) =
        sqlx::query_as("SELECT origin, account_id FROM pending_revocations")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(origin, "not_stored");
    assert!(account.is_some_and(|a| a.contains("2049")));

    fake.fail_at("/revoke", None);
    let revoked = a_sweep_ends_the_grant(&app, &fake, &refresh).await;
    assert_eq!(revoked["attempts"], 2, "{revoked:?}");
}

/// Tokens of a connect whose account could not be read are owed with no
/// account. A retry then takes only a connection made since the row for
/// one that may share their grant (at Google, revoking one token may end
/// the whole grant): a connection older than the failed connect, even
/// refreshed since, does not stop it; one made after it does.
#[tokio::test]
async fn tokens_of_an_unread_account_are_spared_only_for_a_connection_made_since() {
    let fake = fakes::google::start().await;
    let app = crate::provider_flows::app_with(&fake, "google").await;
    let (older, _) = connect(&app, &fake, "alice").await;

    let unread = || connect_whose_account_is_not_read(&app, &fake);
    let first = unread().await;
    let account: Option<String> = sqlx::query_scalar("SELECT account_id FROM pending_revocations")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(account, None, "the account was never read");
    // The older connection, refreshed after the failed connect: still older.
    sqlx::query("UPDATE connections SET updated_at = now() + interval '1 second' WHERE id = $1")
        .bind(older)
        .execute(&app.db)
        .await
        .unwrap();
    make_due(&app).await;
    let tried = mcp_connect::connect::vault::retry_due(&app.state.connect).await;
    assert_eq!(tried.unwrap(), 1);
    assert!(!live(&fake, &first).await, "revoked: nothing made since");
    assert_eq!(owed(&app).await, 0);

    let second = unread().await;
    // Connected after it (the older one gone first: `connect` stores one
    // account per person).
    sqlx::query("DELETE FROM connections")
        .execute(&app.db)
        .await
        .unwrap();
    let (_, newest) = connect(&app, &fake, "alice").await;
    make_due(&app).await;
    let tried = mcp_connect::connect::vault::retry_due(&app.state.connect).await;
    assert_eq!(tried.unwrap(), 1);
    assert!(
        live(&fake, &second).await,
        "spared: a connection made since"
    );
    assert!(live(&fake, &newest).await);
    let abandoned = audited(&app, "revocation_abandoned").await;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["reason"], "connected_again", "{abandoned:?}");
    assert_eq!(abandoned[0]["account_id"], serde_json::Value::Null);
}

/// A second connect of alice's at Google whose account lookup fails, and
/// so does the revocation of what it was issued: owed with no account.
/// The refresh token it was issued.
async fn connect_whose_account_is_not_read(app: &TestApp, fake: &fakes::FakeProvider) -> String {
    let args = json!({"provider": "google", "another_account": true});
    let (url, _) = elicit(app, "alice", "connect", args, "connect_google").await;
    let browser = Browser::new(app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    fake.fail_at("/v1/userinfo", Some(503));
    fake.fail_at("/revoke", Some(503));
    let failed = browser.get(callback.as_str()).await;
    assert_ne!(failed.status, 200, "{}", failed.body);
    fake.fail_at("/v1/userinfo", None);
    fake.fail_at("/revoke", None);
    fake.refresh_tokens().pop().unwrap()
}

/// A reconnect stores the new authorization's tokens into the row the
/// person already had (same account): a connection made since as much as
/// a new row, though the row is older than the failed connect.
#[tokio::test]
async fn tokens_of_an_unread_account_are_spared_for_a_reconnect_into_the_old_row() {
    let fake = fakes::google::start().await;
    let app = crate::provider_flows::app_with(&fake, "google").await;
    let (older, _) = connect(&app, &fake, "alice").await;
    let unread = connect_whose_account_is_not_read(&app, &fake).await;
    let (again, newest) = connect(&app, &fake, "alice").await;
    assert_eq!(again, older, "stored into the row she had");
    make_due(&app).await;
    let tried = mcp_connect::connect::vault::retry_due(&app.state.connect).await;
    assert_eq!(tried.unwrap(), 1);
    assert!(live(&fake, &unread).await, "spared: connected again since");
    assert!(live(&fake, &newest).await);
    let abandoned = audited(&app, "revocation_abandoned").await;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["reason"], "connected_again", "{abandoned:?}");
}

/// The store's commit fails (here refused at commit time by a deferred
/// trigger; in production a connection lost while committing, when
/// nobody here can tell whether it landed). The tokens were owed their
/// revocation before the store began and the owed row went with the
/// store's transaction: it is still there, and a sweep once due ends the
/// grant. A connect that commits leaves nothing owed.
#[tokio::test]
async fn tokens_whose_store_did_not_commit_are_revoked_by_a_later_sweep() {
    let fake = fakes::google::start().await;
    let app = crate::provider_flows::app_with(&fake, "google").await;
    let through_the_browser = || async {
        let args = json!({"provider": "google", "another_account": true});
        let (url, _) = elicit(&app, "alice", "connect", args, "connect_google").await;
        let browser = Browser::new(&app);
        let to_provider = open_and_continue(&browser, &url, "alice").await;
        let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
        browser.get(callback.as_str()).await
    };
    let stored = through_the_browser().await;
    assert_eq!(stored.status, 200, "{}", stored.body);
    assert_eq!(owed(&app).await, 0, "stored: nothing owed");

    for statement in [
        "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$",
        "CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON connections
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit()",
    ] {
        sqlx::query(statement).execute(&app.db).await.unwrap();
    }
    fake.set_account("2050", "second@example.com");
    let failed = through_the_browser().await;
    assert_ne!(failed.status, 200, "{}", failed.body);
    let refresh = fake.refresh_tokens().pop().unwrap();
    assert!(live(&fake, &refresh).await, "not revoked at once");
    let (origin, due_in): (String, f64) = sqlx::query_as(
        "SELECT origin, extract(epoch FROM next_attempt_at - now())::float8 FROM pending_revocations",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(origin, "not_stored");
    assert!(due_in > 300.0, "a grace longer than any store: {due_in}");
    let accounts: i64 = sqlx::query_scalar("SELECT count(*) FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(accounts, 1, "the second account was not stored");

    sqlx::query("DROP TRIGGER refuse_at_commit ON connections")
        .execute(&app.db)
        .await
        .unwrap();
    a_sweep_ends_the_grant(&app, &fake, &refresh).await;
}
