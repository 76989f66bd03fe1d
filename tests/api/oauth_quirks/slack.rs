//! Slack with writes allowed: an operator who adds POST to the entry's
//! methods lets the model call any Web API method (`slack_method` then stops
//! asking for a reading verb), so what still keeps it from ending the grant
//! or uninstalling the app is the entry's `grant_paths` and the methods
//! `slack_method` never lets through, whatever the HTTP method.

use serde_json::json;

use provider_fakes::slack;

use super::{api, app_with_edit};
use crate::provider_flows::connect;

#[tokio::test]
async fn with_post_allowed_the_grant_methods_stay_out_of_reach() {
    let fake = slack::start().await;
    let app = app_with_edit(
        &fake,
        "slack",
        r#"allowed_methods = ["GET", "HEAD", "POST"]"#,
    )
    .await;
    connect(&app, &fake, "slack").await;
    let before = fake.calls();

    // A method that writes goes through now: the fake answers it (it knows
    // no such method, so Slack's 404 envelope), which shows it was sent.
    let posted = api(
        &app,
        json!({"provider": "slack", "method": "POST", "path": "chat.postMessage",
               "body": {"channel": "C1", "text": "hi"}}),
    )
    .await;
    assert_eq!(posted["http_status"], 404, "{posted}");
    assert_eq!(posted["body"]["req_method"], "chat.postMessage", "{posted}");
    assert_eq!(fake.calls().api, before.api + 1);

    // Each grant path, however it is spelled, by POST and by GET: refused
    // before anything is sent.
    for path in [
        "apps.uninstall",
        "Apps.Uninstall",
        "apps.uninstall/",
        "tooling.tokens.rotate",
        "openid.connect.token",
        "oauth.v2.exchange",
        "auth.revoke",
        "AUTH.REVOKE",
    ] {
        for method in ["POST", "GET"] {
            let (_, body) = app
                .call_tool(
                    "alice",
                    "api_request",
                    json!({"provider": "slack", "method": method, "path": path}),
                )
                .await;
            let result = &body["result"];
            assert_eq!(result["isError"], true, "{method} {path}: {body}");
            assert_eq!(
                result["structuredContent"]["error"]["kind"], "refused",
                "{method} {path}: {body}"
            );
        }
    }
    let after = fake.calls();
    assert_eq!(after.api, before.api + 1, "no grant method reached Slack");
    assert_eq!(after.revoke, 0);

    // The connection still works.
    let listed = api(
        &app,
        json!({"provider": "slack", "method": "GET", "path": "users.list"}),
    )
    .await;
    assert_eq!(listed["http_status"], 200, "{listed}");
    assert_eq!(listed["body"]["ok"], true, "{listed}");
}

/// Disconnect ends the user token at Slack (`auth.revoke`): a user token
/// does not expire, so forgetting it here would leave it live there.
#[tokio::test]
async fn disconnect_revokes_the_user_token_at_slack() {
    let fake = slack::start().await;
    let app = crate::provider_flows::app_with(&fake, "slack").await;
    connect(&app, &fake, "slack").await;
    let token = fake
        .issued()
        .into_iter()
        .find(|t| t.starts_with("xoxp-"))
        .expect("a user token");
    let auth_test = || async {
        let answer = provider_fakes::no_redirects()
            .post(format!("{}/api/auth.test", fake.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        answer.json::<serde_json::Value>().await.unwrap()
    };
    assert_eq!(auth_test().await["ok"], true, "live before");
    let gone = crate::key_connect::disconnect(&app, "slack").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["revocation"], "revoked", "{gone}");
    assert_eq!(fake.calls().revoke, 1);
    // The token is dead at Slack now.
    let answer = auth_test().await;
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["error"], "invalid_auth", "{answer}");
}
