//! A client dripping a request body is cut off at the body deadline with
//! 408, on `/mcp` and on web forms, instead of holding the socket.

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::helpers::{PROTOCOL, TestApp, spawn_app_with};

/// Sends `head` announcing a 200-byte body, then one byte every 200 ms;
/// returns the status line of the answer and how long it took.
async fn drip(app: &TestApp, head: String) -> (String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    for _ in 0..200 {
        // A write fails once the server has answered and closed.
        if stream.write_all(b" ").await.is_err() {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.lines().next().unwrap_or_default().to_owned();
    (status, started.elapsed())
}

#[tokio::test]
async fn slow_bodies_get_408_at_the_deadline() {
    let app = spawn_app_with(|t| {
        t.insert("body_read_timeout_secs".into(), 1.into());
    })
    .await;
    let port = app.port;
    let token = app.token("alice");
    let mcp = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {PROTOCOL}\r\nContent-Length: 200\r\n\r\n{{"
    );
    let form = format!(
        "POST /logout HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\na="
    );
    for (what, head) in [("/mcp", mcp), ("form", form)] {
        let (status, took) = drip(&app, head).await;
        assert!(
            status.starts_with("HTTP/1.1 408"),
            "{what}: {status:?} after {took:?}"
        );
        assert!(took < Duration::from_secs(5), "{what}: {took:?}");
    }
}
