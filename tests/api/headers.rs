//! Transport security headers that depend on the public URL.

use crate::helpers::spawn_app_with;

#[tokio::test]
async fn hsts_is_sent_when_the_public_url_is_https_and_only_then() {
    // TLS ends at a proxy in front: the app itself listens on plain http.
    let app = spawn_app_with(|t| {
        let url = t["public_url"]
            .as_str()
            .unwrap()
            .replace("http://", "https://");
        t.insert("public_url".into(), url.into());
        t.remove("insecure_http");
    })
    .await;
    // `/mcp` sits outside the pages' scope: the headers are the App's own.
    for path in ["/healthz", "/connections", "/nope", "/mcp"] {
        let r = app
            .http
            .get(format!("{}{path}", app.addr))
            .send()
            .await
            .unwrap();
        let hsts = r.headers().get("strict-transport-security");
        assert_eq!(
            hsts.and_then(|v| v.to_str().ok()),
            Some("max-age=31536000"),
            "{path}"
        );
        let nosniff = r.headers().get("x-content-type-options");
        assert_eq!(
            nosniff.and_then(|v| v.to_str().ok()),
            Some("nosniff"),
            "{path}"
        );
    }
    let plain = spawn_app_with(|_| {}).await;
    let r = plain
        .http
        .get(format!("{}/healthz", plain.addr))
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("strict-transport-security").is_none());
}

/// An address no page has, or a page's address with a method it does not
/// take, gets a page a person can read (actix's own answer is empty),
/// with the pages' headers; the signed-in user is named on it.
#[tokio::test]
async fn unknown_addresses_and_methods_get_a_page() {
    let app = spawn_app_with(|_| {}).await;
    let browser = crate::browser::Browser::new(&app);
    let missing = browser.get("/no-such-page").await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("Page not found"), "{}", missing.body);
    assert!(missing.body.contains("Not signed in"), "{}", missing.body);
    assert!(
        missing
            .header("content-security-policy")
            .is_some_and(|v| v.contains("default-src")),
        "the pages' headers"
    );
    browser.sign_in("alice").await;
    let missing = browser.get("/no-such-page").await;
    assert!(missing.body.contains("Signed in as"), "{}", missing.body);
    let wrong = app
        .http
        .delete(format!("{}/connections", app.addr))
        .send()
        .await
        .unwrap();
    // No page answers this method there: the same page.
    assert_eq!(wrong.status(), 404);
    let body = wrong.text().await.unwrap();
    assert!(body.contains("Page not found"), "{body}");
}
