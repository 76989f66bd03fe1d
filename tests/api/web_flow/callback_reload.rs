//! The provider callback opened again in the flow's own browser while the
//! first is still exchanging its code (a reload, a double submit): the
//! person is asked to wait, and the flow is left for the first request to
//! record its connection on. Long after, a flow that connected nothing is
//! refused as used.

use super::*;
use crate::helpers::spawn_app_with_database_clock;

/// Marks the flow of `state` completed `secs_ago`, as the first callback
/// does before it goes to the provider.
async fn completed(app: &TestApp, state: &str, secs_ago: i64) {
    sqlx::query(
        "UPDATE oauth_flows SET completed_at = now() - make_interval(secs => $2)
          WHERE state_hash = $1",
    )
    .bind(Sha256::digest(state.as_bytes()).to_vec())
    .bind(secs_ago as f64)
    .execute(&app.db)
    .await
    .unwrap();
}

async fn rejections(app: &TestApp) -> i64 {
    count(
        app,
        "SELECT count(*) FROM audit_events WHERE kind = 'callback_rejected'",
    )
    .await
}

/// The flow's callback URL with a code, as the provider sends it.
fn callback(app: &TestApp, state: &str) -> String {
    format!(
        "/oauth/callback/demo?code=abc&state={state}&iss={}/dev/demo",
        app.base
    )
}

#[tokio::test]
async fn a_reload_during_the_code_exchange_asks_to_wait_and_keeps_the_flow() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let state = param(&start_flow(&app, &alice, &t).await, "state").unwrap();
    completed(&app, &state, 1).await;
    for _ in 0..3 {
        let reload = alice.get(&callback(&app, &state)).await;
        assert_eq!(reload.status, 409, "{}", reload.body);
        assert!(
            reload.body.contains("Reload this page in a moment"),
            "{}",
            reload.body
        );
    }
    assert!(
        flow_exists(&app, &state).await,
        "the first callback can still record its connection on the flow"
    );
    assert_eq!(rejections(&app).await, 0, "a reload is not an attack");
    // From another browser it is refused, and the flow still left alone.
    let bob = signed_in(&app, "bob").await;
    assert_eq!(bob.get(&callback(&app, &state)).await.status, 400);
    assert!(flow_exists(&app, &state).await);
}

#[tokio::test]
async fn a_reload_long_after_an_exchange_that_connected_nothing_is_refused_as_used() {
    reload_long_after_a_failed_exchange(spawn_app().await).await;
}

/// How long ago the exchange began is the database's clock's to say, as
/// it wrote the time: on an instance behind it, it is no nearer.
#[tokio::test]
async fn a_reload_long_after_on_an_instance_behind_the_database_clock_is_refused_as_used() {
    let ahead = chrono::Duration::minutes(15);
    reload_long_after_a_failed_exchange(spawn_app_with_database_clock(ahead, |_| {}).await).await;
}

async fn reload_long_after_a_failed_exchange(app: TestApp) {
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let state = param(&start_flow(&app, &alice, &t).await, "state").unwrap();
    completed(&app, &state, 300).await;
    let reload = alice.get(&callback(&app, &state)).await;
    assert_eq!(reload.status, 400, "{}", reload.body);
    assert!(!reload.body.contains("Reload this page in a moment"));
}
