//! The Slack fake's PKCE, as Slack documents it ("Using PKCE" and the
//! errors of `oauth.v2.access`): refused to an app that never turned it
//! on, and the verifier checked for one that did.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{FakeProvider, no_redirects, slack};

const REDIRECT_URI: &str = "http://127.0.0.1:9/oauth/callback/slack";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";

/// A code as after consent, for an authorize request with this PKCE
/// challenge (S256 of `verifier`), or without one.
fn code_for(fake: &FakeProvider, verifier: Option<&str>) -> String {
    let challenge = verifier.map(|v| URL_SAFE_NO_PAD.encode(Sha256::digest(v.as_bytes())));
    let mut params = vec![("redirect_uri", REDIRECT_URI), ("user_scope", "users:read")];
    if let Some(challenge) = &challenge {
        params.push(("code_challenge", challenge));
        params.push(("code_challenge_method", "S256"));
    }
    fake.issue_code(&params)
}

/// `oauth.v2.access` for `code`, with this `code_verifier` if any: the
/// answer, which is HTTP 200 whatever it says.
async fn exchange(fake: &FakeProvider, code: &str, verifier: Option<&str>) -> Value {
    let mut form = vec![
        ("client_id", fake.client_id()),
        ("client_secret", fake.client_secret()),
        ("code", code),
        ("redirect_uri", REDIRECT_URI),
    ];
    if let Some(verifier) = verifier {
        form.push(("code_verifier", verifier));
    }
    let answer = no_redirects()
        .post(format!("{}/api/oauth.v2.access", fake.base))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

#[tokio::test]
async fn with_pkce_on_the_verifier_must_match_the_challenge() {
    let fake = slack::start().await;
    fake.turn_pkce_on();
    for wrong in [Some("a-verifier-that-was-never-sent-to-slack-at-all"), None] {
        let code = code_for(&fake, Some(VERIFIER));
        let answer = exchange(&fake, &code, wrong).await;
        assert_eq!(answer["ok"], false, "{answer}");
        assert_eq!(answer["error"], "invalid_code_verifier", "{answer}");
    }
    let code = code_for(&fake, Some(VERIFIER));
    let answer = exchange(&fake, &code, Some(VERIFIER)).await;
    assert_eq!(answer["ok"], true, "{answer}");
    // PKCE stays optional for web redirects.
    let answer = exchange(&fake, &code_for(&fake, None), None).await;
    assert_eq!(answer["ok"], true, "{answer}");
}

#[tokio::test]
async fn an_app_that_never_turned_pkce_on_may_not_use_it() {
    let fake = slack::start().await;
    let code_with_challenge = code_for(&fake, Some(VERIFIER));
    let answer = exchange(&fake, &code_with_challenge, Some(VERIFIER)).await;
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["error"], "pkce_not_allowed", "{answer}");
    let answer = exchange(&fake, &code_for(&fake, None), Some(VERIFIER)).await;
    assert_eq!(answer["error"], "pkce_not_allowed", "{answer}");
    let answer = exchange(&fake, &code_for(&fake, None), None).await;
    assert_eq!(answer["ok"], true, "{answer}");
}
