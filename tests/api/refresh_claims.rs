//! A connection's refresh claim (`refresh_claims`) against everything else
//! that changes its tokens: a refresh runs to its end whoever waits for it,
//! a refusal does not mark a connection another instance is refreshing,
//! and a disconnect or a re-seal waits for the refresh to write what it
//! was answered.

use std::time::Duration;

use mcp_connect::{
    connect::vault::{TokenState, disconnect, token_rejected, usable_token},
    domain::{ProviderName, UserRef},
};
use secrecy::ExposeSecret;

use crate::{
    full_flow::connect_demo,
    helpers::{TestApp, count, spawn_app, spawn_app_with},
    slow_refresh::{SlowGoogle, expire_all, store},
};

/// A claim on every connection's refresh, as another instance refreshing
/// it holds, for `secs` more seconds.
async fn claim_all_elsewhere(app: &TestApp, secs: i32) {
    sqlx::query(
        "INSERT INTO refresh_claims (connection_id, claim_id, claimed_until)
         SELECT id, gen_random_uuid(), now() + make_interval(secs => $1) FROM connections",
    )
    .bind(secs)
    .execute(&app.db)
    .await
    .unwrap();
}

async fn refreshed(app: &TestApp) -> i64 {
    count(
        app,
        "SELECT count(*) FROM audit_events WHERE kind = 'refreshed'",
    )
    .await
}

/// Alice's demo connection disconnected in a task of the test's own.
fn disconnect_alice_in_background(app: &TestApp) -> tokio::task::JoinHandle<anyhow::Result<bool>> {
    let state = app.state.clone();
    let issuer = app.dev.issuer();
    tokio::spawn(async move {
        let alice = UserRef::new(&issuer, "alice");
        disconnect(&state.connect, alice, &ProviderName::parse("demo").unwrap()).await
    })
}

async fn status(app: &TestApp) -> String {
    sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The provider has been asked for new tokens when the call that asked
/// goes away (a cancelled tool call, a request past its deadline): what
/// the provider answers is stored all the same, as one that rotates
/// refresh tokens has retired the stored one, and the claim is released.
/// A stopping server waits for it.
#[tokio::test]
async fn a_refresh_whose_caller_goes_away_still_stores_what_the_provider_answered() {
    let slow = SlowGoogle::start().await;
    let app = spawn_app_with(|t| slow.configure(t)).await;
    store(&app, "ann").await;
    expire_all(&app).await;
    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    let ann = UserRef::new(&issuer, "ann");

    let asked = usable_token(&app.state.connect, ann, provider, &[]);
    // Gone while the provider answers (just after the claim, the refresh
    // may not have begun yet).
    tokio::select! {
        _ = asked => panic!("answered before the provider did"),
        () = slow.until_asked() => {}
    }
    // The caller is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    assert!(
        app.state.connect.finish_work_under_way(deadline).await,
        "the refresh under way ends"
    );

    assert_eq!(refreshed(&app).await, 1);
    assert_eq!(
        count(&app, "SELECT count(*) FROM refresh_claims").await,
        0,
        "the claim is released"
    );
    // The stored token is the provider's new one: served without another
    // refresh.
    let TokenState::Usable(token) = usable_token(&app.state.connect, ann, provider, &[])
        .await
        .unwrap()
    else {
        panic!("the refreshed token is usable");
    };
    assert!(
        token.access_token.expose_secret().starts_with("fresh-"),
        "the token the provider answered is stored"
    );
    assert_eq!(refreshed(&app).await, 1, "no second refresh");
}

/// The caller goes away while its claim is being written (the statement
/// waits for the claim row, which another transaction holds): the claim
/// is taken and the refresh run all the same. A claim statement dropped
/// half-way could commit after the release meant for it, and hold every
/// instance's refresh until it expired.
#[tokio::test]
async fn a_caller_gone_while_its_claim_is_written_still_refreshes() {
    let slow = SlowGoogle::start().await;
    let app = spawn_app_with(|t| slow.configure(t)).await;
    store(&app, "ann").await;
    expire_all(&app).await;
    // An expired claim, to be taken over, held by the test's transaction.
    claim_all_elsewhere(&app, -1).await;
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM refresh_claims FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    let ann = UserRef::new(&issuer, "ann");

    let asked = usable_token(&app.state.connect, ann, provider, &[]);
    tokio::select! {
        _ = asked => panic!("answered while the claim row was held"),
        () = claim_statement_waits(&app) => {}
    }
    // The caller is gone; the claim row is free again.
    holder.commit().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    assert!(app.state.connect.finish_work_under_way(deadline).await);

    assert_eq!(refreshed(&app).await, 1, "the refresh ran to its end");
    assert_eq!(
        count(&app, "SELECT count(*) FROM refresh_claims").await,
        0,
        "the claim is released"
    );
}

