//! GitHub: an OAuth app's tokens never expire, so disconnect deletes the
//! connection's token at GitHub (`DELETE /applications/{client_id}/token`,
//! the client as HTTP Basic, the access token in a JSON body): the token
//! dies there, and no other token of the account (another person's
//! connection of a shared account) with it. A deletion GitHub answers 422
//! is done when GitHub's check of the token no longer knows it (an earlier
//! deletion's answer was lost), and a failure when the token is still live
//! (a flooded endpoint). The model cannot reach that endpoint through
//! `api_request`, whatever methods the operator allows.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use mcp_connect::providers::{ProviderError, TokenHint};
use provider_fakes::{FakeProvider, github};

use super::app_with_edit;
use crate::{helpers::TestApp, key_connect::disconnect, provider_flows::connect};

/// The access token the fake issued.
fn access_token(fake: &FakeProvider) -> String {
    let issued = fake.issued();
    let token = issued.iter().rfind(|t| t.starts_with("gho_"));
    token.expect("an access token").clone()
}

/// The status GitHub's `/user` answers `token`.
async fn user_status(fake: &FakeProvider, token: &str) -> u16 {
    fake.bearer_status("/user", token).await.unwrap()
}

#[tokio::test]
async fn disconnect_deletes_the_connections_token_at_github() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let token = access_token(&fake);
    assert_eq!(user_status(&fake, &token).await, 200, "live before");

    let gone = disconnect(&app, "github").await;
    assert_eq!(gone["result"]["isError"], false, "{gone}");
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "revoked", "{gone}");
    assert_eq!(result["next_step"], "none", "{gone}");
    assert_eq!(fake.calls().revoke, 1);
    let path = format!("/applications/{}/token", fake.client_id());
    let [sent] = <[_; 1]>::try_from(fake.seen(&path)).expect("one token deletion");
    assert_eq!(sent.method, "DELETE");
    let client = format!("{}:{}", fake.client_id(), fake.client_secret());
    let basic = format!("Basic {}", STANDARD.encode(client));
    assert_eq!(sent.headers["authorization"], basic);
    let body: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body, json!({"access_token": token}));
    assert_eq!(
        user_status(&fake, &token).await,
        401,
        "the token still works"
    );
}

/// Refused as the entry's `grant_paths` (`applications`) and, without
/// them, as the revocation endpoint itself.
#[tokio::test]
async fn the_model_cannot_delete_the_token_through_api_request() {
    let methods = r#"allowed_methods = ["GET", "HEAD", "DELETE"]"#;
    for edit in [methods.to_owned(), format!("{methods}\ngrant_paths = []")] {
        refused_with(&edit).await;
    }
}

async fn refused_with(edit: &str) {
    let fake = github::start().await;
    let app = app_with_edit(&fake, "github", edit).await;
    connect(&app, &fake, "github").await;
    let id = fake.client_id();
    for path in [
        format!("applications/{id}/token"),
        format!("Applications/{id}/Token"),
        format!("applications//{id}/token/"),
        format!("applications/{id}/%74oken"),
    ] {
        // Without the grant's JSON body: `api_request` refuses a body on
        // a DELETE, and that refusal would come before these.
        let args = json!({"provider": "github", "method": "DELETE", "path": path});
        let (_, body) = app.call_tool("alice", "api_request", args).await;
        let result = &body["result"];
        assert_eq!(result["isError"], true, "{edit} {path}: {body}");
        let error = &result["structuredContent"]["error"];
        assert_eq!(error["kind"], "refused", "{edit} {path}: {body}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("connections page"),
            "{edit} {path}: {body}"
        );
    }
    assert_eq!(fake.calls().revoke, 0, "nothing reached the token endpoint");
    assert_eq!(user_status(&fake, &access_token(&fake)).await, 200);
}

/// Two people here connect the same GitHub account (a shared account):
/// one disconnecting ends that connection's token only, not the other's.
#[tokio::test]
async fn a_disconnect_leaves_another_connection_of_the_same_account_working() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    crate::provider_flows::connect_as(&app, &fake, "github", "bob").await;
    let bobs = access_token(&fake);
    connect(&app, &fake, "github").await;
    let alices = access_token(&fake);
    assert_ne!(alices, bobs);

    let gone = disconnect(&app, "github").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "revoked", "{gone}");
    assert_eq!(
        user_status(&fake, &alices).await,
        401,
        "alice's token ended"
    );
    assert_eq!(user_status(&fake, &bobs).await, 200, "bob's still works");
}

/// Deletes `token` at GitHub with the service's own revocation, called
/// directly, outside any disconnect and its retries (below, as an earlier
/// deletion whose answer the service never heard).
async fn revoke(app: &TestApp, token: &str) -> Result<(), ProviderError> {
    let github = app.state.connect.provider("github").unwrap();
    let http = reqwest::Client::builder()
        .user_agent("mcp-connect")
        .build()
        .unwrap();
    let hint = TokenHint::AccessToken;
    github.revoke(&http, token, hint, &Default::default()).await
}

