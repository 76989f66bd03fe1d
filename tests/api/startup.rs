//! What stops `serve` before it listens, and what keeps it not ready.

use std::net::TcpListener;

use mcp_connect::{config::Settings, startup::Application};

use crate::helpers::spawn_app_with;

fn settings(extra: &str) -> Settings {
    let table: toml::Table = format!(
        r#"
        public_url = "https://connect.example.com"
        database_url = "postgres://127.0.0.1/never_created"
        keys = ["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]
        {extra}
        "#
    )
    .parse()
    .expect("toml");
    Settings::from_sources(None, Vec::new(), table).expect("settings load")
}

async fn refusal(extra: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    match Application::build_with_listener(settings(extra), listener, None).await {
        Ok(_) => panic!("started with {extra}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn serve_refuses_to_start_without_a_provider_or_a_web_client() {
    let err =
        refusal("[auth]\nissuer = \"https://idp.example.com\"\nweb_client_id = \"web\"").await;
    assert!(err.contains("`providers`"), "{err}");
    let err = refusal(
        "[auth]\nissuer = \"https://idp.example.com\"\n\
         [providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"",
    )
    .await;
    assert!(
        err.contains("`auth.web_client_id`") && err.contains("MCP_CONNECT_AUTH__WEB_CLIENT_ID"),
        "{err}"
    );
}

#[tokio::test]
async fn serve_refuses_a_webhook_endpoint_inside_the_network_unless_allowed() {
    let err = refusal(
        "[auth]\nissuer = \"https://idp.example.com\"\nweb_client_id = \"web\"\n\
         [providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [webhooks.endpoints.ops]\nurl = \"https://10.0.0.5/hook\"\n\
         secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"",
    )
    .await;
    assert!(
        err.contains("webhooks.endpoints.ops.url") && err.contains("allow_private_network"),
        "{err}"
    );
}

#[tokio::test]
async fn readyz_waits_for_the_issuers_metadata() {
    // Nothing listens on port 9 of loopback: the issuer cannot be reached.
    let app = spawn_app_with(|t| {
        t["auth"]
            .as_table_mut()
            .unwrap()
            .insert("issuer".into(), "http://127.0.0.1:9/".into());
    })
    .await;
    let r = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], "identity provider unreachable", "{body}");
    // Liveness does not depend on it.
    let r = app
        .http
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
