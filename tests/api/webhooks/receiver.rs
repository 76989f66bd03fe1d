//! A webhook receiver on 127.0.0.1, as an operator's would be: it checks
//! every request's signature with its own implementation of the Standard
//! Webhooks algorithm (HMAC-SHA256 built here from SHA-256, not the
//! service's code), answers as the test says, and records each attempt and
//! any two attempts at one `webhook-id` that overlapped in time.

use std::{
    collections::HashMap,
    net::TcpListener,
    sync::Mutex,
    time::{Duration, Instant},
};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A signing secret for the tests' endpoints.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// How the receiver answers.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// 2xx, after `delay`, except for each id's first `fail_first` attempts (500).
    Answer { fail_first: usize, delay: Duration },
    /// Never answers (until the mode changes).
    Hang,
    /// 308 to another host's address.
    Redirect,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: String,
    pub status: u16,
    pub verified: bool,
    pub body: Value,
    pub at: Instant,
    /// What a receiver needs to check the signatures with another key.
    pub signed: Signed,
}

/// An attempt's signed parts, as received.
#[derive(Debug, Clone)]
pub struct Signed {
    pub timestamp: String,
    /// The `webhook-signature` header.
    pub signatures: String,
    pub raw_body: Vec<u8>,
}

#[derive(Default)]
struct Log {
    attempts: Vec<Attempt>,
    in_flight: HashMap<String, usize>,
    overlaps: Vec<String>,
    seen: HashMap<String, usize>,
}

struct Shared {
    mode: Mutex<Mode>,
    log: Mutex<Log>,
    key: Vec<u8>,
}

pub struct Receiver {
    pub url: String,
    shared: web::Data<Shared>,
    handle: actix_web::dev::ServerHandle,
}

impl Receiver {
    pub fn start(mode: Mode) -> Receiver {
        let key = STANDARD
            .decode(SECRET.strip_prefix("whsec_").unwrap())
            .unwrap();
        let shared = web::Data::new(Shared {
            mode: Mutex::new(mode),
            log: Mutex::default(),
            key,
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let data = shared.clone();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/hook", web::post().to(hook))
        })
        .workers(2)
        .listen(listener)
        .unwrap()
        .disable_signals()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            shared,
            handle,
        }
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        self.shared.log.lock().unwrap().attempts.clone()
    }

    /// Ids two of whose attempts were in flight at the same time.
    pub fn overlaps(&self) -> Vec<String> {
        self.shared.log.lock().unwrap().overlaps.clone()
    }

    /// Attempts answered 2xx, by id.
    pub fn acknowledged(&self) -> HashMap<String, usize> {
        let mut by_id = HashMap::new();
        for a in self.attempts().iter().filter(|a| a.status == 200) {
            *by_id.entry(a.id.clone()).or_default() += 1;
        }
        by_id
    }

    /// Waits until `n` distinct events were acknowledged (or `limit` passed).
    pub async fn wait_for_acknowledged(&self, n: usize, limit: Duration) -> HashMap<String, usize> {
        let started = Instant::now();
        loop {
            let acked = self.acknowledged();
            if acked.len() >= n || started.elapsed() > limit {
                return acked;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `n` attempts arrived (answered or not).
    pub async fn wait_for_attempts(&self, n: usize, limit: Duration) -> Vec<Attempt> {
        let started = Instant::now();
        loop {
            let seen = self.shared.log.lock().unwrap().seen.values().sum::<usize>();
            if seen >= n || started.elapsed() > limit {
                return self.attempts();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many requests arrived, answered or still hanging.
    pub fn arrived(&self) -> usize {
        self.shared.log.lock().unwrap().seen.values().sum()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        drop(self.handle.stop(false));
    }
}

/// Leaves the in-flight set however the handler ends (a hung one is
/// dropped when the server stops).
struct InFlight {
    shared: web::Data<Shared>,
    id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut log) = self.shared.log.lock()
            && let Some(n) = log.in_flight.get_mut(&self.id)
        {
            *n = n.saturating_sub(1);
        }
    }
}

async fn hook(req: HttpRequest, body: web::Bytes, shared: web::Data<Shared>) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (id, timestamp, signatures) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let verified = verify(&shared.key, &id, &timestamp, &signatures, &body);
    let attempt_no = {
        let mut log = shared.log.lock().unwrap();
        let running = log.in_flight.entry(id.clone()).or_default();
        *running += 1;
        if *running > 1 {
            log.overlaps.push(id.clone());
        }
        let seen = log.seen.entry(id.clone()).or_default();
        *seen += 1;
        *seen
    };
    let _in_flight = InFlight {
        shared: shared.clone(),
        id: id.clone(),
    };
    let mode = *shared.mode.lock().unwrap();
    let status = match mode {
        Mode::Hang => {
            // Until the client gives up or the mode changes.
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if !matches!(*shared.mode.lock().unwrap(), Mode::Hang) {
                    break 503;
                }
            }
        }
        Mode::Answer { fail_first, delay } => {
            tokio::time::sleep(delay).await;
            if attempt_no <= fail_first { 500 } else { 200 }
        }
        Mode::Redirect => 308,
    };
    shared.log.lock().unwrap().attempts.push(Attempt {
        id,
        status,
        verified,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: Instant::now(),
        signed: Signed {
            timestamp,
            signatures,
            raw_body: body.to_vec(),
        },
    });
    let mut answer = HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap());
    if status == 308 {
        answer.insert_header(("location", "https://elsewhere.example/hook?token=abc"));
    }
    answer.finish()
}

/// The Standard Webhooks check: a `v1,` signature among the
/// space-separated ones equals base64(HMAC-SHA256(key, "id.timestamp.body")),
/// and the timestamp is within five minutes of now.
pub fn verify(key: &[u8], id: &str, timestamp: &str, signatures: &str, body: &[u8]) -> bool {
    let Ok(ts) = timestamp.parse::<i64>() else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - ts).abs() > 300 {
        return false;
    }
    signed_by(key, id, timestamp, signatures, body)
}

fn signed_by(key: &[u8], id: &str, timestamp: &str, signatures: &str, body: &[u8]) -> bool {
    let mut message = format!("{id}.{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    let expected = STANDARD.encode(hmac_sha256(key, &message));
    signatures
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|s| s == expected)
}

/// RFC 2104 over SHA-256 (block size 64).
fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

#[test]
fn this_verifier_accepts_the_published_test_vector_and_nothing_else() {
    let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let (id, ts, body) = (
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "1614265330",
        br#"{"test": 2432232314}"#,
    );
    let good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    assert!(signed_by(&key, id, ts, good, body));
    assert!(signed_by(
        &key,
        id,
        ts,
        &format!("v1,bm9wZQ== {good}"),
        body
    ));
    assert!(!signed_by(&key, id, "1614265331", good, body));
    assert!(!signed_by(&key, id, ts, good, br#"{"test": 2432232315}"#));
    // Stale: the vector is from 2021.
    assert!(!verify(&key, id, ts, good, body));
}
