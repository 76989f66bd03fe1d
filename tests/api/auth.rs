//! Bearer-token authentication on /mcp and the protected resource metadata.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::{rand::SystemRandom, signature::Ed25519KeyPair};
use base64::{Engine, engine::general_purpose::STANDARD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::helpers::{CLIENT_ID, TestApp, request, spawn_app};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The dev identity provider's own signing key, read where dev mode keeps it.
async fn dev_signing_key(app: &TestApp) -> Vec<u8> {
    let b64 = mcp_connect::db::dev_secrets::get(&app.db, mcp_connect::dev::SIGNING_KEY_SECRET)
        .await
        .unwrap()
        .expect("dev signing key stored");
    STANDARD.decode(b64).unwrap()
}

fn dev_kid(app: &TestApp) -> String {
    jsonwebtoken::decode_header(app.token("alice"))
        .unwrap()
        .kid
        .expect("kid")
}

fn claims(app: &TestApp) -> Value {
    json!({
        "iss": app.dev.issuer(),
        "sub": "alice",
        "aud": app.mcp_url(),
        "client_id": CLIENT_ID,
        "scope": "openid",
        "iat": now(),
        "exp": now() + 600,
        "jti": uuid::Uuid::new_v4().to_string(),
    })
}

fn sign(pkcs8: &[u8], kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    header.typ = Some("at+jwt".to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(pkcs8)).unwrap()
}

fn other_key() -> Vec<u8> {
    Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
        .unwrap()
        .as_ref()
        .to_vec()
}

async fn status_and_challenge(app: &TestApp, token: Option<&str>) -> (u16, String) {
    let response = app
        .mcp_request(token, &request("tools/list", json!({})))
        .send()
        .await
        .unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (response.status().as_u16(), challenge)
}

#[tokio::test]
async fn no_token_is_401_with_resource_metadata() {
    let app = spawn_app().await;
    let (status, challenge) = status_and_challenge(&app, None).await;
    assert_eq!(status, 401);
    let expected = format!(
        r#"resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
        app.base
    );
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains(&expected), "{challenge}");
    assert!(
        !challenge.contains("invalid_token"),
        "no token sent, so no error: {challenge}"
    );
    assert!(
        !challenge.contains("scope="),
        "none configured: {challenge}"
    );
}

/// RFC 6750 §3.1: a request with another scheme, or the Bearer scheme and
/// no token, lacks authentication: the same 401 as no header at all, naming
/// no error, so that a client starts its authorization from it. A Bearer
/// credential that is not a token is malformed: 400 `invalid_request`.
#[tokio::test]
async fn another_scheme_or_no_token_is_answered_as_no_authentication() {
    let app = spawn_app().await;
    let send = |authorization: &'static str| {
        app.mcp_request(None, &request("tools/list", json!({})))
            .header("Authorization", authorization)
            .send()
    };
    for value in ["Basic dXNlcjpwYXNz", "Bearer", "Digest username=\"a\""] {
        let response = send(value).await.unwrap();
        assert_eq!(response.status(), 401, "{value}");
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with("Bearer resource_metadata="),
            "{value}: {challenge}"
        );
        assert!(!challenge.contains("error="), "{value}: {challenge}");
    }
    let response = send("Bearer a%b").await.unwrap();
    assert_eq!(response.status(), 400);
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains(r#"error="invalid_request""#),
        "{challenge}"
    );
}

/// The authorization spec's SHOULD: the challenge names the scopes to ask
/// for, the configured `scopes_supported` (none configured: no `scope`).
#[tokio::test]
async fn the_challenge_names_the_configured_scopes() {
    let app = crate::helpers::spawn_app_with(|t| {
        let auth = t
            .entry("auth")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        auth.as_table_mut().unwrap().insert(
            "scopes_supported".into(),
            toml::Value::from(vec!["mcp:tools", "offline"]),
        );
    })
    .await;
    let (status, challenge) = status_and_challenge(&app, None).await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(r#", scope="mcp:tools offline""#),
        "{challenge}"
    );
    let (status, challenge) = status_and_challenge(&app, Some("not.a.jwt")).await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(r#"scope="mcp:tools offline", error="invalid_token""#),
        "{challenge}"
    );
}

