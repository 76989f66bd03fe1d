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
