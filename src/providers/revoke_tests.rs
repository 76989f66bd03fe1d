//! GitHub's deletion of an app token answered 422: GitHub's check of the
//! token decides whether it was already ended, and is counted as a call of
//! its own; a deletion configured at `…/grant` is checked at `…/token`.

use provider_fakes::FakeProvider;

use crate::{
    metrics::Call,
    providers::{
        Provider, ProviderCatalog, ProviderError, TokenHint,
        test_catalog::{Fakes, catalog_of_tables, http},
    },
};

/// Revokes access token `token` at `provider`.
async fn revoke(provider: &Provider, token: &str) -> Result<(), ProviderError> {
    let params = Default::default();
    provider
        .revoke(&http(), token, TokenHint::AccessToken, &params)
        .await
}

#[actix_web::test]
async fn a_token_github_no_longer_knows_counts_as_revoked() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let gh = catalog.get("github").unwrap();
    let (token, _) = fakes.github.issue_grant("repo", false);
    revoke(gh, &token).await.unwrap();
    // Deleted already, as by an attempt whose answer was lost.
    revoke(gh, &token).await.unwrap();
    let path = format!("/applications/{}/token", fakes.github.client_id());
    let seen = fakes.github.seen(&path);
    let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(methods, ["DELETE", "DELETE", "POST"]);
    let (deletion, check) = (&seen[1], &seen[2]);
    assert_eq!(check.body, deletion.body);
    for header in [
        "authorization",
        "accept",
        "x-github-api-version",
        "user-agent",
    ] {
        assert_eq!(check.headers[header], deletion.headers[header], "{header}");
    }
    assert_eq!(gh.calls.count(Call::Revoke, "ok"), 1);
    assert_eq!(gh.calls.count(Call::Revoke, "http_error"), 1);
    assert_eq!(gh.calls.count(Call::TokenCheck, "http_error"), 1);
    assert_eq!(fakes.github.calls().check, 1);
}

/// GitHub answers a flooded endpoint 422 too: a token its check still
/// shows is not taken for an ended one, and the deletion's failure is
/// what the caller hears.
#[actix_web::test]
async fn a_live_token_after_a_422_is_a_failure() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let gh = catalog.get("github").unwrap();
    let (token, _) = fakes.github.issue_grant("repo", false);
    fakes.github.fail_next(1, 422);
    let e = revoke(gh, &token).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status(422)), "{e}");
    assert!(!e.to_string().contains(&token), "{e}");
    assert!(!e.to_string().contains(fakes.github.client_secret()), "{e}");
    assert_eq!(gh.calls.count(Call::TokenCheck, "ok"), 1);
    assert_eq!(fakes.github.calls().check, 1);
    assert_eq!(
        fakes.github.bearer_status("/user", &token).await.unwrap(),
        200
    );

    // The check flooded as well, or not there at all: the failure stands.
    fakes.github.fail_next(2, 422);
    let e = revoke(gh, &token).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status(422)), "{e}");
    assert_eq!(gh.calls.count(Call::TokenCheck, "http_error"), 1);
}

/// Other providers' failures, and GitHub's other refusals, ask nothing
/// more.
#[actix_web::test]
async fn no_other_answer_is_checked() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let gh = catalog.get("github").unwrap();
    let (token, _) = fakes.github.issue_grant("repo", false);
    for status in [401, 404, 500] {
        fakes.github.fail_next(1, status);
        let e = revoke(gh, &token).await.unwrap_err();
        assert!(matches!(e, ProviderError::Status(s) if s == status), "{e}");
    }
    fakes.google.fail_next(1, 422);
    let google = catalog.get("google").unwrap();
    assert!(revoke(google, "ya29.x").await.is_err());
    assert_eq!(gh.calls.count(Call::TokenCheck, "ok"), 0);
    assert_eq!(gh.calls.count(Call::TokenCheck, "http_error"), 0);
    assert_eq!(google.calls.count(Call::TokenCheck, "http_error"), 0);
    assert_eq!(fakes.github.calls().check, 0);
}

/// A catalog whose `github` deletes at the fake's
/// `/applications/{client_id}/{last}`.
fn deleting_at(fake: &FakeProvider, last: &str) -> ProviderCatalog {
    let mut table = toml::Table::new();
    fake.configure(&mut table, "github");
    let url = format!("{}/applications/{{client_id}}/{last}", fake.base);
    table["providers"]["github"]["revocation_url"] = url.into();
    catalog_of_tables(&toml::to_string(&table).unwrap())
}

/// A revocation configured as GitHub's deletion of the whole grant
/// (`…/grant`) asks the check at `…/token`, not at a path GitHub serves no
/// POST at, whose 404 would say nothing of the token.
#[actix_web::test]
async fn a_grant_deletion_asks_the_check_beside_it() {
    let fake = provider_fakes::github::start().await;
    let catalog = deleting_at(&fake, "grant");
    let gh = catalog.get("github").unwrap();
    let (token, _) = fake.issue_grant("repo", false);
    fake.fail_next(1, 422);
    let e = revoke(gh, &token).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status(422)), "{e}");
    revoke(gh, &token).await.unwrap();
    revoke(gh, &token).await.unwrap();
    let id = fake.client_id();
    let methods =
        |path: String| -> Vec<String> { fake.seen(&path).into_iter().map(|s| s.method).collect() };
    assert_eq!(methods(format!("/applications/{id}/grant")), ["DELETE"; 3]);
    assert_eq!(methods(format!("/applications/{id}/token")), ["POST"; 2]);
    assert_eq!(gh.calls.count(Call::TokenCheck, "ok"), 1, "live at first");
    assert_eq!(gh.calls.count(Call::TokenCheck, "http_error"), 1);
}

/// GitHub's deletion of a token ends that token only; configured as the
/// deletion of the grant it ends every token of the app for the user, so
/// another connection of the same account is spared it.
#[actix_web::test]
async fn only_a_grant_deletion_may_end_the_whole_grant() {
    let fake = provider_fakes::github::start().await;
    let token = deleting_at(&fake, "token");
    assert!(!token.get("github").unwrap().revocation_may_end_the_grant());
    let grant = deleting_at(&fake, "grant");
    assert!(grant.get("github").unwrap().revocation_may_end_the_grant());
    let with_query = deleting_at(&fake, "grant?via=disconnect");
    assert!(
        with_query
            .get("github")
            .unwrap()
            .revocation_may_end_the_grant()
    );
}

/// A deletion at a path GitHub's reference does not describe has no check
/// beside it: its 422 stands.
#[actix_web::test]
async fn a_deletion_elsewhere_asks_nothing_more() {
    let fake = provider_fakes::github::start().await;
    let catalog = deleting_at(&fake, "tokens");
    let gh = catalog.get("github").unwrap();
    let (token, _) = fake.issue_grant("repo", false);
    fake.fail_next(1, 422);
    let e = revoke(gh, &token).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status(422)), "{e}");
    assert_eq!(gh.calls.count(Call::TokenCheck, "ok"), 0);
    assert_eq!(gh.calls.count(Call::TokenCheck, "http_error"), 0);
    assert_eq!(fake.calls().check, 0);
}
