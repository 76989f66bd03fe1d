//! The token, revocation and API endpoints: PKCE, single-use codes, client
//! authentication, refresh rotation with reuse detection, revocation, expiry.

use std::time::Duration;

use serde_json::{Value, json};

use super::{CHALLENGE, VERIFIER, start, text};

#[tokio::test]
async fn the_code_flow_issues_tokens_for_the_account() {
    let demo = start().await;
    let body = demo.tokens_for("alice").await;
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 300);
    assert_eq!(body["scope"], "profile");
    assert!(text(&body["access_token"]).starts_with("demo_at_"));
    assert!(text(&body["refresh_token"]).starts_with("demo_rt_"));
    let (status, me) = demo.me(text(&body["access_token"])).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["login"], "alice");
    assert_eq!(me["name"], "Demo user alice");
    let alice_id = me["id"].clone();
    // The id is stable per account name and differs between accounts.
    let again = demo.tokens_for("alice").await;
    assert_eq!(
        demo.me(text(&again["access_token"])).await.1["id"],
        alice_id
    );
    let bob = demo.tokens_for("bob").await;
    assert_ne!(demo.me(text(&bob["access_token"])).await.1["id"], alice_id);
}

#[tokio::test]
async fn a_pkce_mismatch_is_invalid_grant_and_burns_the_code() {
    let demo = start().await;
    let code = demo.code_for("alice").await;
    // `plain` would send the challenge itself as the verifier.
    for wrong in [CHALLENGE, &"x".repeat(43)] {
        let (status, body) = demo.exchange(&code, wrong).await;
        assert_eq!((status, text(&body["error"])), (400, "invalid_grant"));
    }
    let (status, body) = demo.exchange(&code, VERIFIER).await;
    assert_eq!((status, text(&body["error"])), (400, "invalid_grant"));
}

#[tokio::test]
async fn a_replayed_code_is_refused_and_revokes_the_first_tokens() {
    let demo = start().await;
    let code = demo.code_for("alice").await;
    let (status, first) = demo.exchange(&code, VERIFIER).await;
    assert_eq!(status, 200);
    assert_eq!(demo.me(text(&first["access_token"])).await.0, 200);
    let (status, body) = demo.exchange(&code, VERIFIER).await;
    assert_eq!((status, text(&body["error"])), (400, "invalid_grant"));
    assert_eq!(demo.me(text(&first["access_token"])).await.0, 401);
    let (status, body) = demo.refresh(text(&first["refresh_token"])).await;
    assert_eq!((status, text(&body["error"])), (400, "invalid_grant"));
}

#[tokio::test]
async fn the_exchange_must_repeat_the_registered_redirect_uri() {
    let demo = start().await;
    let code = demo.code_for("alice").await;
    let other = format!("{}/oauth/callback/demo2", demo.base);
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", other.as_str()),
        ("code_verifier", VERIFIER),
    ];
    let (status, body) = demo.token(&pairs).await;
    assert_eq!((status, text(&body["error"])), (400, "invalid_grant"));
}

/// Another dev server on this machine (another port) may use this demo
/// provider: its code comes back to its own callback, and only that URI
/// exchanges it.
#[tokio::test]
async fn a_dev_server_on_another_loopback_port_gets_its_code_and_tokens() {
    let demo = start().await;
    let elsewhere = "http://127.0.0.1:41234/oauth/callback/demo";
    let registered = demo.redirect_uri();
    // The first code is offered to the registered URI, the second to the
    // one it was issued for.
    for (redirect_uri, expected) in [(registered.as_str(), 400), (elsewhere, 200)] {
        let response = demo
            .decide("allow", "alice", &[("redirect_uri", Some(elsewhere))])
            .await;
        let back = crate::dev::test_server::redirected_query(&response, elsewhere);
        let pairs = [
            ("grant_type", "authorization_code"),
            ("code", back["code"].as_str()),
            ("redirect_uri", redirect_uri),
            ("code_verifier", VERIFIER),
        ];
        let (status, body) = demo.token(&pairs).await;
        assert_eq!(status, expected, "{redirect_uri}: {body}");
        if status == 200 {
            assert_eq!(demo.me(text(&body["access_token"])).await.0, 200);
        } else {
            assert_eq!(text(&body["error"]), "invalid_grant");
        }
    }
}

#[tokio::test]
async fn clients_must_authenticate_with_basic_and_the_right_secret() {
    let demo = start().await;
    let code = demo.code_for("alice").await;
    let redirect_uri = demo.redirect_uri();
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("code_verifier", VERIFIER),
    ];
    let attempts = [
        Some(("mcp-connect-demo", "wrong-secret")),
        Some(("someone-else", "wrong-secret")),
        None,
    ];
    for basic in attempts {
        let response = demo.post_with("/token", &pairs, basic).await;
        assert_eq!(response.status(), 401, "{basic:?}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Basic "), "{challenge}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "invalid_client");
        let response = demo.post_with("/revoke", &[("token", "x")], basic).await;
        assert_eq!(response.status(), 401, "{basic:?}");
    }
    // client_secret_post is not this client's method.
    let mut post = pairs.to_vec();
    post.extend([("client_id", "mcp-connect-demo"), ("client_secret", "x")]);
    assert_eq!(demo.post_with("/token", &post, None).await.status(), 401);
    // A failed client authentication does not spend the code.
    assert_eq!(demo.exchange(&code, VERIFIER).await.0, 200);
}

