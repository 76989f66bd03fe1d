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

/// The first stop signal drains: a request under way holds the process
/// (here one whose body never finishes). A second signal stops it at
/// once, for whoever cannot wait out the drain.
#[tokio::test]
async fn a_second_stop_signal_ends_the_drain_at_once() {
    use std::io::{BufRead, Write};
    let server = crate::helpers::server_url();
    let db = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let mut dev = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .args(["dev", "--port", "0", "--json", "--database-url"])
        .arg(format!("{server}/{db}"))
        .env("MCP_CONNECT_BODY_READ_TIMEOUT_SECS", "120")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(dev.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("dev's JSON line");
    let mcp = url::Url::parse(ready["mcp_url"].as_str().unwrap()).unwrap();
    let address = format!("{}:{}", mcp.host_str().unwrap(), mcp.port().unwrap());
    let mut request = std::net::TcpStream::connect(&address).unwrap();
    write!(
        request,
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nContent-Length: 200\r\n\r\n{{\"jsonrpc\"",
        ready["token"].as_str().unwrap()
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let term = |pid: u32| {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    term(dev.id());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        dev.try_wait().unwrap().is_none(),
        "the drain waits for the request under way"
    );
    let second = Instant::now();
    term(dev.id());
    let stopped = super::startup::exit_within(&mut dev, Duration::from_secs(5));
    assert!(stopped.is_some(), "still draining after a second signal");
    assert!(second.elapsed() < Duration::from_secs(5));
    drop(request);
    crate::helpers::drop_database(&db).await;
}
