//! A disconnect's revocation outlives a provider that is down and an
//! instance that dies: it is written in the disconnect's transaction
//! (`pending_revocations`), tried at once, and tried again by the
//! sweepers, each row by one of them, until the provider ends the grant
//! or the retry window is over. Against the Google fake, whose `/revoke`
//! a test can fail or stall while its token endpoint answers.

mod keys;
mod shared;
mod unused;

use std::time::Duration;

use mcp_connect::{
    connect::vault::{self, NewConnection, Revocation, store_connection},
    domain::{ProviderName, UserRef},
    providers::{Account, TokenSet},
};
use provider_fakes::{self as fakes, FakeProvider};
use secrecy::SecretString;
use serde_json::Value;
use uuid::Uuid;

use crate::{
    helpers::{TestApp, count},
    provider_flows::app_with,
};

/// A live Google grant stored as `subject`'s connection: its id and
/// refresh token.
async fn connect(app: &TestApp, fake: &FakeProvider, subject: &str) -> (Uuid, String) {
    connect_account(app, fake, subject, &format!("{subject}-id")).await
}

/// [`connect`] of the Google account `account_id`.
async fn connect_account(
    app: &TestApp,
    fake: &FakeProvider,
    subject: &str,
    account_id: &str,
) -> (Uuid, String) {
    let (access, refresh) = fake.issue_grant("openid email", true);
    let refresh = refresh.unwrap();
    let tokens = TokenSet {
        access_token: SecretString::from(access),
        received: std::time::Instant::now(),
        refresh_token: Some(SecretString::from(refresh.clone())),
        expires_in: Some(Duration::from_secs(3600)),
        scopes: None,
        token_type: "Bearer".to_owned(),
    };
    let id = store_connection(
        &app.state.connect,
        NewConnection {
            user: UserRef::new(&app.dev.issuer(), subject),
            provider: &google(),
            account: &Account {
                id: account_id.to_owned(),
                label: subject.into(),
            },
            tokens: &tokens,
            requested_scopes: &[],
            client_id: Some("test-client"),
        },
    )
    .await
    .unwrap();
    (id, refresh)
}

fn google() -> ProviderName {
    ProviderName::parse("google").unwrap()
}

/// Disconnects `subject`'s Google account as the page and the tool do.
async fn disconnect(app: &TestApp, subject: &str) -> Revocation {
    let issuer = app.dev.issuer();
    app.state
        .connect
        .disconnect_account(UserRef::new(&issuer, subject), &google(), None)
        .await
        .unwrap()
        .expect("a connection to disconnect")
}

/// Whether the grant of `refresh` is still live at the fake.
async fn live(fake: &FakeProvider, refresh: &str) -> bool {
    match fake.refresh_status("/token", refresh).await.unwrap() {
        200 => true,
        400 => false,
        other => panic!("the token endpoint answered {other}"),
    }
}

/// Alice disconnects connection `id` on her connections page: the page
/// she lands on (unescaped), whose address said `revocation`.
async fn disconnect_on_the_page(app: &TestApp, id: Uuid, revocation: &str) -> String {
    let browser = crate::browser::Browser::new(app);
    browser.sign_in("alice").await;
    let confirm = browser
        .get(&format!("/connections/google/disconnect?connection={id}"))
        .await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    let done = browser
        .submit(&confirm, "/connections/google/disconnect", &[])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let location = done.location.clone().unwrap_or_default();
    assert!(
        location.contains(&format!("revocation={revocation}")),
        "{location}"
    );
    let page = browser.follow(&done).await;
    assert_eq!(page.status, 200, "{}", page.body);
    crate::browser::unescape(&page.body)
}

/// `subject`'s Google grant disconnected while Google's revocation
/// endpoint failed: the revocation is owed, and the endpoint answers
/// again. The grant's connection id and refresh token.
async fn owed_after_a_failed_try(
    app: &TestApp,
    fake: &FakeProvider,
    subject: &str,
) -> (Uuid, String) {
    let grant = connect(app, fake, subject).await;
    fake.fail_at("/revoke", Some(503));
    assert_eq!(disconnect(app, subject).await, Revocation::Retrying);
    fake.fail_at("/revoke", None);
    grant
}

