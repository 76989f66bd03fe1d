//! Idle connections stay open longer than the common clients' pools keep
//! them (5 s in Python's httpx, 4 s in Node's undici): a client that sends
//! on a pooled connection just as the server closes it loses that request,
//! and a POST is not retried. `keep_alive_secs` sets how long. Once the
//! server is stopping, every answer closes its connection.

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::helpers::{PROTOCOL, TestApp, request, spawn_app, spawn_app_with};

/// Sends `GET /healthz` on `stream` and reads the whole answer; returns its
/// status line, or `None` when the server has closed the connection.
async fn health_on(stream: &mut TcpStream, app: &TestApp) -> Option<String> {
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
        app.port
    );
    let head = exchange(stream, &request).await?;
    Some(head.lines().next().unwrap_or_default().to_owned())
}

/// Sends `request` on `stream` and reads the whole answer; returns its
/// head, or `None` when the server has closed the connection.
async fn exchange(stream: &mut TcpStream, request: &str) -> Option<String> {
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("the server neither answered nor closed")
            .ok()?;
        if n == 0 {
            return None;
        }
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .expect("a Content-Length");
            if body.len() >= length {
                return Some(head.to_owned());
            }
        }
    }
}

#[tokio::test]
async fn an_idle_connection_outlives_the_clients_own_pool_timeouts() {
    let app = spawn_app().await;
    let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
    let first = health_on(&mut stream, &app).await;
    assert_eq!(first.as_deref(), Some("HTTP/1.1 200 OK"));
    // Past httpx's 5 s (and actix-web's own default of 5 s).
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let second = health_on(&mut stream, &app).await;
    assert_eq!(
        second.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "the server closed a connection idle for 6.5 s"
    );
}

#[tokio::test]
async fn keep_alive_secs_sets_when_an_idle_connection_is_closed() {
    let app = spawn_app_with(|t| {
        t.insert("keep_alive_secs".into(), 1.into());
    })
    .await;
    let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
    let first = health_on(&mut stream, &app).await;
    assert_eq!(first.as_deref(), Some("HTTP/1.1 200 OK"));
    let idle = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("the idle connection was still open after 10 s");
    assert!(matches!(read, Ok(0) | Err(_)), "unexpected bytes: {read:?}");
    let after = idle.elapsed();
    // actix reads its keep-alive deadline off a clock it updates every
    // 500 ms, so 1 s closes the connection 0.5 to 1 s after the answer;
    // the default (15 s) would be past the upper bound.
    assert!(
        after >= Duration::from_millis(400) && after < Duration::from_secs(5),
        "closed after {after:?}, not about 1 s"
    );
}

/// Whether the server closes `stream` within a few seconds.
async fn closes(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(3), stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn once_stopping_every_answer_closes_its_connection() {
    let app = spawn_app().await;
    let port = app.port;
    let list = request("tools/list", serde_json::json!({})).to_string();
    let mcp = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {PROTOCOL}\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{list}",
        app.token("alice"),
        list.len()
    );
    let page = format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let mut streams = Vec::new();
    for request in [&mcp, &page] {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let head = exchange(&mut stream, request).await.unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            !head.to_ascii_lowercase().contains("connection: close"),
            "{head}"
        );
        streams.push(stream);
    }
    app.state.begin_shutdown();
    for (request, mut stream) in [&mcp, &page].into_iter().zip(streams) {
        let what = request.lines().next().unwrap_or_default().to_owned();
        let head = exchange(&mut stream, request).await.unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{what}: {head}");
        assert!(
            head.to_ascii_lowercase().contains("connection: close"),
            "{what} while stopping: {head}"
        );
        assert!(
            closes(&mut stream).await,
            "{what}: the connection stayed open"
        );
    }
}