/// GitHub's 422 answers a token it does not know and "the endpoint has
/// been spammed" alike; its check of the token tells them apart: a second
/// deletion of a deleted token counts as revoked.
#[tokio::test]
async fn a_second_deletion_at_github_counts_as_revoked() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let token = access_token(&fake);
    revoke(&app, &token).await.unwrap();
    revoke(&app, &token).await.unwrap();
    assert_eq!(fake.calls().revoke, 2);
    assert_eq!(fake.calls().check, 1, "asked after the 422");
    assert_eq!(user_status(&fake, &token).await, 401);
}

/// A flooded endpoint's 422 for a token GitHub still knows is a failure:
/// the check shows the token live, and it still works.
#[tokio::test]
async fn a_422_for_a_live_token_is_still_a_failure() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let token = access_token(&fake);
    fake.fail_next(1, 422);
    let e = revoke(&app, &token).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status(422)), "{e}");
    assert_eq!(fake.calls().check, 1);
    assert_eq!(user_status(&fake, &token).await, 200, "still live");
}

/// The `revoked_upstream` audit rows' details.
async fn revoked_upstream(app: &TestApp) -> Vec<Value> {
    let sql = "SELECT detail FROM audit_events WHERE kind = 'revoked_upstream' ORDER BY id";
    sqlx::query_scalar(sql).fetch_all(&app.db).await.unwrap()
}

/// Every revocation owed made due, and tried: how many were.
async fn retry_now(app: &TestApp) -> u64 {
    sqlx::query("UPDATE pending_revocations SET next_attempt_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    mcp_connect::connect::vault::retry_due(&app.state.connect)
        .await
        .unwrap()
}

async fn owed(app: &TestApp) -> i64 {
    crate::helpers::count(app, "SELECT count(*) FROM pending_revocations").await
}

/// A disconnect whose token an earlier deletion already ended (its
/// answer lost on the way back): GitHub's 422 and its check's 404 make it
/// revoked, owed no more, and audited so, not tried until the window ends.
#[tokio::test]
async fn a_disconnect_after_a_deletion_whose_answer_was_lost_is_revoked() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let token = access_token(&fake);
    revoke(&app, &token).await.unwrap();

    let gone = disconnect(&app, "github").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "revoked", "{gone}");
    assert_eq!(fake.calls().revoke, 2);
    assert_eq!(fake.calls().check, 1);
    assert_eq!(owed(&app).await, 0);
    assert_eq!(revoked_upstream(&app).await.len(), 1);
}

/// The same through the retries: the disconnect's deletion reached GitHub
/// but its answer did not come back, and the sweep's deletion hears 422.
#[tokio::test]
async fn a_retry_after_a_deletion_whose_answer_was_lost_is_revoked() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let token = access_token(&fake);
    let path = format!("/applications/{}/token", fake.client_id());
    fake.fail_at(&path, Some(504));
    let gone = disconnect(&app, "github").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "failed", "{gone}");
    fake.fail_at(&path, None);
    // What the lost attempt did at GitHub.
    revoke(&app, &token).await.unwrap();

    assert_eq!(retry_now(&app).await, 1);
    assert_eq!(fake.calls().check, 1);
    assert_eq!(owed(&app).await, 0);
    let revoked = revoked_upstream(&app).await;
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0]["attempts"], 2, "{revoked:?}");
    let abandoned = "SELECT count(*) FROM audit_events WHERE kind = 'revocation_abandoned'";
    assert_eq!(crate::helpers::count(&app, abandoned).await, 0);
}

/// A deletion GitHub failed is tried again after the person connected the
/// same account again: GitHub's deletion ends the one token it is sent,
/// never the new connection's.
#[tokio::test]
async fn a_failed_deletion_is_tried_again_after_a_reconnect_and_spares_the_new_token() {
    let fake = github::start().await;
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let old = access_token(&fake);
    let path = format!("/applications/{}/token", fake.client_id());
    fake.fail_at(&path, Some(503));
    let gone = disconnect(&app, "github").await;
    assert_eq!(
        gone["result"]["structuredContent"]["revocation"], "failed",
        "{gone}"
    );
    fake.fail_at(&path, None);
    connect(&app, &fake, "github").await;
    let new = access_token(&fake);
    assert_ne!(new, old);
    assert_eq!(retry_now(&app).await, 1);
    assert_eq!(user_status(&fake, &old).await, 401, "the old token ended");
    assert_eq!(user_status(&fake, &new).await, 200, "the new one works");
    let owed = crate::helpers::count(&app, "SELECT count(*) FROM pending_revocations");
    assert_eq!(owed.await, 0);
}

