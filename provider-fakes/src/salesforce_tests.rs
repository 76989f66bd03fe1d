//! The Salesforce fake's revocation, as Salesforce documents it ("Revoke
//! OAuth Tokens"): an access token ends alone, a refresh token takes its
//! access tokens with it, and a token it does not know is `invalid_token`.

use serde_json::Value;

use crate::{FakeProvider, no_redirects, salesforce};

const TOKEN: &str = "/services/oauth2/token";

/// The status and JSON body of a revocation of `token`.
async fn revoke(fake: &FakeProvider, token: &str) -> (u16, Value) {
    let answer = no_redirects()
        .post(format!("{}/services/oauth2/revoke", fake.base))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// The status of `/services/oauth2/userinfo` with `access_token`.
async fn userinfo_status(fake: &FakeProvider, access_token: &str) -> u16 {
    no_redirects()
        .get(format!("{}/services/oauth2/userinfo", fake.base))
        .bearer_auth(access_token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn revoking_an_access_token_leaves_its_refresh_token_working() {
    let fake = salesforce::start().await;
    let (access, refresh) = fake.issue_grant("api refresh_token", true);
    let refresh = refresh.unwrap();
    assert_eq!(revoke(&fake, &access).await.0, 200);
    assert_eq!(
        userinfo_status(&fake, &access).await,
        403,
        "the access token ended"
    );
    assert_eq!(fake.refresh_status(TOKEN, &refresh).await.unwrap(), 200);
}

#[tokio::test]
async fn revoking_a_refresh_token_ends_its_access_tokens_too() {
    let fake = salesforce::start().await;
    let (access, refresh) = fake.issue_grant("api refresh_token", true);
    let refresh = refresh.unwrap();
    assert_eq!(revoke(&fake, &refresh).await.0, 200);
    assert_eq!(fake.refresh_status(TOKEN, &refresh).await.unwrap(), 400);
    assert_eq!(userinfo_status(&fake, &access).await, 403);
}

#[tokio::test]
async fn a_token_it_does_not_know_is_invalid() {
    let fake = salesforce::start().await;
    let (access, _) = fake.issue_grant("api", false);
    assert_eq!(revoke(&fake, &access).await.0, 200);
    for token in [access.as_str(), "never-issued"] {
        let (status, body) = revoke(&fake, token).await;
        assert_eq!(status, 400, "{token}");
        assert_eq!(body["error"], "invalid_token", "{token}");
    }
}
