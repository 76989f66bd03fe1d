//! Dropbox: a refresh token only when the authorize request says
//! `token_access_type=offline`, four-hour access tokens refreshed with the
//! kept refresh token, an RPC API of POSTs (`users/get_current_account`
//! with no body at all), and revocation with the access token as bearer.

use serde_json::json;

use provider_fakes::{FakeProvider, dropbox};

use super::{api, app_with_edit, connection_has, rmcp_api};
use crate::{
    full_flow::revocation_audited,
    helpers::TestApp,
    key_connect::disconnect,
    provider_flows::{app_with, connect},
};

async fn expire(app: &TestApp, fake: &FakeProvider) {
    fake.expire_access_tokens();
    sqlx::query("UPDATE connections SET access_token_expires_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
}

/// Every access token the fake issued, tried at its identity endpoint:
/// how many still work.
async fn live_access_tokens(fake: &FakeProvider) -> usize {
    let mut live = 0;
    for token in fake.secrets().iter().filter(|t| t.starts_with("sl.")) {
        let answer = provider_fakes::no_redirects()
            .post(format!("{}/2/users/get_current_account", fake.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        live += usize::from(answer.status() == 200);
    }
    live
}

#[tokio::test]
async fn dropbox_connects_offline_and_refreshes_its_short_lived_token() {
    let fake = dropbox::start().await;
    let app = app_with(&fake, "dropbox").await;
    let body = connect(&app, &fake, "dropbox").await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice@example.com",
        "{body}"
    );
    let authorize = fake.last_authorize().expect("authorize request");
    assert_eq!(
        authorize.get("token_access_type").map(String::as_str),
        Some("offline")
    );
    assert_eq!(
        authorize.get("code_challenge_method").map(String::as_str),
        Some("S256")
    );
    assert!(connection_has(&app, "refresh_token IS NOT NULL").await);
    assert!(
        connection_has(
            &app,
            "access_token_expires_at BETWEEN now() + interval '3 hours' AND now() + interval '4 hours'"
        )
        .await
    );

    // RPC: a POST with a JSON argument, and one without any body.
    let listed = api(
        &app,
        json!({"provider": "dropbox", "method": "POST", "path": "files/list_folder",
               "body": {"path": ""}}),
    )
    .await;
    assert_eq!(listed["http_status"], 200, "{listed}");
    assert_eq!(listed["body"]["entries"][0]["name"], "Prime_Numbers.txt");
    let me = api(
        &app,
        json!({"provider": "dropbox", "method": "POST", "path": "users/get_current_account"}),
    )
    .await;
    assert_eq!(me["http_status"], 200, "{me}");
    assert_eq!(me["body"]["name"]["display_name"], "Alice Example");
    let (_, refused) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "dropbox", "method": "GET", "path": "users/get_current_account"}),
        )
        .await;
    assert_eq!(refused["result"]["isError"], true, "only POST: {refused}");
    // Its revocation endpoint sits beneath the API base: not for the model.
    let (_, revoke) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "dropbox", "method": "POST", "path": "auth/token/revoke"}),
        )
        .await;
    assert_eq!(revoke["result"]["isError"], true, "{revoke}");
    assert_eq!(
        revoke["result"]["structuredContent"]["error"]["kind"], "refused",
        "{revoke}"
    );
    assert_eq!(fake.calls().revoke, 0);
    // Nor anything else beneath `auth/` (the entry's `grant_paths`: Dropbox
    // also mints tokens there), however the path is spelled.
    let (_, minted) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "dropbox", "method": "POST", "path": "Auth//token/from_oauth1"}),
        )
        .await;
    assert_eq!(
        minted["result"]["structuredContent"]["error"]["kind"], "refused",
        "{minted}"
    );

    // Expired: refreshed with the refresh grant, twice with the same
    // refresh token (Dropbox sends no new one).
    for round in 1..=2 {
        expire(&app, &fake).await;
        let me = api(
            &app,
            json!({"provider": "dropbox", "method": "POST", "path": "users/get_current_account"}),
        )
        .await;
        assert_eq!(me["http_status"], 200, "{me}");
        assert_eq!(fake.calls().refresh, round);
    }
    assert!(connection_has(&app, "refresh_token IS NOT NULL").await);
    assert_eq!(live_access_tokens(&fake).await, 1, "the latest one only");

    // Disconnect revokes with the access token, which ends the grant.
    disconnect(&app, "dropbox").await;
    assert_eq!(
        fake.calls().revoke,
        1,
        "the access token, not the refresh token"
    );
    assert_eq!(live_access_tokens(&fake).await, 0);
    assert_eq!(revocation_audited(&app).await, "revoked_upstream");
}

