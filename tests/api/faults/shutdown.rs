//! Shutdown: a retry waiting for the user's connection is answered at once
//! (with its `input_required`), not cut off by the drain.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::spawn_app_with;

#[tokio::test]
async fn shutdown_ends_connect_waits_with_their_input_required_answer() {
    let app = spawn_app_with(|t| {
        let mut flow = toml::Table::new();
        flow.insert("connect_wait_ms".into(), 8000.into());
        t.insert("flow".into(), toml::Value::Table(flow));
    })
    .await;
    let args = json!({"provider": "demo"});
    let (_, first) = app.call_tool("alice", "whoami", args.clone()).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let waiting = {
        let body = crate::helpers::request(
            "tools/call",
            json!({"name": "whoami", "arguments": args, "requestState": state,
                   "inputResponses": {"connect_demo": {"action": "accept"}}}),
        );
        let request = app.mcp_request(Some(&app.token("alice")), &body);
        tokio::spawn(async move {
            let response = request.send().await.unwrap();
            (Instant::now(), crate::helpers::read(response).await)
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stopping = Instant::now();
    app.shut_down().await;
    let (answered, (status, body)) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    assert!(
        answered.duration_since(stopping) < Duration::from_secs(3),
        "{:?}",
        answered.duration_since(stopping)
    );
}

#[tokio::test]
async fn connect_wait_cannot_outlast_the_shutdown_drain() {
    let mut table: toml::Table = toml::from_str(
        r#"
        public_url = "https://connect.example.com"
        database_url = "postgres://localhost/x"
        keys = ["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]
        [auth]
        issuer = "https://idp.example.com"
        [flow]
        connect_wait_ms = 60000
        "#,
    )
    .unwrap();
    let err = mcp_connect::config::Settings::from_sources(None, Vec::new(), table.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("connect_wait_ms"), "{err}");
    table["flow"]["connect_wait_ms"] = 5000.into();
    mcp_connect::config::Settings::from_sources(None, Vec::new(), table).unwrap();
}
