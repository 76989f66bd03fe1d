//! A TCP relay in front of Postgres that can fall silent on the
//! connections it carries without closing them, as a NAT or load balancer
//! that dropped an idle mapping leaves a connection: bytes sent are never
//! answered, and nothing says the connection is gone.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

pub struct Relay {
    port: u16,
    /// Connections numbered below this are silent.
    silent_before: Arc<AtomicU64>,
    /// How many connections were accepted (numbered from 1).
    accepted: Arc<AtomicU64>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Relays every connection to `target` (`host:port`).
    pub async fn start(target: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent_before = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let (silent, count) = (silent_before.clone(), accepted.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let number = count.fetch_add(1, Ordering::SeqCst) + 1;
                let Ok(server) = TcpStream::connect(&target).await else {
                    continue;
                };
                let silent = silent.clone();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, number, silent.clone()));
                tokio::spawn(pump(server_read, client_write, number, silent));
            }
        });
        Relay {
            port,
            silent_before,
            accepted,
            accepting,
        }
    }

    /// A relay in front of the tests' Postgres server.
    pub async fn to_test_server() -> Relay {
        let target = url::Url::parse(&crate::helpers::server_url()).unwrap();
        let address = format!(
            "{}:{}",
            target.host_str().unwrap(),
            target.port().unwrap_or(5432)
        );
        Relay::start(address).await
    }

    /// The Postgres server URL through the relay.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}", self.port)
    }

    /// Every connection open now forwards nothing more, in either
    /// direction, and stays open; later ones are relayed.
    pub fn silence_open_connections(&self) {
        let open = self.accepted.load(Ordering::SeqCst);
        self.silent_before.store(open + 1, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies one direction of connection `number` until it closes; once the
/// connection is silenced, what arrives is dropped and the pump waits for
/// ever, holding the connection open.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    number: u64,
    silent_before: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if number < silent_before.load(Ordering::SeqCst) {
            // Hold both halves: the peer sees neither data nor a close.
            let _held = (from, to);
            std::future::pending::<()>().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
