//! (d) A revocation still owed needs its key as long as it is retried:
//! `tokens rekey` re-seals it (and does not call the rotation done while
//! one is left on a key the ring lacks), and `tokens forget-key` gives up
//! those a key gone for good sealed.

use provider_fakes as fakes;

use super::{audited, connect, disconnect, live, make_due, owed};
use crate::{helpers::succeeded, provider_flows::app_with};
use mcp_connect::connect::vault::Revocation;

#[tokio::test]
async fn rekey_reseals_revocations_owed_and_forget_key_gives_them_up() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (_, refresh) = connect(&app, &fake, "alice").await;
    fake.fail_at("/revoke", Some(503));
    assert_eq!(disconnect(&app, "alice").await, Revocation::Retrying);
    let old = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let new = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let ring = format!("{new},{old}");
    let rekey = |keys: &str| {
        app.operator_command(keys)
            .args(["tokens", "rekey"])
            .output()
            .unwrap()
    };
    let stdout = succeeded(rekey(&ring));
    assert!(
        stdout.contains("re-sealed 1 revocation(s) still owed with key k2"),
        "{stdout}"
    );
    let key_id = "SELECT key_id FROM pending_revocations";
    let sealed_by: String = sqlx::query_scalar(key_id).fetch_one(&app.db).await.unwrap();
    assert_eq!(sealed_by, "k2");

    // The old key retired: an instance with the new one alone ends it.
    fake.fail_at("/revoke", None);
    let rotated = app
        .second_instance_with(|t| {
            fake.configure(t, "google");
            t.insert("keys".into(), vec![new.clone()].into());
        })
        .await;
    make_due(&app).await;
    let tried = mcp_connect::connect::vault::retry_due(&rotated.state.connect).await;
    assert_eq!(tried.unwrap(), 1);
    assert!(!live(&fake, &refresh).await, "the re-sealed tokens opened");
    assert_eq!(audited(&app, "revoked_upstream").await.len(), 1);

    // One on a key nobody has: rekey fails naming it, forget-key gives it up.
    fake.fail_at("/revoke", Some(503));
    connect(&app, &fake, "bob").await;
    assert_eq!(disconnect(&app, "bob").await, Revocation::Retrying);
    sqlx::query("UPDATE pending_revocations SET key_id = 'gone-for-good'")
        .execute(&app.db)
        .await
        .unwrap();
    let failed = rekey(&ring);
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert!(!failed.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "1 revocation(s) still owed are sealed by keys not in MCP_CONNECT_KEYS: gone-for-good"
        ),
        "{stdout}"
    );
    let forgot = app
        .operator_command(&ring)
        .args(["tokens", "forget-key", "gone-for-good", "--yes"])
        .output()
        .unwrap();
    let stdout = succeeded(forgot);
    assert!(
        stdout.contains("1 revocation(s) still owed, sealed by key gone-for-good, were given up"),
        "{stdout}"
    );
    assert_eq!(owed(&app).await, 0);
    let abandoned = audited(&app, "revocation_abandoned").await;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["reason"], "key_forgotten", "{abandoned:?}");
    succeeded(rekey(&ring));
}
