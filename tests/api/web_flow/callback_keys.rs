//! A connect under way when the key that sealed its PKCE verifier leaves
//! the ring (retired before the flow's ten minutes were up): its callback
//! is answered as an expired flow's is, not with an internal error.

use super::*;

#[tokio::test]
async fn a_callback_whose_verifier_key_left_the_ring_gets_the_expired_flows_page() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    let iss = format!("{}/dev/demo", app.base);

    // The page an expired flow gets, to compare with.
    let (t, _) = ticket(&app, "alice", 600).await;
    let url = start_flow(&app, &alice, &t).await;
    let expired_state = param(&url, "state").unwrap();
    sqlx::query("UPDATE oauth_flows SET expires_at = now() - interval '1 millisecond'")
        .execute(&app.db)
        .await
        .unwrap();
    let expired = alice
        .get(&format!(
            "/oauth/callback/demo?code=abc&state={expired_state}&iss={iss}"
        ))
        .await;
    assert_eq!(expired.status, 400, "{}", expired.body);

    // A flow sealed by the key of the first instance, whose callback
    // reaches an instance given only a new key (the old one retired).
    let (t, _) = ticket(&app, "alice", 600).await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    let new_key = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let rotated = app
        .second_instance_with(|t| {
            t.insert("keys".into(), toml::Value::Array(vec![new_key.into()]));
        })
        .await;
    let page = alice
        .get(&format!(
            "{}/oauth/callback/demo?code=abc&state={state}&iss={iss}",
            rotated.addr
        ))
        .await;
    assert_eq!(page.status, 400, "{}", page.body);
    assert_eq!(page.body, expired.body, "the expired flow's page");
    assert!(
        !flow_exists(&app, &state).await,
        "the flow can do nothing more"
    );
    let audited = "SELECT count(*) FROM audit_events WHERE kind = 'callback_rejected' \
                   AND detail->>'reason' = 'verifier_unreadable'";
    assert_eq!(count(&app, audited).await, 1);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}
