//! A link opened by another account is recorded once per ticket and
//! session: reloading the refusal must not grow the audit table.

use super::*;

async fn mismatches_recorded(app: &TestApp) -> i64 {
    count(
        app,
        "SELECT count(*) FROM audit_events WHERE kind = 'identity_mismatch' AND subject = 'alice'
           AND detail->>'session_subject' = 'bob'",
    )
    .await
}

#[tokio::test]
async fn reloading_a_link_made_for_another_account_records_it_once() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let bob = signed_in(&app, "bob").await;
    for _ in 0..10 {
        let page = bob.get(&format!("/connect?ticket={t}")).await;
        assert_eq!(page.status, 403, "{}", page.body);
        let consent = bob.get("/connect/consent").await;
        assert_eq!(consent.status, 403, "{}", consent.body);
    }
    assert_eq!(mismatches_recorded(&app).await, 1);
}

#[tokio::test]
async fn signing_in_as_another_account_from_a_link_records_it_once() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let browser = Browser::new(&app);
    let start = browser.get(&format!("/connect?ticket={t}")).await;
    let landed = browser.sign_in_from(start, "bob").await;
    assert_sent_to_consent(&landed);
    for _ in 0..5 {
        let consent = browser.follow(&landed).await;
        assert_eq!(consent.status, 403, "{}", consent.body);
    }
    assert_eq!(mismatches_recorded(&app).await, 1);
}