#[tokio::test]
async fn refresh_tokens_rotate_and_reuse_revokes_the_grant() {
    let demo = start().await;
    let first = demo.tokens_for("alice").await;
    let (status, second) = demo.refresh(text(&first["refresh_token"])).await;
    assert_eq!(status, 200, "{second}");
    assert_ne!(second["refresh_token"], first["refresh_token"]);
    assert_ne!(second["access_token"], first["access_token"]);
    assert_eq!(second["scope"], "profile");
    assert_eq!(demo.me(text(&second["access_token"])).await.0, 200);
    // The old refresh token again: refused, and the whole grant ends.
    let (status, body) = demo.refresh(text(&first["refresh_token"])).await;
    assert_eq!((status, text(&body["error"])), (400, "invalid_grant"));
    assert_eq!(demo.me(text(&second["access_token"])).await.0, 401);
    let (status, _) = demo.refresh(text(&second["refresh_token"])).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn revoking_a_refresh_token_ends_its_access_tokens() {
    let demo = start().await;
    let tokens = demo.tokens_for("alice").await;
    let revoke = [
        ("token", text(&tokens["refresh_token"])),
        ("token_type_hint", "refresh_token"),
    ];
    assert_eq!(demo.post_as_client("/revoke", &revoke).await.status(), 200);
    assert_eq!(demo.me(text(&tokens["access_token"])).await.0, 401);
    assert_eq!(demo.refresh(text(&tokens["refresh_token"])).await.0, 400);
    // Unknown tokens: still 200 (RFC 7009 §2.2).
    let unknown = [("token", "never-issued")];
    assert_eq!(demo.post_as_client("/revoke", &unknown).await.status(), 200);
}

#[tokio::test]
async fn revoking_an_access_token_leaves_the_refresh_token() {
    let demo = start().await;
    let tokens = demo.tokens_for("alice").await;
    let revoke = [("token", text(&tokens["access_token"]))];
    assert_eq!(demo.post_as_client("/revoke", &revoke).await.status(), 200);
    assert_eq!(demo.me(text(&tokens["access_token"])).await.0, 401);
    assert_eq!(demo.refresh(text(&tokens["refresh_token"])).await.0, 200);
}

#[tokio::test]
async fn an_expired_access_token_is_refused() {
    let demo = start().await;
    demo.dev.demo().set_access_ttl(Duration::ZERO);
    let tokens = demo.tokens_for("alice").await;
    assert_eq!(tokens["expires_in"], 0);
    let (status, body) = demo.me(text(&tokens["access_token"])).await;
    assert_eq!((status, text(&body["error"])), (401, "invalid_token"));
    // The refresh token still works and brings a token that lives.
    demo.dev.demo().set_access_ttl(Duration::from_secs(60));
    let (_, fresh) = demo.refresh(text(&tokens["refresh_token"])).await;
    assert_eq!(demo.me(text(&fresh["access_token"])).await.0, 200);
}

#[tokio::test]
async fn malformed_token_requests_get_rfc_6749_errors() {
    let demo = start().await;
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("grant_type", "password")], "unsupported_grant_type"),
        (&[("code", "x")], "invalid_request"),
        (
            &[("grant_type", "authorization_code"), ("code", "x")],
            "invalid_request",
        ),
        (
            &[("grant_type", "refresh_token"), ("grant_type", "x")],
            "invalid_request",
        ),
    ];
    for (pairs, error) in cases {
        let (status, body) = demo.token(pairs).await;
        assert_eq!((status, text(&body["error"])), (400, error), "{pairs:?}");
    }
}

#[tokio::test]
async fn the_api_echoes_and_wants_a_bearer_token() {
    let demo = start().await;
    let tokens = demo.tokens_for("alice").await;
    let response = demo
        .http
        .post(demo.url("/api/echo?a=1&a=2&b=x%20y"))
        .bearer_auth(text(&tokens["access_token"]))
        .json(&json!({"hello": "world"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let echo: Value = response.json().await.unwrap();
    assert_eq!(
        echo,
        json!({"method": "POST", "query": {"a": ["1", "2"], "b": "x y"}, "body": {"hello": "world"}})
    );
    // No credentials: 401 without an error code (RFC 6750 §3.1).
    let response = demo.http.get(demo.url("/api/echo")).send().await.unwrap();
    assert_eq!(response.status(), 401);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Bearer ") && !challenge.contains("error="));
    let response = demo
        .http
        .get(demo.url("/api/nothing-here"))
        .bearer_auth(text(&tokens["access_token"]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}
