//! Tests of `oauth`: code exchange, refresh and revocation against the fake
//! providers, each with its quirks.

use std::time::Duration;

use provider_fakes::scripted::{
    DEMO_TOKEN, Fake, GITHUB_TOKEN, GOOGLE_TOKEN, RFC_TOKEN, SLACK_TOKEN,
};
use secrecy::ExposeSecret;

use crate::providers::{
    ProviderError, TokenHint,
    test_catalog::{catalog_for, http},
};

#[actix_web::test]
async fn github_exchange_asks_for_json_and_posts_the_secret() {
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
    let gh = catalog.get("github").unwrap();
    let t = gh
        .exchange_code(&http(), "gh-code", "verifier-1")
        .await
        .unwrap();
    assert_eq!(t.access_token.expose_secret(), GITHUB_TOKEN);
    assert_eq!(t.scopes.unwrap(), vec!["repo", "read:user"]);
    assert!(t.refresh_token.is_none() && t.expires_in.is_none());
    let seen = &fake.seen("/github/token")[0];
    assert_eq!(seen.headers["accept"], "application/json");
    assert!(!seen.headers.contains_key("authorization"));
    assert_eq!(seen.form["grant_type"], "authorization_code");
    assert_eq!(seen.form["client_id"], "gh-client");
    assert_eq!(seen.form["client_secret"], "gh-secret");
    assert_eq!(seen.form["code_verifier"], "verifier-1");
    assert_eq!(
        seen.form["redirect_uri"],
        format!("{}/oauth/callback/github", fake.base())
    );
}

#[actix_web::test]
async fn github_form_encoded_answers_and_200_errors() {
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
    let form_only = catalog.get("ghform").unwrap();
    let t = form_only
        .exchange_code(&http(), "gh-code", "v")
        .await
        .unwrap();
    assert_eq!(t.access_token.expose_secret(), GITHUB_TOKEN);
    assert_eq!(t.token_type, "bearer");
    // `bad_verification_code` arrives with HTTP 200, form-encoded here.
    let e = form_only
        .exchange_code(&http(), "gh-wrong", "v")
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
    let gh = catalog.get("github").unwrap();
    let e = gh
        .exchange_code(&http(), "gh-wrong", "v")
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
}

#[actix_web::test]
async fn github_app_tokens_refresh_and_expire() {
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
    let gh = catalog.get("github").unwrap();
    let t = gh
        .refresh(&http(), "ghr_live", &Default::default())
        .await
        .unwrap();
    assert_eq!(t.access_token.expose_secret(), "ghu_NEW");
    assert_eq!(t.refresh_token.unwrap().expose_secret(), "ghr_next");
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
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
    let google = catalog.get("google").unwrap();
    let t = google.exchange_code(&http(), "g-code", "v").await.unwrap();
    assert_eq!(t.access_token.expose_secret(), GOOGLE_TOKEN);
    assert_eq!(t.refresh_token.unwrap().expose_secret(), "1//g-refresh");
    assert_eq!(t.expires_in, Some(Duration::from_secs(3599)));
    assert_eq!(t.token_type, "Bearer");
    let t = google
        .refresh(&http(), "1//g-refresh", &Default::default())
        .await
        .unwrap();
    assert_eq!(t.access_token.expose_secret(), "ya29.FRESH");
    assert!(t.refresh_token.is_none(), "keep the old one");
    // RFC 6749 §5.2: HTTP 400 with `error: invalid_grant`.
    let e = google
        .refresh(&http(), "1//revoked", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
    let e = google
        .exchange_code(&http(), "g-used", "v")
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::InvalidGrant), "{e}");
}

#[actix_web::test]
async fn slack_user_token_comes_from_authed_user() {
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
    let slack = catalog.get("slack").unwrap();
    let t = slack.exchange_code(&http(), "s-code", "v").await.unwrap();
    assert_eq!(
        t.access_token.expose_secret(),
        SLACK_TOKEN,
        "not the bot token"
    );
    assert_eq!(t.token_type, "user");
    assert_eq!(t.scopes.unwrap(), vec!["channels:read", "chat:write"]);
    assert!(t.refresh_token.is_none());
    let t = slack
        .exchange_code(&http(), "s-code-rotating", "v")
        .await
        .unwrap();
    assert_eq!(t.refresh_token.unwrap().expose_secret(), "xoxe-1-user");
    assert_eq!(t.expires_in, Some(Duration::from_secs(43200)));
    let t = slack
        .refresh(&http(), "xoxe-live", &Default::default())
        .await
        .unwrap();
    assert_eq!(t.access_token.expose_secret(), "xoxe.xoxp-NEW");
    assert_eq!(t.refresh_token.unwrap().expose_secret(), "xoxe-next");
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
    let seen = &fake.seen("/slack/api/oauth.v2.access")[0];
    assert_eq!(seen.form["client_secret"], "s-secret");
}

#[actix_web::test]
async fn basic_client_auth_is_rfc_encoded_and_errors_are_rfc_errors() {
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
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
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
    let google = catalog.get("google").unwrap();
    google
        .revoke(
            &http(),
            "1//g-refresh",
            TokenHint::RefreshToken,
            &Default::default(),
        )
        .await
        .unwrap();
    let seen = &fake.seen("/google/revoke")[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.form["token"], "1//g-refresh");
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
    let seen = &fake.seen("/rfc/revoke")[0];
    assert_eq!(seen.form["token_type_hint"], "access_token");
    assert!(seen.headers["authorization"].starts_with("Basic "));
    let gh = catalog.get("github").unwrap();
    let e = gh
        .revoke(
            &http(),
            GITHUB_TOKEN,
            TokenHint::AccessToken,
            &Default::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Unsupported(_)), "{e}");
}

#[actix_web::test]
async fn no_error_message_carries_a_secret() {
    let fake = Fake::start().await;
    let catalog = catalog_for(fake.base());
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
    for m in &messages {
        for secret in ["SECRET", "gh-secret", "g-secret", "s-secret", "s3cr"] {
            assert!(!m.contains(secret), "{m}");
        }
    }
}
