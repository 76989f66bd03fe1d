//! The consent page: what it shows, where it refuses to redirect, and what
//! Allow and Deny send back.

use super::start;

#[tokio::test]
async fn the_consent_page_shows_client_scopes_and_a_default_account() {
    let demo = start().await;
    let response = demo.show(&[("scope", Some("profile repo:read"))]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let page = response.text().await.unwrap();
    for expected in [
        "Demo provider",
        "This stands in for a provider like GitHub",
        "mcp-connect-demo",
        "repo:read",
        r#"value="demo-user""#,
        r#"name="code_challenge" value="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM""#,
        r#"href="/static/style.css""#,
        r#"value="allow""#,
        r#"value="deny""#,
    ] {
        assert!(page.contains(expected), "missing {expected:?}");
    }
    // The server's CSP forbids inline script and style.
    assert!(!page.contains("<script") && !page.contains("style="));
}

#[tokio::test]
async fn unknown_clients_and_unregistered_redirects_get_a_page_not_a_redirect() {
    let demo = start().await;
    let other_path = format!("{}/oauth/callback/github", demo.base);
    let cases = [
        [("client_id", Some("someone-else"))],
        [("client_id", None)],
        [("redirect_uri", Some(other_path.as_str()))],
        [("redirect_uri", Some("https://evil.example/cb"))],
        [("redirect_uri", None)],
    ];
    for changes in cases {
        let response = demo.show(&changes).await;
        assert_eq!(response.status(), 400, "{changes:?}");
        assert!(response.headers().get("location").is_none());
        let page = response.text().await.unwrap();
        assert!(page.contains("request refused"), "{changes:?}");
        // The POST is held to the same checks.
        let response = demo.decide("allow", "alice", &changes).await;
        assert_eq!(response.status(), 400, "{changes:?}");
    }
}

#[tokio::test]
async fn pkce_s256_is_required_and_plain_refused() {
    let demo = start().await;
    let cases = [
        [("code_challenge_method", Some("plain"))],
        [("code_challenge_method", None)],
        [("code_challenge", None)],
        [("code_challenge", Some("too-short"))],
    ];
    for changes in cases {
        let response = demo.show(&changes).await;
        let back = demo.redirected_query(&response);
        assert_eq!(back["error"], "invalid_request", "{changes:?}");
        assert_eq!(back["state"], "st-1");
        assert_eq!(back["iss"], demo.dev.demo().issuer());
    }
    let response = demo.show(&[("response_type", Some("token"))]).await;
    assert_eq!(
        demo.redirected_query(&response)["error"],
        "unsupported_response_type"
    );
}

#[tokio::test]
async fn allow_sends_code_state_and_iss() {
    let demo = start().await;
    let back = demo.redirected_query(&demo.decide("allow", "alice", &[]).await);
    assert_eq!(back["state"], "st-1");
    assert_eq!(back["iss"], format!("{}/dev/demo", demo.base));
    assert!(back["code"].len() >= 43);
    assert!(!back.contains_key("error"));
}

#[tokio::test]
async fn deny_sends_access_denied_with_state_and_iss() {
    let demo = start().await;
    // An unusable account name does not matter when the person says no.
    let back = demo.redirected_query(&demo.decide("deny", "", &[]).await);
    assert_eq!(back["error"], "access_denied");
    assert_eq!(back["state"], "st-1");
    assert_eq!(back["iss"], demo.dev.demo().issuer());
    assert!(!back.contains_key("code"));
}

#[tokio::test]
async fn a_bad_account_name_shows_the_page_again() {
    let demo = start().await;
    let response = demo.decide("allow", "<b>mallory</b>", &[]).await;
    assert_eq!(response.status(), 400);
    let page = response.text().await.unwrap();
    assert!(page.contains("letters, digits"), "{page}");
    assert!(
        page.contains("&#60;b&#62;mallory") && !page.contains("<b>mallory"),
        "the name must be escaped: {page}"
    );
    let response = demo.decide("maybe", "alice", &[]).await;
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn metadata_names_the_endpoints_and_iss_support() {
    let demo = start().await;
    let url = format!(
        "{}/.well-known/oauth-authorization-server/dev/demo",
        demo.base
    );
    let meta: serde_json::Value = demo
        .http
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["issuer"], demo.dev.demo().issuer());
    assert_eq!(meta["token_endpoint"], demo.url("/token"));
    assert_eq!(meta["authorization_response_iss_parameter_supported"], true);
}
