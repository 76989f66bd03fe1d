//! The GitHub fake's deletion of an app's grant and of an app's token, as
//! GitHub documents them ("Delete an app authorization", "Delete an app
//! token").

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
