//! Fakes of two providers connected with a credential instead of OAuth,
//! with the quirks of the real ones:
//!
//! - **Datadog-like**: the API key in `DD-API-KEY`, the application key in
//!   `DD-APPLICATION-KEY`; the site (`datadoghq.eu`, …) is part of the host.
//!   `GET /api/v1/validate` checks the API key alone (`{"valid": true}`, or
//!   403 `{"errors": ["Forbidden"]}`), `GET /api/v2/validate_keys` both
//!   (`{"status": "ok"}`); other endpoints want both keys and answer 403
//!   the same way otherwise. Here the site is `127.0.0.1` or
//!   `localhost` (both reach the fake; the `Host` header tells which).
//! - **Twilio-like**: HTTP Basic with the account SID and auth token; the SID
//!   is also in every path (`/2010-04-01/Accounts/{sid}.json`). Wrong
//!   credentials: 401 with Twilio's error 20003; another account's path with
//!   good credentials: 404 (error 20404).
//!
//! Both also serve a hostile `…/echo` that reflects the credential it was
//! sent in every form a server might (raw, percent-encoded, JSON-escaped),
//! as real providers never do. Every request is counted and recorded.

use std::sync::{Arc, Mutex};

use actix_web::{HttpRequest, HttpResponse, web};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::Value;

use crate::{hostile::forms, server::Server};

pub mod datadog;
pub mod twilio;

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub host: String,
    pub path: String,
    pub authorization: Option<String>,
    pub api_key: Option<String>,
    pub application_key: Option<String>,
}

#[derive(Default)]
struct Memory {
    seen: Vec<Seen>,
}

struct Shared {
    /// The credential the fake accepts: (API key, application key) or
    /// (account SID, auth token).
    first: String,
    second: String,
    memory: Mutex<Memory>,
}

/// A running fake; stopped when dropped.
pub struct KeyFake {
    pub base: String,
    pub port: u16,
    /// The API key (Datadog) or account SID (Twilio) it accepts.
    pub first: String,
    /// The application key (Datadog) or auth token (Twilio) it accepts.
    pub second: String,
    shared: Arc<Shared>,
    _server: Server,
}

fn random_hex(len: usize) -> String {
    (0..len)
        .map(|_| char::from_digit(rand::random_range(0..16), 16).unwrap_or('0'))
        .collect()
}

async fn serve(first: String, second: String, routes: fn(&mut web::ServiceConfig)) -> KeyFake {
    let shared = Arc::new(Shared {
        first: first.clone(),
        second: second.clone(),
        memory: Mutex::default(),
    });
    let data = web::Data::from(shared.clone());
    let server = crate::server::start(move |cfg| {
        cfg.app_data(data.clone());
        routes(cfg);
    });
    KeyFake {
        base: server.base.clone(),
        port: server.port,
        first,
        second,
        shared,
        _server: server,
    }
}

impl KeyFake {
    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.memory.lock().unwrap().seen.clone()
    }

    /// How many requests reached the fake.
    pub fn requests(&self) -> usize {
        self.shared.memory.lock().unwrap().seen.len()
    }

    /// The values that must never appear in a page, a log or a result.
    pub fn secrets(&self, sid_is_secret: bool) -> Vec<String> {
        let mut out = vec![self.second.clone()];
        if sid_is_secret {
            out.push(self.first.clone());
        } else {
            out.push(STANDARD.encode(format!("{}:{}", self.first, self.second)));
        }
        out
    }

    /// `[providers.<name>]` pointing the shipped entry at this fake.
    pub fn configure(&self, table: &mut toml::Table, name: &str, entry: toml::Table) {
        let providers = table
            .entry("providers")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(providers) = providers {
            providers.insert(name.to_owned(), entry.into());
        }
    }
}

fn record(req: &HttpRequest, shared: &Shared) {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        host: header("host").unwrap_or_default(),
        path: req.path().to_owned(),
        authorization: header("authorization"),
        api_key: header("dd-api-key"),
        application_key: header("dd-application-key"),
    };
    shared.memory.lock().unwrap().seen.push(seen);
}

/// An answer reflecting `secrets` in every form, as values and keys.
fn echo_all(secrets: &[&str]) -> HttpResponse {
    let mut object = serde_json::Map::new();
    let mut text = Vec::new();
    for secret in secrets {
        for form in forms(secret) {
            text.push(form.clone());
            object.insert(form.clone(), Value::String(format!("you sent {form}")));
        }
    }
    // Escaped forms go into the JSON text as written, not re-escaped.
    let body = format!(
        "{{\"reflected\": \"{}\", \"as_keys\": {}}}",
        text.join(" "),
        Value::Object(object)
    );
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
}
