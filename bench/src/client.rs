//! One keep-alive HTTP/1.1 connection to a loopback server, on hyper's
//! client connection API: no pool, no redirects, no cookies, so the load
//! generator spends as little as possible per request and exactly the same
//! for every server. Reconnects after an error or a `Connection: close`.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, anyhow};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Longest any single request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A server's answer, read whole.
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub struct Conn {
    addr: SocketAddr,
    host: http::HeaderValue,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    /// A connection to `base` (`http://127.0.0.1:PORT`); opened on first use.
    pub fn new(base: &str) -> anyhow::Result<Self> {
        let url = url::Url::parse(base).with_context(|| format!("bad base URL {base}"))?;
        let host = url.host_str().ok_or_else(|| anyhow!("no host in {base}"))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let addr: SocketAddr = format!("{host}:{port}")
            .parse()
            .with_context(|| format!("{base} is not a loopback IP address"))?;
        if !addr.ip().is_loopback() {
            anyhow::bail!("{base}: the benchmark talks to loopback addresses only");
        }
        Ok(Self {
            addr,
            host: http::HeaderValue::from_str(&format!("{host}:{port}"))?,
            sender: None,
        })
    }

    async fn ready(&mut self) -> anyhow::Result<&mut SendRequest<Full<Bytes>>> {
        if self.sender.as_ref().is_some_and(|s| s.is_closed()) {
            self.sender = None;
        }
        if self.sender.is_none() {
            let stream = TcpStream::connect(self.addr)
                .await
                .with_context(|| format!("connect {}", self.addr))?;
            stream.set_nodelay(true)?;
            let (sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                // Ends when the server closes or the sender is dropped.
                let _ = connection.await;
            });
            self.sender = Some(sender);
        }
        let sender = self
            .sender
            .as_mut()
            .ok_or_else(|| anyhow!("no connection"))?;
        sender.ready().await?;
        Ok(sender)
    }

    /// Sends one request (origin-form URI; `Host` is added) and reads the
    /// whole answer. On any error the connection is dropped and the next
    /// request opens a new one.
    pub async fn send(&mut self, mut request: http::Request<Full<Bytes>>) -> anyhow::Result<Reply> {
        request
            .headers_mut()
            .insert(http::header::HOST, self.host.clone());
        let result = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let sender = self.ready().await?;
            let response = sender.send_request(request).await?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            anyhow::Ok(Reply {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            })
        })
        .await
        .map_err(|_| anyhow!("no answer within {REQUEST_TIMEOUT:?}"))
        .and_then(|r| r);
        if result.is_err() {
            self.sender = None;
        }
        result
    }

    pub async fn get(&mut self, path: &str) -> anyhow::Result<Reply> {
        let request = http::Request::get(path).body(Full::new(Bytes::new()))?;
        self.send(request).await
    }

    pub async fn post_json(
        &mut self,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<Reply> {
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
        self.send(request).await
    }
}
