//! The GitHub fake's deletion of an app's grant and of an app's token,
//! and its check of an app's token, as GitHub documents them ("Delete an
//! app authorization", "Delete an app token", "Check a token").

use crate::{FakeProvider, github, no_redirects};

/// The status of a deletion of `token`'s grant, the client sent as
/// `client` in HTTP Basic (none: no credential at all).
async fn delete_grant(fake: &FakeProvider, client: Option<(&str, &str)>, token: &str) -> u16 {
    delete(fake, "grant", client, token).await
}

/// The status of `DELETE /applications/{client_id}/{what}` for `token`.
async fn delete(fake: &FakeProvider, what: &str, client: Option<(&str, &str)>, token: &str) -> u16 {
    let mut request = no_redirects()
        .delete(format!(
            "{}/applications/{}/{what}",
            fake.base,
            fake.client_id()
        ))
        .header("user-agent", "a-test")
        .json(&serde_json::json!({ "access_token": token }));
    if let Some((id, secret)) = client {
        request = request.basic_auth(id, Some(secret));
    }
    request.send().await.unwrap().status().as_u16()
}

/// `POST /applications/{client_id}/token` for `token` from `client`
/// (none: no credential at all): the status and the JSON body, if any.
async fn check(
    fake: &FakeProvider,
    client_id: &str,
    client: Option<(&str, &str)>,
    token: &str,
) -> (u16, serde_json::Value) {
    let mut request = no_redirects()
        .post(format!("{}/applications/{client_id}/token", fake.base))
        .header("user-agent", "a-test")
        .json(&serde_json::json!({ "access_token": token }));
    if let Some((id, secret)) = client {
        request = request.basic_auth(id, Some(secret));
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or_default())
}

/// The status GitHub's `/user` answers `token`.
async fn user_status(fake: &FakeProvider, token: &str) -> u16 {
    fake.bearer_status("/user", token).await.unwrap()
}

#[tokio::test]
async fn deleting_the_grant_ends_every_token_of_the_account_and_no_other() {
    let fake = github::start().await;
    let (first, _) = fake.issue_grant("read:user", false);
    let (second, _) = fake.issue_grant("repo", false);
    fake.set_account("1", "someone-else");
    let (other, _) = fake.issue_grant("read:user", false);
    let client = (fake.client_id(), fake.client_secret());
    assert_eq!(delete_grant(&fake, Some(client), &first).await, 204);
    assert_eq!(user_status(&fake, &first).await, 401);
    assert_eq!(user_status(&fake, &second).await, 401, "the same account's");
    assert_eq!(user_status(&fake, &other).await, 200, "another account's");
    // Gone now: GitHub's one documented refusal.
    assert_eq!(delete_grant(&fake, Some(client), &first).await, 422);
}