/// Every revocation owed is due now.
async fn make_due(app: &TestApp) {
    sqlx::query("UPDATE pending_revocations SET next_attempt_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
}

async fn owed(app: &TestApp) -> i64 {
    count(app, "SELECT count(*) FROM pending_revocations").await
}

/// The details of the audit rows of `kind`, oldest first.
async fn audited(app: &TestApp, kind: &str) -> Vec<Value> {
    sqlx::query_scalar("SELECT detail FROM audit_events WHERE kind = $1 ORDER BY id")
        .bind(kind)
        .fetch_all(&app.db)
        .await
        .unwrap()
}

/// This instance's count of attempts at revocations, by how they ended
/// (revoked, retrying, abandoned), as `/metrics` shows them.
fn attempts_ended(app: &TestApp) -> [u64; 3] {
    use mcp_connect::metrics::RevocationAttempt::*;
    let m = &app.state.metrics.revocations;
    [m.count(Revoked), m.count(Retrying), m.count(Abandoned)]
}

/// (a) A revocation the provider keeps failing stays owed, its failures
/// counted and spaced out; once the provider answers, a sweep ends the
/// grant, deletes the row and audits it.
#[tokio::test]
async fn a_revocation_the_provider_keeps_failing_is_done_by_a_later_sweep() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (id, refresh) = connect(&app, &fake, "alice").await;
    fake.fail_at("/revoke", Some(503));
    assert_eq!(disconnect(&app, "alice").await, Revocation::Retrying);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    let (attempts, error, wait): (i32, String, f64) = sqlx::query_as(
        "SELECT attempts, last_error, extract(epoch FROM next_attempt_at - now())::float8
         FROM pending_revocations WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(attempts, 1);
    assert!(error.contains("503"), "{error}");
    assert!((50.0..=60.0).contains(&wait), "a minute's wait: {wait}");
    let failed = audited(&app, "revocation_failed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["retry_hours"], 72, "{failed:?}");
    let disconnected = crate::full_flow::disconnected_detail(&app).await;
    assert_eq!(disconnected["revocation"], "pending", "{disconnected}");
    assert_eq!(attempts_ended(&app), [0, 1, 0]);

    // Still failing: the sweep tries, and leaves it for later.
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    let attempts = "SELECT attempts::int8 FROM pending_revocations";
    assert_eq!(count(&app, attempts).await, 2);
    assert!(live(&fake, &refresh).await);
    assert_eq!(attempts_ended(&app), [0, 2, 0]);
    assert_eq!(app.state.metrics.revocations.owed(), 1, "the gauge");
    assert_eq!(
        vault::retry_due(&app.state.connect).await.unwrap(),
        0,
        "not due"
    );

    fake.fail_at("/revoke", None);
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert!(
        !live(&fake, &refresh).await,
        "the grant has ended at Google"
    );
    assert_eq!(owed(&app).await, 0);
    assert_eq!(attempts_ended(&app), [1, 2, 0]);
    assert_eq!(app.state.metrics.revocations.owed(), 0, "the gauge");
    let revoked = audited(&app, "revoked_upstream").await;
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0]["connection_id"], id.to_string(), "{revoked:?}");
    assert_eq!(revoked[0]["origin"], "disconnected", "{revoked:?}");
    assert_eq!(revoked[0]["attempts"], 3, "{revoked:?}");
    let all = sqlx::query_scalar::<_, Value>("SELECT detail FROM audit_events")
        .fetch_all(&app.db)
        .await
        .unwrap();
    for secret in fake.secrets() {
        for detail in &all {
            assert!(!detail.to_string().contains(&secret), "{detail}");
        }
    }
}

