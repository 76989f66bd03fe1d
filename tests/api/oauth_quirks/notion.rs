//! Notion: the client authenticates only with HTTP Basic and a JSON body,
//! the token never expires (so it is never refreshed), every API call
//! carries `Notion-Version`, the account is the token's bot, and a
//! revocation sends the access token alone.

use serde_json::json;

use provider_fakes::notion;

use super::{api, app_with_edit, connection_has, rmcp_api};
use crate::{
    browser::Browser,
    full_flow::{elicit, open_and_continue},
    helpers::count,
    key_connect::disconnect,
    provider_flows::{app_with, connect},
};

#[tokio::test]
async fn notion_connects_with_basic_auth_and_a_json_body_and_is_never_refreshed() {
    let fake = notion::start().await;
    let app = app_with(&fake, "notion").await;
    let body = connect(&app, &fake, "notion").await;
    // The bot user's workspace names the account.
    assert_eq!(
        body["result"]["structuredContent"]["account"], "Acme Workspace",
        "{body}"
    );
    let authorize = fake.last_authorize().expect("authorize request");
    assert_eq!(authorize.get("owner").map(String::as_str), Some("user"));
    assert_eq!(fake.calls().token, 1, "one exchange, accepted");
    // No expiry: nothing will ever be refreshed, though Notion sent a
    // refresh token beside the access token.
    assert!(connection_has(&app, "access_token_expires_at IS NULL").await);

    // The API with its version header, as the user.
    let result = api(&app, json!({"provider": "notion", "path": "users"})).await;
    assert_eq!(result["http_status"], 200, "{result}");
    assert_eq!(result["body"]["results"][1]["type"], "bot", "{result}");
    // However old the connection, the token is used as it is.
    sqlx::query("UPDATE connections SET updated_at = now() - interval '400 days'")
        .execute(&app.db)
        .await
        .unwrap();
    let again = api(&app, json!({"provider": "notion", "path": "users/me"})).await;
    assert_eq!(again["http_status"], 200, "{again}");
    assert_eq!(fake.calls().refresh, 0, "never refreshed");
    assert_eq!(fake.calls().token, 1);

    // Disconnect revokes at Notion: the token alone, with the client and
    // the version header; the token is dead there afterwards.
    let token = fake
        .issued()
        .into_iter()
        .find(|t| t.starts_with("ntn_"))
        .expect("an access token");
    let gone = disconnect(&app, "notion").await;
    assert_eq!(fake.calls().revoke, 1);
    assert_eq!(gone["result"]["isError"], false, "{gone}");
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "revoked", "{gone}");
    assert_eq!(result["next_step"], "none", "{gone}");
    let me = provider_fakes::no_redirects()
        .get(format!("{}/v1/users/me", fake.base))
        .bearer_auth(&token)
        .header("notion-version", "2022-06-28")
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 401, "the token still works at Notion");
}

/// Notion's revocation wants its version header and the token alone: an
/// RFC 7009 revocation (no version header, a `token_type_hint`) is refused
/// there, and the disconnect says the access may still be live.
#[tokio::test]
async fn notion_refuses_an_rfc_7009_revocation() {
    let fake = notion::start().await;
    let app = app_with_edit(&fake, "notion", "revocation = \"rfc7009\"").await;
    connect(&app, &fake, "notion").await;
    let gone = disconnect(&app, "notion").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["connection"], "disconnected", "{gone}");
    assert_eq!(result["revocation"], "failed", "{gone}");
}

#[tokio::test]
async fn rmcp_connects_notion_and_completes_the_api_call() {
    let fake = notion::start().await;
    let app = app_with(&fake, "notion").await;
    let content = rmcp_api(&app, &fake, json!({"provider": "notion", "path": "users"})).await;
    assert_eq!(
        content["body"]["results"][1]["bot"]["workspace_name"],
        "Acme Workspace"
    );
}

/// Connects through the pages with an entry edited by `edit`; `true` when
/// the connection was made.
async fn connects_with(edit: &str) -> (bool, provider_fakes::Calls) {
    let fake = notion::start().await;
    let app = app_with_edit(&fake, "notion", edit).await;
    let (url, _) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "notion"}),
        "connect_notion",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let done = browser.get(callback.as_str()).await;
    let connected = count(&app, "SELECT count(*) FROM connections").await == 1;
    assert_eq!(
        connected,
        done.body.contains("connected as"),
        "{}",
        done.body
    );
    (connected, fake.calls())
}

/// The fake holds the entry to Notion's rules: the shipped entry connects,
/// and the same entry without Basic, with a form body, or without the
/// version header does not.
#[tokio::test]
async fn the_notion_entry_connects_only_with_each_of_its_quirks() {
    assert!(connects_with("").await.0, "the shipped entry");
    let (connected, calls) = connects_with("token_auth_method = \"client_secret_post\"").await;
    assert!(!connected, "a secret in the body is refused");
    assert_eq!((calls.token, calls.userinfo), (1, 0));
    let (connected, calls) = connects_with("token_request_format = \"form\"").await;
    assert!(!connected, "a form body is refused");
    assert_eq!((calls.token, calls.userinfo), (1, 0));
    let (connected, calls) = connects_with("api_headers = { notion-version = \"\" }").await;
    assert!(!connected, "the identity wants its version header");
    assert_eq!((calls.token, calls.userinfo), (1, 1));
}
