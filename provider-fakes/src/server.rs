//! How every fake here is served: a real HTTP server on a free loopback
//! port, one worker, stopped when the value is dropped.

use std::net::TcpListener;

use actix_web::{App, HttpServer, dev::ServerHandle, middleware::from_fn, web};

use crate::http::failing;

pub(crate) struct Server {
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

/// Serves what `configure` mounts (routes and their data). A fake whose
/// data is a [`crate::state::Shared`] also answers with the status a test
/// set through `fail_with`.
pub(crate) fn start<F>(configure: F) -> Server
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = HttpServer::new(move || {
        App::new()
            .wrap(from_fn(failing))
            .configure(configure.clone())
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    Server {
        base: format!("http://127.0.0.1:{port}"),
        port,
        handle,
    }
}