/// (b) An operator's `users remove` killed while the provider has not
/// answered the revocation, the connection already deleted: the
/// revocation and the `disconnected` row were committed with the delete,
/// and a sweep ends the grant.
#[tokio::test]
async fn a_disconnect_whose_process_dies_after_the_commit_is_revoked_by_a_sweep() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (_, refresh) = connect(&app, &fake, "alice").await;
    let config = std::env::temp_dir().join(format!("mcp-connect-{}.toml", Uuid::new_v4()));
    std::fs::write(&config, fake.settings_toml("google")).unwrap();
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    fake.stall(true);
    let mut remove = app
        .operator_command(&key)
        .args(["--config", config.to_str().unwrap()])
        .args(["users", "remove", "alice", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the delete is committed, its revocation unanswered.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count(&app, "SELECT count(*) FROM connections").await > 0 {
        assert!(std::time::Instant::now() < deadline, "never deleted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    remove.kill().unwrap();
    remove.wait().unwrap();
    std::fs::remove_file(&config).unwrap();
    fake.stall(false);
    assert!(live(&fake, &refresh).await, "the revocation never arrived");
    assert_eq!(owed(&app).await, 1);
    assert_eq!(audited(&app, "disconnected").await.len(), 1);

    // Not before its first try's grace is over: that instance may be alive.
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 0);
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert!(
        !live(&fake, &refresh).await,
        "the grant has ended at Google"
    );
    assert_eq!(owed(&app).await, 0);
    assert_eq!(audited(&app, "revoked_upstream").await.len(), 1);
}

/// (c) Past `revocation.retry_hours` a revocation is given up rather than
/// tried: the row deleted, an audit row saying why. One whose provider or
/// key an instance lacks is left to the others meanwhile.
#[tokio::test]
async fn a_revocation_is_given_up_after_the_window_and_left_to_instances_that_can_do_it() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (id, refresh) = owed_after_a_failed_try(&app, &fake, "alice").await;
    let revokes = fake.calls().revoke;
    sqlx::query(
        "UPDATE pending_revocations SET created_at = now() - interval '72 hours 1 minute',
             next_attempt_at = now()",
    )
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert_eq!(owed(&app).await, 0);
    assert_eq!(fake.calls().revoke, revokes, "not tried once more");
    assert!(live(&fake, &refresh).await);
    let abandoned = audited(&app, "revocation_abandoned").await;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["reason"], "retry_window_over", "{abandoned:?}");
    assert_eq!(abandoned[0]["connection_id"], id.to_string());
    assert_eq!(abandoned[0]["attempts"], 1, "{abandoned:?}");
    assert!(
        abandoned[0]["last_error"].as_str().unwrap().contains("503"),
        "{abandoned:?}"
    );

    // An instance without the key that sealed the tokens, or without
    // Google in its configuration, leaves the revocation to one that has
    // them (a rolling change of keys or configuration): a failed attempt,
    // not an end.
    fake.fail_at("/revoke", Some(503));
    let (_, refresh) = connect(&app, &fake, "bob").await;
    assert_eq!(disconnect(&app, "bob").await, Revocation::Retrying);
    fake.fail_at("/revoke", None);
    let revokes = fake.calls().revoke;
    let key: String = sqlx::query_scalar("SELECT key_id FROM pending_revocations")
        .fetch_one(&app.db)
        .await
        .unwrap();
    sqlx::query("UPDATE pending_revocations SET key_id = 'gone-key'")
        .execute(&app.db)
        .await
        .unwrap();
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    let without_google = app.second_instance().await;
    sqlx::query("UPDATE pending_revocations SET key_id = $1")
        .bind(&key)
        .execute(&app.db)
        .await
        .unwrap();
    make_due(&app).await;
    assert_eq!(
        vault::retry_due(&without_google.state.connect)
            .await
            .unwrap(),
        1
    );
    let (attempts, last_error): (i32, String) =
        sqlx::query_as("SELECT attempts, last_error FROM pending_revocations")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(attempts, 3, "the first try, then the two instances");
    assert!(last_error.contains("not configured"), "{last_error}");
    assert_eq!(fake.calls().revoke, revokes, "neither called Google");
    assert!(live(&fake, &refresh).await);
    assert_eq!(audited(&app, "revocation_abandoned").await.len(), 1);
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert_eq!(owed(&app).await, 0);
    assert!(
        !live(&fake, &refresh).await,
        "ended by the instance with both"
    );
}

/// A revocation still owed is given up, not tried, once the person has
/// connected the same account again: at Google, as at many providers, the
/// new tokens share the old ones' grant, and revoking the old would end
/// the connection that works.
#[tokio::test]
async fn a_revocation_owed_is_given_up_once_the_account_is_connected_again() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    owed_after_a_failed_try(&app, &fake, "alice").await;
    let (_, refresh) = connect(&app, &fake, "alice").await;
    let revokes = fake.calls().revoke;
    make_due(&app).await;
    assert_eq!(vault::retry_due(&app.state.connect).await.unwrap(), 1);
    assert_eq!(owed(&app).await, 0);
    assert_eq!(fake.calls().revoke, revokes, "not tried");
    assert!(live(&fake, &refresh).await, "the new connection's grant");
    let abandoned = audited(&app, "revocation_abandoned").await;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["reason"], "connected_again", "{abandoned:?}");
}