/// `auth.required_scopes`: a valid token without every required scope is
/// refused with 403 `insufficient_scope` naming all of them (the
/// authorization spec's runtime insufficient scope error), whichever claim
/// carries the scopes; one with them is served, also from the cache of
/// recently verified tokens.
#[tokio::test]
async fn a_token_without_a_required_scope_is_403_insufficient_scope() {
    let app = crate::helpers::spawn_app_with(|t| {
        let auth = t
            .entry("auth")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let auth = auth.as_table_mut().unwrap();
        auth.insert(
            "scopes_supported".into(),
            toml::Value::from(vec!["mcp:tools", "mcp:resources", "offline"]),
        );
        auth.insert(
            "required_scopes".into(),
            toml::Value::from(vec!["mcp:tools", "mcp:resources"]),
        );
    })
    .await;
    let key = dev_signing_key(&app).await;
    let kid = dev_kid(&app);
    let with_scope = |field: &str, scope: Value| {
        let mut c = claims(&app);
        c.as_object_mut().unwrap().remove("scope");
        c[field] = scope;
        sign(&key, &kid, &c)
    };
    let metadata = format!(
        r#"resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
        app.base
    );
    for (case, token) in [
        (
            "no scope claim",
            sign(&key, &kid, &{
                let mut c = claims(&app);
                c.as_object_mut().unwrap().remove("scope");
                c
            }),
        ),
        ("one of two", with_scope("scope", json!("openid mcp:tools"))),
        (
            "a longer name",
            with_scope("scope", json!("mcp:tools:x mcp:resources:x")),
        ),
        ("scp array", with_scope("scp", json!(["mcp:resources"]))),
    ] {
        let response = app
            .mcp_request(Some(&token), &request("tools/list", json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{case}");
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with(
                r#"Bearer error="insufficient_scope", scope="mcp:tools mcp:resources""#
            ),
            "{case}: {challenge}"
        );
        assert!(challenge.contains(&metadata), "{case}: {challenge}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "insufficient_scope", "{case}: {body}");
    }
    for (case, token) in [
        (
            "scope string",
            with_scope("scope", json!("openid mcp:resources mcp:tools")),
        ),
        (
            "scp array",
            with_scope("scp", json!(["mcp:tools", "mcp:resources"])),
        ),
    ] {
        for round in ["verified", "cached"] {
            let (status, _) = status_and_challenge(&app, Some(&token)).await;
            assert_eq!(status, 200, "{case}, {round}");
        }
    }
    // No token at all is still a 401 that names the scopes to ask for.
    let (status, challenge) = status_and_challenge(&app, None).await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(r#"scope="mcp:tools mcp:resources offline""#),
        "{challenge}"
    );
}

#[tokio::test]
async fn a_dev_token_is_accepted() {
    let app = spawn_app().await;
    let (status, _) = status_and_challenge(&app, Some(&app.token("alice"))).await;
    assert_eq!(status, 200);
    // The same claims signed by hand with the dev key also pass: the
    // forging helper below is sound, so the rejections are about the claim.
    let key = dev_signing_key(&app).await;
    let (status, _) =
        status_and_challenge(&app, Some(&sign(&key, &dev_kid(&app), &claims(&app)))).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn bad_tokens_are_401_invalid_token() {
    let app = spawn_app().await;
    let key = dev_signing_key(&app).await;
    let kid = dev_kid(&app);
    let with = |field: &str, value: Value| {
        let mut c = claims(&app);
        c[field] = value;
        c
    };
    let cases: Vec<(&str, String)> = vec![
        (
            "wrong audience",
            sign(&key, &kid, &with("aud", json!("http://127.0.0.1:1/mcp"))),
        ),
        (
            "wrong issuer",
            sign(&key, &kid, &with("iss", json!("https://evil.example"))),
        ),
        (
            "expired",
            sign(&key, &kid, &with("exp", json!(now() - 3600))),
        ),
        (
            "not yet valid",
            sign(&key, &kid, &with("nbf", json!(now() + 3600))),
        ),
        ("bad signature", sign(&other_key(), &kid, &claims(&app))),
        (
            "unknown kid",
            sign(&other_key(), "no-such-key", &claims(&app)),
        ),
        ("garbage", "not.a.jwt".to_owned()),
    ];
    for (case, token) in cases {
        let (status, challenge) = status_and_challenge(&app, Some(&token)).await;
        assert_eq!(status, 401, "{case}");
        assert!(
            challenge.contains(r#"error="invalid_token""#),
            "{case}: {challenge}"
        );
        assert!(
            challenge.contains("resource_metadata="),
            "{case}: {challenge}"
        );
    }
}

#[tokio::test]
async fn token_in_the_query_string_is_refused() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let response = app
        .http
        .post(format!("{}?access_token={token}", app.mcp_url()))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/list")
        .json(&request("tools/list", json!({})))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    assert_ne!(response.status(), 200);
    // Even with a valid header token as well: the query token is never silently ignored.
    let response = app
        .mcp_request(Some(&token), &request("tools/list", json!({})))
        .query(&[("access_token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn protected_resource_metadata_is_served_at_both_paths() {
    let app = spawn_app().await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = app
            .http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["resource"], app.mcp_url(), "{body}");
        let servers = body["authorization_servers"].as_array().unwrap();
        assert_eq!(
            servers[0].as_str().unwrap().trim_end_matches('/'),
            app.dev.issuer(),
            "{body}"
        );
        assert_eq!(
            body["bearer_methods_supported"],
            json!(["header"]),
            "{body}"
        );
        assert!(body["scopes_supported"].is_array(), "{body}");
    }
}
