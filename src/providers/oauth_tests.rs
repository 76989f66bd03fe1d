//! Tests of `oauth`: code exchange, refresh and revocation against the fake
//! providers, each with its quirks.

use std::time::Duration;

use provider_fakes::{
    FakeProvider,
    scripted::{DEMO_TOKEN, RFC_TOKEN},
};
use secrecy::ExposeSecret;

use crate::providers::{
    Provider, ProviderError, TokenHint,
    test_catalog::{Fakes, http},
};

/// A code the fake issued for `provider`'s callback, as after consent.
fn code_for(fake: &FakeProvider, provider: &Provider, params: &[(&str, &str)]) -> String {
    let mut all = vec![("redirect_uri", provider.redirect_uri())];
    all.extend_from_slice(params);
    fake.issue_code(&all)
}

/// The last `n` values the fake issued, oldest first.
fn last_issued(fake: &FakeProvider, n: usize) -> Vec<String> {
    let issued = fake.issued();
    issued[issued.len() - n..].to_vec()
}

#[actix_web::test]
async fn github_exchange_asks_for_json_and_posts_the_secret() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let gh = catalog.get("github").unwrap();
    let code = code_for(&fakes.github, gh, &[("scope", "repo read:user")]);
    let t = gh
        .exchange_code(&http(), &code, "verifier-1")
        .await
        .unwrap();
    assert_eq!(
        t.access_token.expose_secret(),
        last_issued(&fakes.github, 1)[0]
    );
    assert_eq!(t.scopes.unwrap(), vec!["repo", "read:user"]);
    assert!(t.refresh_token.is_none() && t.expires_in.is_none());
    let seen = &fakes.github.seen("/login/oauth/access_token")[0];
    assert_eq!(seen.headers["accept"], "application/json");
    assert!(!seen.headers.contains_key("authorization"));
    assert_eq!(seen.form["grant_type"], "authorization_code");
    assert_eq!(seen.form["client_id"], fakes.github.client_id());
    assert_eq!(seen.form["client_secret"], fakes.github.client_secret());
    assert_eq!(seen.form["code_verifier"], "verifier-1");
    assert_eq!(
        seen.form["redirect_uri"],
        format!("{}/oauth/callback/github", fakes.base())
    );
}

#[actix_web::test]
async fn github_form_encoded_answers_and_200_errors() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    fakes.github.answer_form_encoded(true);
    let form_only = catalog.get("ghform").unwrap();
    let code = code_for(&fakes.github, form_only, &[("scope", "repo")]);
    let t = form_only.exchange_code(&http(), &code, "v").await.unwrap();
    assert_eq!(
        t.access_token.expose_secret(),
        last_issued(&fakes.github, 1)[0]
    );
    assert_eq!(t.token_type, "bearer");
    // `bad_verification_code` arrives with HTTP 200, form-encoded here.
    let e = form_only
        .exchange_code(&http(), "gh-wrong", "v")
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
    fakes.github.answer_form_encoded(false);
    let gh = catalog.get("github").unwrap();
    let e = gh
        .exchange_code(&http(), "gh-wrong", "v")
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
}

#[actix_web::test]
async fn github_app_tokens_refresh_and_expire() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    // A GitHub App with expiring user tokens.
    fakes
        .github
        .set_access_ttl(Some(Duration::from_secs(28800)));
    let (_, refresh) = fakes.github.issue_grant("", true);
    let gh = catalog.get("github").unwrap();
    let t = gh
        .refresh(&http(), &refresh.unwrap(), &Default::default())
        .await
        .unwrap();
    let [access, next] = <[String; 2]>::try_from(last_issued(&fakes.github, 2)).unwrap();
    assert_eq!(t.access_token.expose_secret(), access);
    assert_eq!(t.refresh_token.unwrap().expose_secret(), next);
    assert_eq!(t.expires_in, Some(Duration::from_secs(28800)));
    assert_eq!(t.scopes.unwrap(), Vec::<String>::new());
    let e = gh
        .refresh(&http(), "ghr_dead", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
}