/// Waits until a claim statement waits for a row lock.
async fn claim_statement_waits(app: &TestApp) {
    for _ in 0..500 {
        let waiting = count(
            app,
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'
               AND query LIKE 'INSERT INTO refresh_claims%'",
        )
        .await;
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no claim statement waited for the claim row");
}

/// The same through HTTP, with the server stopped at once while the
/// provider answers (a drain that ran out, or a second stop signal): the
/// request is dropped with the worker that ran it, and with the worker its
/// runtime. The refresh runs on the service's own runtime, and the stop
/// waits for it.
#[tokio::test]
async fn a_refresh_outlives_the_worker_of_the_request_that_began_it() {
    let slow = SlowGoogle::start().await;
    let app = spawn_app_with(|t| slow.configure(t)).await;
    store(&app, "ann").await;
    expire_all(&app).await;

    let call = app.call_tool("ann", "whoami", serde_json::json!({"provider": "google"}));
    // Stopped while the provider answers: the refresh is under way then.
    // (Stopped just after the claim is taken, the request may be dropped
    // before its refresh began, and the claim is left to expire.)
    tokio::select! {
        _ = call => panic!("answered before the provider did"),
        () = slow.until_asked() => {}
    }
    app.stop_at_once().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    assert!(app.state.connect.finish_work_under_way(deadline).await);

    assert_eq!(refreshed(&app).await, 1, "the provider's tokens are stored");
    assert_eq!(count(&app, "SELECT count(*) FROM refresh_claims").await, 0);
}

/// The provider refused an access token while another instance refreshes
/// the connection: the refusal may be of the token that refresh replaces,
/// and marking the connection would make the refresh's write (which needs
/// an active row) drop the provider's new tokens. It is left active; once
/// the claim has expired (left by an instance that stopped), it is marked.
#[tokio::test]
async fn a_refused_token_is_not_marked_while_another_instance_refreshes() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let token = app.demo_token("alice").await;
    claim_all_elsewhere(&app, 60).await;

    assert!(!token_rejected(&app.state.connect, &token).await.unwrap());
    assert_eq!(status(&app).await, "active");

    sqlx::query("UPDATE refresh_claims SET claimed_until = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    assert!(token_rejected(&app.state.connect, &token).await.unwrap());
    assert_eq!(status(&app).await, "needs_reauth");
}

/// A token that does not open is marked whatever claim there is: no
/// refresh can open it either.
#[tokio::test]
async fn an_unreadable_token_is_marked_while_a_refresh_is_claimed() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    claim_all_elsewhere(&app, 60).await;
    let issuer = app.dev.issuer();
    let demo = ProviderName::parse("demo").unwrap();
    let alice = UserRef::new(&issuer, "alice");
    let row = mcp_connect::db::connections::find_account(&app.db, alice, &demo, None)
        .await
        .unwrap()
        .unwrap();

    let connect = &app.state.connect;
    assert!(mcp_connect::connect::stale_keys::unreadable(connect, &row, "does_not_open").await);
    assert_eq!(status(&app).await, "needs_reauth");
}

/// Another instance's refresh lost its transaction after the provider
/// answered and is still writing the new tokens: it holds no row lock, only
/// its claim. A disconnect waits for the claim, so that the tokens it
/// revokes are the ones that refresh stored; then nobody refreshes again.
#[tokio::test]
async fn a_disconnect_waits_for_a_refresh_claimed_by_another_instance() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let token = app.demo_token("alice").await;
    let token = token.access_token.expose_secret().to_owned();
    let api_status = |token: String| {
        let (http, url) = (app.http.clone(), format!("{}/dev/demo/api/me", app.addr));
        async move {
            let answer = http.get(url).bearer_auth(token).send().await.unwrap();
            answer.status().as_u16()
        }
    };
    claim_all_elsewhere(&app, 60).await;

    let disconnecting = disconnect_alice_in_background(&app);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!disconnecting.is_finished(), "it waits for the claim");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    assert_eq!(api_status(token.clone()).await, 200, "nothing revoked yet");

    // The other instance has written its tokens and releases its claim.
    sqlx::query("DELETE FROM refresh_claims")
        .execute(&app.db)
        .await
        .unwrap();
    assert!(disconnecting.await.unwrap().unwrap());
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    assert_eq!(api_status(token).await, 401, "revoked once it could be");
    assert_eq!(
        count(&app, "SELECT count(*) FROM refresh_claims").await,
        0,
        "no claim is left"
    );
}