/// (e) Two instances sweeping at once each take their own rows: every
/// revocation owed is sent once per token, ended, and audited once.
#[tokio::test]
async fn two_sweepers_at_once_revoke_each_owed_revocation_once() {
    const PEOPLE: usize = 6;
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let other = app
        .second_instance_with(|t| fake.configure(t, "google"))
        .await;
    let mut grants = Vec::new();
    fake.fail_at("/revoke", Some(503));
    for n in 0..PEOPLE {
        let subject = format!("person-{n}");
        grants.push(connect(&app, &fake, &subject).await.1);
        assert_eq!(disconnect(&app, &subject).await, Revocation::Retrying);
    }
    fake.fail_at("/revoke", None);
    make_due(&app).await;
    let revokes = fake.calls().revoke;
    let (one, two) = tokio::join!(
        vault::retry_due(&app.state.connect),
        vault::retry_due(&other.state.connect)
    );
    assert_eq!(one.unwrap() + two.unwrap(), PEOPLE as u64);
    assert_eq!(
        fake.calls().revoke - revokes,
        2 * PEOPLE,
        "the refresh and the access token of each, once"
    );
    for refresh in &grants {
        assert!(!live(&fake, refresh).await);
    }
    assert_eq!(audited(&app, "revoked_upstream").await.len(), PEOPLE);
    assert_eq!(owed(&app).await, 0);
}

/// A sweep stopped while its attempt waits for the provider (the server
/// stopping: its retrier is dropped at the start of the drain) leaves the
/// attempt to run to its end, and the stopping server waits for it: the
/// provider may act on a request whose answer nobody reads (a refresh
/// that rotated the refresh token, here a revocation), and what comes of
/// it is recorded.
#[tokio::test]
async fn an_attempt_under_way_when_its_sweep_stops_runs_to_its_end() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    owed_after_a_failed_try(&app, &fake, "alice").await;
    fake.stall(true);
    make_due(&app).await;
    let sweep = {
        let state = app.state.connect.clone();
        tokio::spawn(async move { vault::retry_due(&state).await })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fake.held() == 0 {
        assert!(std::time::Instant::now() < deadline, "no revocation sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The sweep is dropped where it stands, its attempt unanswered.
    sweep.abort();
    assert!(sweep.await.unwrap_err().is_cancelled());
    fake.stall(false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    assert!(
        app.state.connect.finish_work_under_way(deadline).await,
        "the attempt under way ends"
    );
    // A hung balancer's 504 passes: sent again, the revocation was
    // accepted, and the attempt ended the grant and recorded it.
    assert_eq!(owed(&app).await, 0);
    assert_eq!(audited(&app, "revoked_upstream").await.len(), 1);
}

/// An attempt whose lease ran out while it waited for the provider does
/// not overwrite the record, nor cut short the lease, of the attempt that
/// took the row up after it, whichever records first.
#[tokio::test]
async fn a_failure_recorded_after_the_lease_ran_out_leaves_the_later_record() {
    use mcp_connect::db::pending_revocations as owed_rows;
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "alice").await;
    fake.fail_at("/revoke", Some(503));
    assert_eq!(disconnect(&app, "alice").await, Revocation::Retrying);
    make_due(&app).await;
    let lease = chrono::Duration::minutes(10);
    let [slow] = <[_; 1]>::try_from(owed_rows::claim_due(&app.db, lease, 1).await.unwrap())
        .expect("one claimed");
    // Its lease ran out; another claim takes the row up.
    make_due(&app).await;
    let [later] = <[_; 1]>::try_from(owed_rows::claim_due(&app.db, lease, 1).await.unwrap())
        .expect("claimed again");
    let wait = chrono::Duration::minutes(2);
    // The one whose lease ran out records first: not recorded (with a
    // count alone for a guard it was, and it cut the later one's lease
    // short to its own minute's wait).
    let late = owed_rows::failed(&app.db, &slow, chrono::Duration::zero(), "slow");
    assert!(!late.await.unwrap());
    let current = owed_rows::failed(&app.db, &later, wait, "later");
    assert!(current.await.unwrap());
    let again = owed_rows::failed(&app.db, &slow, chrono::Duration::zero(), "slow");
    assert!(!again.await.unwrap());
    let (attempts, error, due_in): (i32, String, f64) = sqlx::query_as(
        "SELECT attempts, last_error, extract(epoch FROM next_attempt_at - now())::float8
         FROM pending_revocations",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((attempts, error.as_str()), (2, "later"));
    assert!(due_in > 60.0, "the later attempt's wait: {due_in}");
}

/// The connections page says what a disconnect whose revocation failed
/// leaves: the access may still be live at the provider, this server
/// tries again for `revocation.retry_hours`, and where to end it now.
#[tokio::test]
async fn the_connections_page_says_a_failed_revocation_is_tried_again() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (id, refresh) = connect(&app, &fake, "alice").await;
    fake.fail_at("/revoke", Some(503));
    let page = disconnect_on_the_page(&app, id, "retrying").await;
    for said in [
        "could not be told to revoke its access yet",
        "tries again for up to 72 hours",
        "settings at Google",
    ] {
        assert!(page.contains(said), "{said}: {page}");
    }
    assert_eq!(owed(&app).await, 1);
    assert!(live(&fake, &refresh).await);
}