#[actix_web::test]
async fn google_exchange_and_refresh_without_a_new_refresh_token() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let google = catalog.get("google").unwrap();
    let offline = [
        ("scope", "openid email"),
        ("access_type", "offline"),
        ("prompt", "consent"),
    ];
    let code = code_for(&fakes.google, google, &offline);
    let t = google.exchange_code(&http(), &code, "v").await.unwrap();
    let [access, refresh] = <[String; 2]>::try_from(last_issued(&fakes.google, 2)).unwrap();
    assert_eq!(t.access_token.expose_secret(), access);
    assert_eq!(t.refresh_token.unwrap().expose_secret(), refresh);
    assert_eq!(t.expires_in, Some(Duration::from_secs(3599)));
    assert_eq!(t.token_type, "Bearer");
    let t = google
        .refresh(&http(), &refresh, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        t.access_token.expose_secret(),
        last_issued(&fakes.google, 1)[0]
    );
    assert!(t.refresh_token.is_none(), "keep the old one");
    // RFC 6749 §5.2: HTTP 400 with `error: invalid_grant`.
    let e = google
        .refresh(&http(), "1//revoked", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
    // A code works once.
    let e = google.exchange_code(&http(), &code, "v").await.unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
}

#[actix_web::test]
async fn slack_user_token_comes_from_authed_user() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let slack = catalog.get("slack").unwrap();
    let user_scope = [
        ("user_scope", "channels:read,chat:write"),
        ("scope", "commands"),
    ];
    let code = code_for(&fakes.slack, slack, &user_scope);
    let t = slack.exchange_code(&http(), &code, "v").await.unwrap();
    let user_token = fakes
        .slack
        .issued()
        .into_iter()
        .find(|t| t.starts_with("xoxp-"))
        .unwrap();
    assert_eq!(
        t.access_token.expose_secret(),
        user_token,
        "not the bot token"
    );
    assert_eq!(t.token_type, "user");
    assert_eq!(t.scopes.unwrap(), vec!["channels:read", "chat:write"]);
    assert!(t.refresh_token.is_none());
    // With token rotation on.
    fakes.slack.set_access_ttl(Some(Duration::from_secs(43200)));
    let code = code_for(&fakes.slack, slack, &user_scope);
    let t = slack.exchange_code(&http(), &code, "v").await.unwrap();
    let first_refresh = fakes
        .slack
        .issued()
        .into_iter()
        .rfind(|t| t.starts_with("xoxe-1-"))
        .unwrap();
    assert_eq!(t.refresh_token.unwrap().expose_secret(), first_refresh);
    assert_eq!(t.expires_in, Some(Duration::from_secs(43200)));
    let t = slack
        .refresh(&http(), &first_refresh, &Default::default())
        .await
        .unwrap();
    let [access, next] = <[String; 2]>::try_from(last_issued(&fakes.slack, 2)).unwrap();
    assert_eq!(t.access_token.expose_secret(), access);
    assert_eq!(t.refresh_token.unwrap().expose_secret(), next);
    // `{"ok": false}` with HTTP 200.
    for e in [
        slack
            .exchange_code(&http(), "s-bad", "v")
            .await
            .unwrap_err(),
        slack
            .refresh(&http(), "xoxe-dead", &Default::default())
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
    }
    let seen = &fakes.slack.seen("/api/oauth.v2.access")[0];
    assert_eq!(seen.form["client_secret"], fakes.slack.client_secret());
}

#[actix_web::test]
async fn basic_client_auth_is_rfc_encoded_and_errors_are_rfc_errors() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let rfc = catalog.get("rfc").unwrap();
    // The fake accepts only `my+client:s3cr%3Aet%25`, and no secret in the body.
    let t = rfc.exchange_code(&http(), "r-code", "v").await.unwrap();
    assert_eq!(t.access_token.expose_secret(), RFC_TOKEN);
    let e = rfc
        .refresh(&http(), "dead", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
    let e = rfc
        .refresh(&http(), "narrow", &Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Rejected { error, .. } if error == "invalid_scope"),
        "{e}"
    );
    assert!(
        !e.to_string().contains("narrow"),
        "refresh token echoed: {e}"
    );
    let demo = catalog.get("demo").unwrap();
    let t = demo.exchange_code(&http(), "d-code", "v").await.unwrap();
    assert_eq!(t.access_token.expose_secret(), DEMO_TOKEN);
    assert_eq!(t.refresh_token.unwrap().expose_secret(), "demo-rt");
}

