//! Idle connections stay open longer than the common clients' pools keep
//! them (5 s in Python's httpx, 4 s in Node's undici): a client that sends
//! on a pooled connection just as the server closes it loses that request,
//! and a POST is not retried. `keep_alive_secs` sets how long.

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};

/// Sends `GET /healthz` on `stream` and reads the whole answer; returns its
/// status line, or `None` when the server has closed the connection.
async fn health_on(stream: &mut TcpStream, app: &TestApp) -> Option<String> {
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
        app.port
    );
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
                return Some(head.lines().next().unwrap_or_default().to_owned());
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
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_secs(5),
        "closed after {after:?}, not about 1 s"
    );
}