/// Without `token_access_type=offline` the fake, like Dropbox, gives no
/// refresh token: an expired token then needs the user again.
#[tokio::test]
async fn without_the_offline_parameter_there_is_nothing_to_refresh_with() {
    let fake = dropbox::start().await;
    let app = app_with_edit(
        &fake,
        "dropbox",
        "authorize_params = { token_access_type = \"online\" }",
    )
    .await;
    connect(&app, &fake, "dropbox").await;
    assert!(connection_has(&app, "refresh_token IS NULL").await);
    expire(&app, &fake).await;
    let (_, again) = app
        .call_tool("alice", "whoami", json!({"provider": "dropbox"}))
        .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(fake.calls().refresh, 0);
}

#[tokio::test]
async fn rmcp_connects_dropbox_and_completes_the_rpc_call() {
    let fake = dropbox::start().await;
    let app = app_with(&fake, "dropbox").await;
    let content = rmcp_api(
        &app,
        &fake,
        json!({"provider": "dropbox", "method": "POST", "path": "files/list_folder",
               "body": {"path": "/Documents"}}),
    )
    .await;
    assert_eq!(
        content["body"]["entries"][0]["path_display"],
        "/Documents/Prime_Numbers.txt"
    );
}

/// Dropbox revokes only with a live access token as credential: after the
/// four hours, disconnect refreshes once to end the grant.
#[tokio::test]
async fn disconnect_after_expiry_still_ends_the_grant() {
    let fake = dropbox::start().await;
    let app = app_with(&fake, "dropbox").await;
    connect(&app, &fake, "dropbox").await;
    expire(&app, &fake).await;
    assert_eq!(live_access_tokens(&fake).await, 0);
    disconnect(&app, "dropbox").await;
    assert_eq!(fake.calls().refresh, 1, "a token to revoke with");
    assert_eq!(fake.calls().revoke, 1);
    assert_eq!(live_access_tokens(&fake).await, 0, "the new one is revoked");
    assert_eq!(revocation_audited(&app).await, "revoked_upstream");
    // The refresh token died with it.
    let refresh = fake
        .issued()
        .into_iter()
        .find(|t| !t.starts_with("sl.") && t.len() > 43)
        .unwrap();
    assert_eq!(
        fake.refresh_status("/oauth2/token", &refresh)
            .await
            .unwrap(),
        400
    );
}

/// A revocation tried again after one whose answer was lost finds the
/// token gone: Dropbox's 401 `invalid_access_token` counts as ended, as
/// RFC 7009's answer to an unknown token does; `expired_access_token`
/// (a live grant's token that expired) does not.
#[tokio::test]
async fn a_token_dropbox_no_longer_knows_counts_as_revoked() {
    let fake = dropbox::start().await;
    let app = app_with(&fake, "dropbox").await;
    connect(&app, &fake, "dropbox").await;
    let issued = fake.secrets();
    let token = issued
        .iter()
        .find(|t| t.starts_with("sl."))
        .unwrap()
        .clone();
    let state = &app.state.connect;
    let dropbox = state.provider("dropbox").unwrap();
    let hint = mcp_connect::providers::TokenHint::AccessToken;
    let params = Default::default();
    let http = reqwest::Client::builder()
        .user_agent("mcp-connect")
        .build()
        .unwrap();
    expire(&app, &fake).await;
    assert!(
        dropbox.revoke(&http, &token, hint, &params).await.is_err(),
        "an expired token of a live grant is no revocation"
    );
    assert!(
        dropbox
            .revoke(&http, "sl.never-issued", hint, &params)
            .await
            .is_ok()
    );
    assert_eq!(fake.calls().revoke, 2);
}

