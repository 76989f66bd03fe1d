//! Discovery, the sign-in page and what it refuses.

use serde_json::Value;

use super::{CHALLENGE, redirected_query, start};

#[tokio::test]
async fn discovery_names_the_dev_issuer_on_every_well_known_path() {
    let idp = start().await;
    for path in [
        "/dev/idp/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server/dev/idp",
        "/.well-known/openid-configuration/dev/idp",
    ] {
        let meta: Value = idp.get(path, &[]).await.json().await.unwrap();
        assert_eq!(meta["issuer"], idp.dev.issuer(), "{path}");
        assert_eq!(
            meta["token_endpoint"],
            format!("{}/dev/idp/token", idp.base)
        );
        assert_eq!(
            meta["code_challenge_methods_supported"],
            serde_json::json!(["S256"])
        );
    }
    let jwks: Value = idp.get("/dev/idp/jwks", &[]).await.json().await.unwrap();
    assert_eq!(jwks["keys"][0]["crv"], "Ed25519");
    assert_eq!(jwks["keys"][0]["kid"], idp.dev.signing_kid());
}

#[tokio::test]
async fn sign_in_page_carries_the_request_escaped() {
    let idp = start().await;
    let hostile = "\"><script>alert(1)</script>";
    let response = idp
        .get(
            "/dev/idp/authorize",
            &idp.request(&[("state", Some(hostile))]),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let html = response.text().await.unwrap();
    assert!(html.contains(r#"action="/dev/idp/authorize""#), "{html}");
    assert!(
        html.contains(r#"name="code_challenge""#) && html.contains(CHALLENGE),
        "{html}"
    );
    assert!(!html.contains("<script>"), "{html}");
}

#[tokio::test]
async fn a_foreign_redirect_uri_is_shown_as_a_page_never_followed() {
    let idp = start().await;
    for changes in [
        vec![("redirect_uri", Some("https://evil.example/cb"))],
        vec![("redirect_uri", None)],
        vec![
            ("client_id", None),
            ("redirect_uri", Some("https://evil.example/cb")),
        ],
    ] {
        let response = idp.get("/dev/idp/authorize", &idp.request(&changes)).await;
        assert_eq!(response.status(), 400, "{changes:?}");
        assert!(response.headers().get("location").is_none());
        let mut form = idp.request(&changes);
        form.push(("username".into(), "alice".into()));
        let response = idp.post("/dev/idp/authorize", &form).await;
        assert_eq!(response.status(), 400, "{changes:?}");
        assert!(response.headers().get("location").is_none());
    }
}

#[tokio::test]
async fn request_errors_go_back_to_a_trusted_redirect_with_state_and_iss() {
    let idp = start().await;
    let cases = [
        (("code_challenge_method", Some("plain")), "invalid_request"),
        (("code_challenge_method", None), "invalid_request"),
        (("code_challenge", Some("short")), "invalid_request"),
        (
            ("response_type", Some("token")),
            "unsupported_response_type",
        ),
        (
            ("resource", Some("https://other.example/mcp")),
            "invalid_target",
        ),
        (("prompt", Some("none")), "login_required"),
    ];
    for (change, error) in cases {
        let back = redirected_query(&idp.get("/dev/idp/authorize", &idp.request(&[change])).await);
        assert_eq!(back["error"], error, "{change:?}");
        assert_eq!(back["state"], "st-1");
        assert_eq!(back["iss"], idp.dev.issuer());
        assert!(!back.contains_key("code"));
    }
}

#[tokio::test]
async fn bad_user_names_and_cancel() {
    let idp = start().await;
    let response = idp.sign_in("not ok!", &[]).await;
    assert_eq!(response.status(), 400);
    assert!(response.headers().get("location").is_none());
    assert!(response.text().await.unwrap().contains("1 to 64 letters"));

    let mut form = idp.request(&[]);
    form.push(("action".into(), "cancel".into()));
    let back = redirected_query(&idp.post("/dev/idp/authorize", &form).await);
    assert_eq!(
        (back["error"].as_str(), back["state"].as_str()),
        ("access_denied", "st-1")
    );
}