#[tokio::test]
async fn the_client_must_authenticate_with_its_secret() {
    let fake = github::start().await;
    let (token, _) = fake.issue_grant("read:user", false);
    let wrong = (fake.client_id(), "not-the-secret");
    assert_eq!(delete_grant(&fake, Some(wrong), &token).await, 401);
    assert_eq!(delete_grant(&fake, None, &token).await, 404);
    assert_eq!(user_status(&fake, &token).await, 200, "still live");
    let answer = no_redirects()
        .delete(format!(
            "{}/applications/{}/grant",
            fake.base,
            fake.client_id()
        ))
        .basic_auth(fake.client_id(), Some(fake.client_secret()))
        .json(&serde_json::json!({ "access_token": token }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403, "no User-Agent");
    assert_eq!(fake.calls().revoke, 3);
}

#[tokio::test]
async fn deleting_a_token_ends_that_token_alone() {
    let fake = github::start().await;
    let (first, _) = fake.issue_grant("read:user", false);
    let (second, _) = fake.issue_grant("repo", false);
    let client = (fake.client_id(), fake.client_secret());
    assert_eq!(delete(&fake, "token", Some(client), &first).await, 204);
    assert_eq!(user_status(&fake, &first).await, 401);
    assert_eq!(
        user_status(&fake, &second).await,
        200,
        "the account's other token"
    );
    assert_eq!(delete(&fake, "token", Some(client), &first).await, 422);
    let wrong = (fake.client_id(), "not-the-secret");
    assert_eq!(delete(&fake, "token", Some(wrong), &second).await, 401);
    assert_eq!(delete(&fake, "token", None, &second).await, 404);
    assert_eq!(fake.calls().revoke, 4);
}

#[tokio::test]
async fn another_last_segment_is_no_deletion() {
    let fake = github::start().await;
    let (token, _) = fake.issue_grant("read:user", false);
    let client = (fake.client_id(), fake.client_secret());
    for other in ["tokens", "grants", "grant/x", "token/x", "x"] {
        assert_eq!(
            delete(&fake, other, Some(client), &token).await,
            404,
            "{other}"
        );
    }
    assert_eq!(user_status(&fake, &token).await, 200, "still live");
    assert_eq!(fake.calls().revoke, 0, "not taken for a deletion");
}

#[tokio::test]
async fn checking_a_live_token_shows_its_authorization_and_ends_nothing() {
    let fake = github::start().await;
    let (token, _) = fake.issue_grant("read:user,repo", false);
    let client = (fake.client_id(), fake.client_secret());
    let (status, body) = check(&fake, fake.client_id(), Some(client), &token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token"], token);
    assert_eq!(body["token_last_eight"], token[token.len() - 8..]);
    assert_eq!(body["scopes"], serde_json::json!(["read:user", "repo"]));
    assert_eq!(body["app"]["client_id"], fake.client_id());
    assert_eq!(body["user"]["login"], "octocat");
    assert_eq!(body["user"]["id"], 583231);
    for field in ["id", "url", "created_at", "updated_at"] {
        assert!(!body[field].is_null(), "{field}: {body}");
    }
    assert_eq!(user_status(&fake, &token).await, 200, "still live");
    assert_eq!(fake.calls().check, 1);
    assert_eq!(fake.calls().revoke, 0, "a check is no deletion");
}

#[tokio::test]
async fn checking_a_token_github_does_not_know_answers_404() {
    let fake = github::start().await;
    let (token, _) = fake.issue_grant("read:user", false);
    let client = (fake.client_id(), fake.client_secret());
    assert_eq!(delete(&fake, "token", Some(client), &token).await, 204);
    let (status, body) = check(&fake, fake.client_id(), Some(client), &token).await;
    assert_eq!(status, 404, "deleted: {body}");
    assert_eq!(body["message"], "Not Found");
    let (status, _) = check(&fake, fake.client_id(), Some(client), "gho_never").await;
    assert_eq!(status, 404, "never issued");
    let (expiring, _) = fake.issue_grant("read:user", false);
    fake.expire_access_tokens();
    let (status, _) = check(&fake, fake.client_id(), Some(client), &expiring).await;
    assert_eq!(status, 404, "expired");
    assert_eq!(fake.calls().check, 3, "answered by the check itself");
    assert_eq!(fake.calls().revoke, 1, "the deletion alone");
}

#[tokio::test]
async fn a_check_wants_the_app_its_path_names() {
    let fake = github::start().await;
    let (token, _) = fake.issue_grant("read:user", false);
    let id = fake.client_id();
    let wrong = (id, "not-the-secret");
    assert_eq!(check(&fake, id, Some(wrong), &token).await.0, 401);
    assert_eq!(check(&fake, id, None, &token).await.0, 404);
    let client = (id, fake.client_secret());
    let other = check(&fake, "Iv1.another0client", Some(client), &token).await;
    assert_eq!(other.0, 404, "another app's path");
    let answer = no_redirects()
        .post(format!("{}/applications/{id}/token", fake.base))
        .basic_auth(id, Some(fake.client_secret()))
        .json(&serde_json::json!({ "access_token": token }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403, "no User-Agent");
    assert_eq!(user_status(&fake, &token).await, 200, "still live");
    assert_eq!(fake.calls().check, 4);
    assert_eq!(fake.calls().revoke, 0);
}