#[actix_web::test]
async fn revocation_sends_token_and_hint() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let google = catalog.get("google").unwrap();
    let (_, refresh) = fakes.google.issue_grant("openid email", true);
    let refresh = refresh.unwrap();
    google
        .revoke(
            &http(),
            &refresh,
            TokenHint::RefreshToken,
            &Default::default(),
        )
        .await
        .unwrap();
    let seen = &fakes.google.seen("/revoke")[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.form["token"], refresh);
    assert_eq!(seen.form["token_type_hint"], "refresh_token");
    // Google answers an already revoked token with 400 invalid_token.
    google
        .revoke(&http(), "gone", TokenHint::AccessToken, &Default::default())
        .await
        .unwrap();
    let rfc = catalog.get("rfc").unwrap();
    rfc.revoke(
        &http(),
        RFC_TOKEN,
        TokenHint::AccessToken,
        &Default::default(),
    )
    .await
    .unwrap();
    let seen = &fakes.scripted.seen("/rfc/revoke")[0];
    assert_eq!(seen.form["token_type_hint"], "access_token");
    assert!(seen.headers["authorization"].starts_with("Basic "));
    // GitHub deletes an app token: a DELETE with the access token in a
    // JSON body, the client as HTTP Basic; a refresh token cannot be sent.
    let gh = catalog.get("github").unwrap();
    let (token, _) = fakes.github.issue_grant("repo", false);
    gh.revoke(&http(), &token, TokenHint::AccessToken, &Default::default())
        .await
        .unwrap();
    let grant = format!("/applications/{}/token", fakes.github.client_id());
    let seen = &fakes.github.seen(&grant)[0];
    assert_eq!(seen.method, "DELETE");
    assert_eq!(
        seen.body,
        serde_json::json!({ "access_token": token }).to_string()
    );
    assert!(seen.headers["authorization"].starts_with("Basic "));
    assert_eq!(seen.headers["accept"], "application/vnd.github+json");
    let e = gh
        .revoke(
            &http(),
            "ghr_x",
            TokenHint::RefreshToken,
            &Default::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Unsupported(_)), "{e}");
}

#[actix_web::test]
async fn no_error_message_carries_a_secret() {
    let fakes = Fakes::start().await;
    let catalog = fakes.catalog();
    let http = http();
    let mut messages = Vec::new();
    for name in ["github", "ghform", "google", "slack", "demo", "rfc"] {
        let p = catalog.get(name).unwrap();
        if let Err(e) = p
            .exchange_code(&http, "CODE-SECRET-1", "VERIFIER-SECRET-2")
            .await
        {
            messages.push(e.to_string());
        }
        if let Err(e) = p
            .refresh(&http, "REFRESH-SECRET-3", &Default::default())
            .await
        {
            messages.push(e.to_string());
        }
        if let Err(e) = p.account(&http, "ACCESS-SECRET-4").await {
            messages.push(e.to_string());
        }
    }
    // Unreachable provider: transport errors must not carry the URL's query.
    let dead = crate::providers::test_catalog::catalog_for("http://127.0.0.1:1");
    if let Err(e) = dead
        .get("rfc")
        .unwrap()
        .refresh(&http, "REFRESH-SECRET-3", &Default::default())
        .await
    {
        messages.push(e.to_string());
    }
    assert!(messages.len() >= 18, "{messages:?}");
    let mut secrets = fakes.client_secrets();
    secrets.push("SECRET");
    for m in &messages {
        for secret in &secrets {
            assert!(!m.contains(secret), "{m}");
        }
    }
}