/// What the `revoked_upstream` rows of `app` say was left to revoke.
async fn already_ended(app: &TestApp) -> Vec<Option<String>> {
    let sql = "SELECT detail->>'already_ended' FROM audit_events
               WHERE kind = 'revoked_upstream' ORDER BY id";
    sqlx::query_scalar(sql).fetch_all(&app.db).await.unwrap()
}

/// Without `token_access_type=offline` there is no refresh token: an
/// access token past its expiry is all there was of the grant, and dead.
/// It is not sent (Dropbox would answer 401 `expired_access_token`, a
/// failure tried again for days); the revocation ends saying so. Within
/// two minutes of the recorded expiry it is still sent (a provider may
/// honour a token a moment longer), and its failure is owed as before.
#[tokio::test]
async fn an_expired_token_with_nothing_to_renew_it_is_not_sent() {
    let fake = dropbox::start().await;
    let edit = "authorize_params = { token_access_type = \"online\" }";
    let app = app_with_edit(&fake, "dropbox", edit).await;
    connect(&app, &fake, "dropbox").await;
    assert!(connection_has(&app, "refresh_token IS NULL").await);
    expire(&app, &fake).await;

    // Just expired: sent, refused as expired, owed.
    let gone = disconnect(&app, "dropbox").await;
    assert_eq!(
        gone["result"]["structuredContent"]["revocation"], "failed",
        "{gone}"
    );
    assert_eq!(fake.calls().revoke, 1);
    let owed = "SELECT count(*) FROM pending_revocations";
    assert_eq!(crate::helpers::count(&app, owed).await, 1);

    // Long expired at the retry: ended without a call.
    sqlx::query(
        "UPDATE pending_revocations SET next_attempt_at = now(),
             access_token_expires_at = now() - interval '3 minutes'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let retried = mcp_connect::connect::vault::retry_due(&app.state.connect);
    assert_eq!(retried.await.unwrap(), 1);
    assert_eq!(fake.calls().revoke, 1, "the dead token was not sent again");
    assert_eq!(crate::helpers::count(&app, owed).await, 0);
    assert_eq!(
        already_ended(&app).await,
        [Some("access_token_expired".to_owned())]
    );
}

/// A disconnect whose expired token's refresh Dropbox refuses for good
/// (the person removed the app there: its tokens are all dead). Dropbox
/// never rotates refresh tokens, so no token of the grant can live on
/// unknown here: the revocation ends at once, saying the grant had ended,
/// rather than being given up as `refresh_token_dead` (as where a
/// rotation's answer may have been lost: see GitHub's).
#[tokio::test]
async fn a_grant_removed_at_dropbox_ends_the_revocation_owed() {
    let fake = dropbox::start().await;
    let app = app_with(&fake, "dropbox").await;
    connect(&app, &fake, "dropbox").await;
    let token = fake
        .secrets()
        .into_iter()
        .find(|t| t.starts_with("sl."))
        .unwrap();
    // The person removes the app at Dropbox: every token of the grant ends.
    let removed = provider_fakes::no_redirects()
        .post(format!("{}/2/auth/token/revoke", fake.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 200);
    expire(&app, &fake).await;
    // Past the leeway in which the expired token is sent all the same.
    let long_ago = "UPDATE connections SET access_token_expires_at = now() - interval '3 minutes'";
    sqlx::query(long_ago).execute(&app.db).await.unwrap();

    let gone = disconnect(&app, "dropbox").await;
    assert_eq!(
        gone["result"]["structuredContent"]["revocation"], "revoked",
        "{gone}"
    );
    assert_eq!(fake.calls().refresh, 1, "a refresh was tried");
    assert_eq!(fake.calls().revoke, 1, "only the person's own removal");
    assert_eq!(revocation_audited(&app).await, "revoked_upstream");
    assert_eq!(
        already_ended(&app).await,
        [Some("refresh_token_dead".to_owned())]
    );
    let abandoned = "SELECT count(*) FROM audit_events WHERE kind = 'revocation_abandoned'";
    assert_eq!(crate::helpers::count(&app, abandoned).await, 0);
}