/// A GitHub App's expiring user token: an expired one is refreshed before
/// its deletion. When that refresh fails, the expired token is not sent
/// (GitHub would answer 422, then "Check a token" 404, which reads as a
/// token already ended while the refresh token lives on): the attempt
/// fails and is tried again, and once the refresh works the new token is
/// deleted.
#[tokio::test]
async fn an_expired_app_token_whose_refresh_fails_is_not_taken_for_ended() {
    let fake = github::start().await;
    fake.set_access_ttl(Some(std::time::Duration::from_secs(3600)));
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let refresh = fake.refresh_tokens().pop().expect("a ghr_ refresh token");
    assert!(refresh.starts_with("ghr_"), "{refresh}");
    fake.expire_access_tokens();
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 minute'")
        .execute(&app.db)
        .await
        .unwrap();
    fake.fail_at("/login/oauth/access_token", Some(503));

    let gone = disconnect(&app, "github").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "failed", "{gone}");
    assert_eq!(fake.calls().revoke, 0, "the expired token was not sent");
    assert_eq!(owed(&app).await, 1);
    assert_eq!(revoked_upstream(&app).await.len(), 0);

    fake.fail_at("/login/oauth/access_token", None);
    assert_eq!(retry_now(&app).await, 1);
    assert_eq!(fake.calls().revoke, 1, "the refreshed token deleted");
    assert_eq!(fake.calls().check, 0, "GitHub accepted it: no check");
    assert_eq!(owed(&app).await, 0);
    assert_eq!(revoked_upstream(&app).await.len(), 1);
}

/// A refresh before a deletion rotates a GitHub App's refresh token (the
/// one used is dead from then on): the new tokens are kept on the row, so
/// that when the deletion fails the retry refreshes with the live one and
/// ends the grant, instead of failing on the dead one for days.
#[tokio::test]
async fn tokens_a_refresh_before_a_deletion_rotated_are_kept_for_its_retry() {
    let fake = github::start().await;
    fake.set_access_ttl(Some(std::time::Duration::from_secs(3600)));
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    fake.expire_access_tokens();
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 minute'")
        .execute(&app.db)
        .await
        .unwrap();
    let path = format!("/applications/{}/token", fake.client_id());
    fake.fail_at(&path, Some(503));

    let gone = disconnect(&app, "github").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "failed", "{gone}");
    assert_eq!(fake.calls().refresh, 1);

    fake.fail_at(&path, None);
    assert_eq!(retry_now(&app).await, 1);
    // The kept access token is live: deleted without a refresh, nor a check.
    assert_eq!(fake.calls().refresh, 1, "not refreshed again");
    assert_eq!(fake.calls().check, 0);
    let deleted = fake.seen(&path).pop().expect("the deletion");
    let latest = access_token_issued_last(&fake);
    assert!(deleted.body.contains(&latest), "the kept token was deleted");
    assert_eq!(owed(&app).await, 0);
    assert_eq!(revoked_upstream(&app).await.len(), 1);
}

/// The access token issued last (a GitHub App's user token, `ghu_`).
fn access_token_issued_last(fake: &FakeProvider) -> String {
    let issued = fake.issued();
    let token = issued.iter().rfind(|t| t.starts_with("ghu_"));
    token.expect("a user access token").clone()
}

/// A refresh before the deletion refused for good: the refresh token sent
/// is dead (here: an earlier refresh rotated it, and its answer never came
/// back). Whether the grant ended cannot be told, so the revocation is
/// given up at once and says so, rather than sending the expired token
/// (GitHub's 422, then 404 at its check, would read as ended) or retrying
/// a dead token for days.
#[tokio::test]
async fn a_dead_refresh_token_before_a_deletion_gives_up_saying_so() {
    let fake = github::start().await;
    fake.set_access_ttl(Some(std::time::Duration::from_secs(3600)));
    let app = crate::provider_flows::app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    let refresh = fake.refresh_tokens().pop().expect("a refresh token");
    // The rotation whose answer was lost.
    let rotated = fake.refresh_status("/login/oauth/access_token", &refresh);
    assert_eq!(rotated.await.unwrap(), 200);
    fake.expire_access_tokens();
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 minute'")
        .execute(&app.db)
        .await
        .unwrap();

    let gone = disconnect(&app, "github").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "failed", "{gone}");
    assert_eq!(fake.calls().revoke, 0, "the expired token was not sent");
    assert_eq!(owed(&app).await, 0);
    assert_eq!(revoked_upstream(&app).await.len(), 0);
    let reason: String = sqlx::query_scalar(
        "SELECT detail->>'reason' FROM audit_events WHERE kind = 'revocation_abandoned'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(reason, "refresh_token_dead");
}
