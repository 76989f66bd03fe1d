//! The token endpoint: code exchange with PKCE, refresh rotation, errors.

use serde_json::Value;

use super::{CLIENT, REDIRECT, VERIFIER, redirected_query, start};

#[tokio::test]
async fn code_flow_issues_tokens_for_the_typed_user() {
    let idp = start().await;
    let back = redirected_query(&idp.sign_in("bob", &[]).await);
    assert_eq!(back["state"], "st-1");
    assert_eq!(back["iss"], idp.dev.issuer());
    let (status, body) = idp.exchange(&back["code"], VERIFIER).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["scope"], "openid profile");
    let access_token = body["access_token"].as_str().unwrap();
    let header = jsonwebtoken::decode_header(access_token).unwrap();
    assert_eq!(header.typ.as_deref(), Some("at+jwt"));
    let access = idp.decode(access_token, &idp.dev.mcp_resource());
    assert_eq!(
        (&access["sub"], &access["client_id"]),
        (&Value::from("bob"), &Value::from(CLIENT))
    );
    let id = idp.decode(body["id_token"].as_str().unwrap(), CLIENT);
    assert_eq!(
        (&id["sub"], &id["nonce"], &id["preferred_username"]),
        (&"bob".into(), &"n-1".into(), &"bob".into())
    );
    assert!(
        body["refresh_token"]
            .as_str()
            .is_some_and(|r| r.len() >= 43)
    );
}

#[tokio::test]
async fn a_code_is_single_use_and_burnt_by_a_wrong_verifier() {
    let idp = start().await;
    let code = idp.code_for("alice").await;
    assert_eq!(idp.exchange(&code, VERIFIER).await.0, 200);
    let (status, body) = idp.exchange(&code, VERIFIER).await;
    assert_eq!(
        (status.as_u16(), &body["error"]),
        (400, &Value::from("invalid_grant"))
    );

    let code = idp.code_for("alice").await;
    let wrong = "x".repeat(43);
    assert_eq!(
        idp.exchange(&code, &wrong).await.1["error"],
        "invalid_grant"
    );
    assert_eq!(
        idp.exchange(&code, VERIFIER).await.1["error"],
        "invalid_grant",
        "the code must be burnt"
    );
}

#[tokio::test]
async fn the_exchange_must_repeat_client_and_redirect_uri() {
    let idp = start().await;
    let code = idp.code_for("alice").await;
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", "http://127.0.0.1:9/other"),
        ("client_id", CLIENT),
        ("code_verifier", VERIFIER),
    ];
    assert_eq!(idp.token(&pairs).await.1["error"], "invalid_grant");
    let code = idp.code_for("alice").await;
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("client_id", "someone-else"),
        ("code_verifier", VERIFIER),
    ];
    assert_eq!(idp.token(&pairs).await.1["error"], "invalid_grant");
}

#[tokio::test]
async fn client_secret_basic_names_the_client() {
    let idp = start().await;
    let code = idp.code_for("carol").await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ];
    let response = idp
        .http
        .post(format!("{}/dev/idp/token", idp.base))
        .basic_auth(CLIENT, Some("any-secret"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn refresh_tokens_rotate_and_cannot_widen_scope() {
    let idp = start().await;
    let code = idp.code_for("dave").await;
    let first = idp.exchange(&code, VERIFIER).await.1["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let refresh = |token: String, scope: &'static str| {
        let idp = &idp;
        async move {
            let mut pairs = vec![
                ("grant_type", "refresh_token"),
                ("refresh_token", token.as_str()),
                ("client_id", CLIENT),
            ];
            if !scope.is_empty() {
                pairs.push(("scope", scope));
            }
            idp.token(&pairs).await
        }
    };
    let (status, body) = refresh(first.clone(), "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        idp.decode(
            body["access_token"].as_str().unwrap(),
            &idp.dev.mcp_resource()
        )["sub"],
        "dave"
    );
    let second = body["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    assert_eq!(
        refresh(first, "").await.1["error"],
        "invalid_grant",
        "a used refresh token must not work again"
    );
    assert_eq!(
        refresh(second, "openid admin").await.1["error"],
        "invalid_scope"
    );
}

#[tokio::test]
async fn token_endpoint_errors_are_rfc6749_json() {
    let idp = start().await;
    assert_eq!(
        idp.token(&[("grant_type", "password"), ("client_id", CLIENT)])
            .await
            .1["error"],
        "unsupported_grant_type"
    );
    assert_eq!(
        idp.token(&[("client_id", CLIENT)]).await.1["error"],
        "invalid_request"
    );
    let (status, body) = idp
        .token(&[("grant_type", "authorization_code"), ("code", "x")])
        .await;
    assert_eq!(
        (status.as_u16(), &body["error"]),
        (400, &Value::from("invalid_request"))
    );
    let (_, body) = idp
        .token(&[
            ("grant_type", "authorization_code"),
            ("client_id", CLIENT),
            ("code", "x"),
            ("code", "y"),
        ])
        .await;
    assert_eq!(body["error"], "invalid_request");
}
