//! How every fake here is served, and any other test server that wants the
//! same: a real HTTP server on a free loopback port, one worker, stopped
//! when the value is dropped.

use std::net::TcpListener;

use actix_web::{App, HttpServer, dev::ServerHandle, middleware::from_fn, web};

use crate::{http::failing, recording::record};

/// A free loopback port, bound: its URL is known before anything is served
/// (for a server whose answers name it).
pub struct Bound {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub port: u16,
    listener: TcpListener,
}

/// A running server; stopped when dropped.
pub struct Server {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub port: u16,
    handle: ServerHandle,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Sends the stop command; its completion is not awaited.
        drop(self.handle.stop(false));
    }
}

pub fn bind() -> Bound {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    Bound {
        base: format!("http://127.0.0.1:{port}"),
        port,
        listener,
    }
}

/// Serves what `configure` mounts on a fresh port.
pub fn start<F>(configure: F) -> Server
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    bind().serve(configure)
}

impl Bound {
    /// Serves what `configure` mounts (routes and their data). A fake whose
    /// data is a provider fake's state also records every request and
    /// answers with the status a test set through `fail_with`.
    pub fn serve<F>(self, configure: F) -> Server
    where
        F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
    {
        let server = HttpServer::new(move || {
            App::new()
                .wrap(from_fn(failing))
                .wrap(from_fn(record))
                .configure(configure.clone())
        })
        .workers(1)
        .disable_signals()
        .listen(self.listener)
        .unwrap()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Server {
            base: self.base,
            port: self.port,
            handle,
        }
    }
}
