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

/// Opening the foreign link and one's own in turn changes the session's
/// pending link every time: still one row for the foreign link.
#[tokio::test]
async fn opening_a_foreign_link_and_ones_own_in_turn_records_it_once() {
    let app = spawn_app().await;
    let (alices, _) = ticket(&app, "alice", 600).await;
    let (bobs, _) = ticket(&app, "bob", 600).await;
    let bob = signed_in(&app, "bob").await;
    for _ in 0..5 {
        let refused = bob.get(&format!("/connect?ticket={alices}")).await;
        assert_eq!(refused.status, 403, "{}", refused.body);
        let own = bob.get(&format!("/connect?ticket={bobs}")).await;
        assert_sent_to_consent(&own);
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

/// "Sign out and use another account" comes back to the link its page
/// refused, even when this browser opened another link since (a second
/// tab): not to that other one.
#[tokio::test]
async fn switching_account_comes_back_to_the_link_its_page_refused() {
    let app = spawn_app().await;
    let (alices, alices_id) = ticket(&app, "alice", 600).await;
    let (bobs, bobs_id) = ticket(&app, "bob", 600).await;
    let bob = signed_in(&app, "bob").await;
    let refused = bob.get(&format!("/connect?ticket={alices}")).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Another tab: his own link, which becomes the session's last.
    let own = bob.get(&format!("/connect?ticket={bobs}")).await;
    assert_sent_to_consent(&own);
    // The form's token binds the link it names: another is refused.
    let fields = crate::browser::form_fields(&refused.body, "/logout").unwrap();
    let forged: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| match k.as_str() {
            "ticket" => (k.clone(), bobs_id.to_string()),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    assert_eq!(bob.post_form("/logout", &forged).await.status, 403);
    let start = bob.submit(&refused, "/logout", &[]).await;
    let landed = bob.sign_in_from(start, "alice").await;
    assert_sent_to_consent(&landed);
    let consent_url = landed.location.clone().unwrap_or_default();
    assert!(
        consent_url.contains(&alices_id.to_string()),
        "{consent_url}"
    );
    let consent = bob.follow(&landed).await;
    assert_eq!(consent.status, 200, "{}", consent.body);
    assert!(consent.body.contains("Continue"), "{}", consent.body);
}

/// A link opened by many people's sessions is recorded for the first
/// sixteen: the audit table does not grow with a link handed around.
#[tokio::test]
async fn a_link_opened_by_many_sessions_is_recorded_for_sixteen() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    for i in 0..18 {
        let other = signed_in(&app, &format!("mallory-{i}")).await;
        let page = other.get(&format!("/connect?ticket={t}")).await;
        assert_eq!(page.status, 403, "{}", page.body);
    }
    let recorded = count(
        &app,
        "SELECT count(*) FROM audit_events WHERE kind = 'identity_mismatch' AND subject = 'alice'",
    )
    .await;
    assert_eq!(recorded, 16);
}
