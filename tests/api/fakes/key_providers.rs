//! Fakes of two providers connected with a credential instead of OAuth,
//! with the quirks of the real ones:
//!
//! - **Datadog-like**: the API key in `DD-API-KEY`, the application key in
//!   `DD-APPLICATION-KEY`; the site (`datadoghq.eu`, …) is part of the host.
//!   `GET /api/v1/validate` checks the API key alone (`{"valid": true}`, or
//!   403 `{"errors": ["Forbidden"]}`); other endpoints want both keys and
//!   answer 403 the same way otherwise. Here the site is `127.0.0.1` or
//!   `localhost` (both reach the fake; the `Host` header tells which).
//! - **Twilio-like**: HTTP Basic with the account SID and auth token; the SID
//!   is also in every path (`/2010-04-01/Accounts/{sid}.json`). Wrong
//!   credentials: 401 with Twilio's error 20003; another account's path with
//!   good credentials: 404 (error 20404).
//!
//! Both also serve a hostile `…/echo` that reflects the credential it was
//! sent in every form a server might (raw, percent-encoded, JSON-escaped),
//! as real providers never do. Every request is counted and recorded.

use std::{
    net::TcpListener,
    sync::{Arc, Mutex},
};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, dev::ServerHandle, web};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use super::hostile::forms;

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
    handle: ServerHandle,
}

impl Drop for KeyFake {
    fn drop(&mut self) {
        drop(self.handle.stop(false));
    }
}

fn random_hex(len: usize) -> String {
    (0..len)
        .map(|_| char::from_digit(rand::random_range(0..16), 16).unwrap_or('0'))
        .collect()
}

async fn serve(first: String, second: String, routes: fn(&mut web::ServiceConfig)) -> KeyFake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let shared = Arc::new(Shared {
        first: first.clone(),
        second: second.clone(),
        memory: Mutex::default(),
    });
    let data = web::Data::from(shared.clone());
    let server = HttpServer::new(move || App::new().app_data(data.clone()).configure(routes))
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
    let handle = server.handle();
    tokio::spawn(server);
    KeyFake {
        base: format!("http://127.0.0.1:{port}"),
        port,
        first,
        second,
        shared,
        handle,
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

pub mod datadog {
    use super::*;

    /// A Datadog-like fake with a random API key (32 hex) and application
    /// key (40 hex).
    pub async fn start() -> KeyFake {
        serve(random_hex(32), random_hex(40), routes).await
    }

    fn routes(cfg: &mut web::ServiceConfig) {
        cfg.route("/api/v1/validate", web::get().to(validate))
            .route("/api/v1/echo", web::get().to(echo))
            .route("/api/{tail:.*}", web::to(api));
    }

    fn forbidden() -> HttpResponse {
        HttpResponse::Forbidden().json(json!({"errors": ["Forbidden"]}))
    }

    fn keys(req: &HttpRequest) -> (Option<&str>, Option<&str>) {
        let get = |n| req.headers().get(n).and_then(|v| v.to_str().ok());
        (get("dd-api-key"), get("dd-application-key"))
    }

    async fn validate(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
        record(&req, &shared);
        match keys(&req).0 {
            Some(k) if k == shared.first => HttpResponse::Ok().json(json!({"valid": true})),
            _ => forbidden(),
        }
    }

    fn both_keys(req: &HttpRequest, shared: &Shared) -> bool {
        keys(req) == (Some(shared.first.as_str()), Some(shared.second.as_str()))
    }

    async fn echo(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
        record(&req, &shared);
        if !both_keys(&req, &shared) {
            return forbidden();
        }
        echo_all(&[&shared.first, &shared.second])
    }

    async fn api(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
        record(&req, &shared);
        if !both_keys(&req, &shared) {
            return forbidden();
        }
        HttpResponse::Ok().json(json!({
            "monitors": [{"id": 1, "name": "CPU high"}],
            "path": req.path(),
        }))
    }
}

pub mod twilio {
    use super::*;

    /// A Twilio-like fake with a random account SID and auth token.
    pub async fn start() -> KeyFake {
        serve(format!("AC{}", random_hex(32)), random_hex(32), routes).await
    }

    fn routes(cfg: &mut web::ServiceConfig) {
        cfg.route("/2010-04-01/Accounts/{file}", web::get().to(account))
            .route("/2010-04-01/Accounts/{sid}/Echo.json", web::get().to(echo))
            .route(
                "/2010-04-01/Accounts/{sid}/{tail:.*}",
                web::get().to(resource),
            );
    }

    /// Twilio's answer to missing or wrong credentials.
    fn unauthenticated() -> HttpResponse {
        HttpResponse::Unauthorized()
            .insert_header(("WWW-Authenticate", "Basic realm=\"Twilio API\""))
            .json(json!({
                "code": 20003,
                "message": "Authenticate",
                "more_info": "https://www.twilio.com/docs/errors/20003",
                "status": 401
            }))
    }

    fn not_found() -> HttpResponse {
        HttpResponse::NotFound().json(json!({
            "code": 20404,
            "message": "The requested resource was not found",
            "more_info": "https://www.twilio.com/docs/errors/20404",
            "status": 404
        }))
    }

    /// The account SID of good Basic credentials, if they are.
    fn authenticated(req: &HttpRequest, shared: &Shared) -> Option<String> {
        let header = req.headers().get("authorization")?.to_str().ok()?;
        let encoded = header.strip_prefix("Basic ")?;
        let decoded = String::from_utf8(STANDARD.decode(encoded).ok()?).ok()?;
        let (sid, token) = decoded.split_once(':')?;
        (sid == shared.first && token == shared.second).then(|| sid.to_owned())
    }

    async fn account(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
        record(&req, &shared);
        let Some(sid) = authenticated(&req, &shared) else {
            return unauthenticated();
        };
        let file = req.match_info().query("file");
        if file != format!("{sid}.json") {
            return not_found();
        }
        HttpResponse::Ok().json(json!({
            "sid": sid,
            "friendly_name": "Alice's Twilio",
            "status": "active",
            "type": "Full",
        }))
    }

    async fn echo(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
        record(&req, &shared);
        if authenticated(&req, &shared).is_none() {
            return unauthenticated();
        }
        let header = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let basic = header.trim_start_matches("Basic ").to_owned();
        echo_all(&[&shared.second, &basic])
    }

    async fn resource(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
        record(&req, &shared);
        let Some(sid) = authenticated(&req, &shared) else {
            return unauthenticated();
        };
        if req.match_info().query("sid") != sid {
            return not_found();
        }
        HttpResponse::Ok().json(json!({
            "messages": [{"sid": "SM1", "body": "hello"}],
            "uri": req.path(),
        }))
    }
}