/// A stopping server does not keep its drain waiting on a claim: the
/// disconnect ends at once, having changed nothing, for the person (or
/// the client) to ask again of another instance.
#[tokio::test]
async fn a_disconnect_waiting_for_a_claim_ends_when_the_server_stops() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    claim_all_elsewhere(&app, 60).await;
    let disconnecting = disconnect_alice_in_background(&app);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!disconnecting.is_finished(), "it waits for the claim");

    app.state.begin_shutdown();
    let ended = tokio::time::timeout(Duration::from_secs(5), disconnecting).await;
    let error = ended.expect("ends at once").unwrap().unwrap_err();
    assert!(format!("{error:#}").contains("stopping"), "{error:#}");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
}

/// `tokens rekey` re-seals a row only once a refresh claimed elsewhere has
/// ended: re-sealed under it, the tokens that refresh writes after a lost
/// transaction (only over the row as it read it) would be dropped.
#[tokio::test]
async fn a_reseal_waits_for_a_refresh_claimed_by_another_instance() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let old = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let new = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let rotated = app
        .second_instance_with(|t| {
            let ring = vec![new.clone().into(), old.clone().into()];
            t.insert("keys".into(), toml::Value::Array(ring));
        })
        .await;
    claim_all_elsewhere(&app, 60).await;

    let resealing = tokio::spawn({
        let state = rotated.state.clone();
        async move { mcp_connect::connect::vault::rekey_all(&state.connect).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!resealing.is_finished(), "it waits for the claim");
    let key_id = "SELECT key_id FROM connections";
    let sealed_by: String = sqlx::query_scalar(key_id).fetch_one(&app.db).await.unwrap();
    assert_eq!(sealed_by, "dev1");

    sqlx::query("DELETE FROM refresh_claims")
        .execute(&app.db)
        .await
        .unwrap();
    let rekeyed = resealing.await.unwrap().unwrap();
    assert_eq!(rekeyed.resealed, 1);
    let sealed_by: String = sqlx::query_scalar(key_id).fetch_one(&app.db).await.unwrap();
    assert_eq!(sealed_by, "k2");
    assert_eq!(count(&app, "SELECT count(*) FROM refresh_claims").await, 0);
}

/// A call's once-a-minute note of its use does not wait for a row a
/// refresh holds (it keeps the row locked while the provider answers, up
/// to the provider's timeout, longer than the statements' lock timeout):
/// the call completes at once, without its note, instead of failing after
/// the wait.
#[tokio::test]
async fn a_call_does_not_wait_for_the_row_a_refresh_holds_to_note_its_use() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    sqlx::query("UPDATE connections SET last_used_at = now() - interval '1 hour'")
        .execute(&app.db)
        .await
        .unwrap();
    let mut refresh = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections FOR NO KEY UPDATE")
        .fetch_all(&mut *refresh)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (status, body) = app
        .call_tool("alice", "whoami", serde_json::json!({"provider": "demo"}))
        .await;
    let took = started.elapsed();
    refresh.rollback().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_ne!(body["result"]["isError"], true, "{body}");
    assert!(took < Duration::from_secs(2), "waited {took:?} for the row");
}

/// A connection disconnected while its refresh waits for another
/// instance's claim is not connected any more: the call says so, rather
/// than that the connection needs its user (whose connect would ask again
/// for the scopes of the connection that went).
#[tokio::test]
async fn a_connection_deleted_while_its_refresh_waits_is_missing() {
    let slow = SlowGoogle::start().await;
    let app = spawn_app_with(|t| slow.configure(t)).await;
    store(&app, "ann").await;
    expire_all(&app).await;
    claim_all_elsewhere(&app, 30).await;
    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    let ann = UserRef::new(&issuer, "ann");
    let asked = usable_token(&app.state.connect, ann, provider, &[]);
    let deleting = async {
        // The refresh waits for the claim.
        tokio::time::sleep(Duration::from_millis(600)).await;
        sqlx::query("DELETE FROM connections")
            .execute(&app.db)
            .await
            .unwrap();
    };
    let (answered, ()) = tokio::join!(asked, deleting);
    let answered = answered.unwrap();
    assert!(matches!(answered, TokenState::Missing), "{answered:?}");
    assert_eq!(refreshed(&app).await, 0, "nothing was refreshed");
}
