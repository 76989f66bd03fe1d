//! An Atlassian-like provider: the site's cloud id is looked up after
//! consent and addresses the API; refresh tokens rotate, so each refresh
//! must use the token the last one answered.

use serde_json::json;

use provider_fakes::{atlassian, no_redirects};

use super::{api_args, call, connect_with, expire, retry, stored_params};
use crate::{key_connect::disconnect, provider_flows::app_with};

#[tokio::test]
async fn the_cloud_id_looked_up_after_consent_addresses_the_api_and_refresh_rotates() {
    let fake = atlassian::start().await;
    let app = app_with(&fake, "atlassian").await;
    let args = api_args("atlassian", "rest/api/3/myself");
    let (_, done, state) = connect_with(&app, &fake, &args, &[]).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(
        done.body.contains("connected as alice@acme.example"),
        "{}",
        done.body
    );
    let authorize = fake.last_authorize().unwrap();
    assert_eq!(authorize["audience"], "api.atlassian.com");
    assert_eq!(
        stored_params(&app).await,
        json!({"cloud_id": atlassian::CLOUD_ID})
    );

    let body = retry(&app, &args, &state).await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(
        result["body"]["accountId"], "5b10ac8d82e05b22cc7d4ef5",
        "{body}"
    );
    let (_, path) = fake.api_seen().pop().unwrap();
    assert_eq!(
        path,
        format!("/ex/jira/{}/rest/api/3/myself", atlassian::CLOUD_ID)
    );

    // Two refreshes: the second must present the token the first answered.
    for round in 1..=2 {
        expire(&app).await;
        let refreshed = call(&app, &args).await;
        assert_eq!(
            refreshed["http_status"], 200,
            "refresh {round}: {refreshed}"
        );
        assert_eq!(fake.calls().refresh, round);
    }
    let tokens = fake.refresh_tokens();
    assert_eq!(tokens.len(), 3);
    // The fake refuses a used refresh token, as Atlassian does.
    let old = no_redirects()
        .post(format!("{}/oauth/token", fake.base))
        .json(
            &json!({"grant_type": "refresh_token", "client_id": fake.client_id(),
                      "client_secret": fake.client_secret(), "refresh_token": tokens[0]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 403);
    let answer: serde_json::Value = old.json().await.unwrap();
    assert_eq!(answer["error"], "invalid_grant", "{answer}");

    let before = fake.calls();
    disconnect(&app, "atlassian").await;
    assert_eq!(fake.calls(), before, "Atlassian has no revocation endpoint");
    crate::logs::assert_absent(&fake.secrets());
}

/// Atlassian answers a request its token lacks the scope for with HTTP 401
/// ("Unauthorized; scope does not match"), though the token is fine: that
/// must not send the user to connect again.
#[tokio::test]
async fn a_401_for_a_missing_scope_leaves_a_working_connection_alone() {
    let fake = atlassian::start().await;
    let app = app_with(&fake, "atlassian").await;
    let args = api_args("atlassian", "rest/api/3/myself");
    let (_, done, _) = connect_with(&app, &fake, &args, &[]).await;
    assert_eq!(done.status, 200, "{}", done.body);

    let board = call(&app, &api_args("atlassian", "rest/agile/1.0/board")).await;
    assert_eq!(board["http_status"], 401, "{board}");
    assert_eq!(board["error"]["kind"], "http_error", "{board}");
    assert_eq!(board["next_step"], "approve", "{board}");
    let status: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "active");
    let again = call(&app, &args).await;
    assert_eq!(again["http_status"], 200, "{again}");
}
