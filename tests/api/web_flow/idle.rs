//! A sign-in left unused: past `web.session_idle_secs` the browser is
//! signed out and its session deleted, whatever is left of its lifetime;
//! using the pages keeps it going; an idle time of 0 leaves only the
//! lifetime.

use super::*;

/// Moves the one session's last recorded activity `ago` into the past.
async fn last_seen(app: &TestApp, ago: &str) {
    let moved = sqlx::query("UPDATE web_sessions SET last_seen_at = now() - $1::interval")
        .bind(ago)
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(moved.rows_affected(), 1);
}

#[tokio::test]
async fn a_session_unused_for_longer_than_the_idle_time_is_signed_out_and_deleted() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    // The default idle time is an hour; its lifetime, eight.
    last_seen(&app, "61 minutes").await;
    let page = alice.get("/connections").await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(
        page.location.as_deref(),
        Some("/login?return_to=/connections")
    );
    assert_eq!(count(&app, "SELECT count(*) FROM web_sessions").await, 0);
    // Signing in again starts a new one.
    let again = alice.sign_in_from(alice.follow(&page).await, "alice").await;
    assert_eq!(again.location.as_deref(), Some("/connections"));
    assert_eq!(alice.get("/connections").await.status, 200);
}

#[tokio::test]
async fn an_idle_session_cannot_post_a_form() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    let page = alice.get("/connections").await;
    assert_eq!(page.status, 200, "{}", page.body);
    last_seen(&app, "2 hours").await;
    let (_, id) = ticket(&app, "alice", 600).await;
    let posted = alice
        .post_form(
            "/connect",
            &[
                ("ticket".to_owned(), id.to_string()),
                ("action".to_owned(), "continue".to_owned()),
            ],
        )
        .await;
    assert_eq!(posted.status, 403, "{}", posted.body);
    assert!(
        posted.body.contains("You are signed out"),
        "{}",
        posted.body
    );
}

#[tokio::test]
async fn using_the_pages_keeps_a_session_going() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    last_seen(&app, "50 minutes").await;
    assert_eq!(alice.get("/connections").await.status, 200);
    let recorded = count(
        &app,
        "SELECT count(*) FROM web_sessions WHERE last_seen_at > now() - interval '1 minute'",
    )
    .await;
    assert_eq!(recorded, 1, "the visit is recorded as activity");
    // Signed in over an hour ago, last used 50 minutes ago: the idle time
    // counts from the last use.
    sqlx::query(
        "UPDATE web_sessions SET created_at = now() - interval '100 minutes',
                                 last_seen_at = now() - interval '50 minutes'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(alice.get("/connections").await.status, 200);
}

#[tokio::test]
async fn an_idle_time_of_zero_leaves_only_the_lifetime() {
    let app = crate::helpers::spawn_app_with(|t| {
        t.insert(
            "web".into(),
            toml::Value::Table(toml::from_str("session_idle_secs = 0").unwrap()),
        );
    })
    .await;
    let alice = signed_in(&app, "alice").await;
    last_seen(&app, "7 hours").await;
    assert_eq!(alice.get("/connections").await.status, 200);
    sqlx::query("UPDATE web_sessions SET expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(alice.get("/connections").await.status, 303);
}
