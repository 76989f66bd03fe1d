//! One server with fixed answers, on paths under one base, that records
//! every request it receives: GitHub, Google and Slack with their
//! documented quirks, the dev demo provider, a strict RFC 6749 server and
//! Atlassian's accessible resources. For unit tests that check exactly what
//! the service sends and how it reads each answer; the routes live in
//! `scripted_routes`.

use std::{collections::HashMap, sync::Mutex};

use actix_web::{HttpRequest, web};

pub use crate::scripted_routes::{
    ATLASSIAN_CLOUD_ID, ATLASSIAN_TOKEN, DEMO_TOKEN, GITHUB_TOKEN, GOOGLE_TOKEN, RFC_TOKEN,
    SLACK_TOKEN,
};
use crate::server::Server;

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Lowercase names.
    pub headers: HashMap<String, String>,
    pub form: HashMap<String, String>,
    pub body: String,
}

#[derive(Default)]
struct FakeState {
    seen: Mutex<Vec<Seen>>,
}

pub struct Fake {
    state: web::Data<FakeState>,
    server: Server,
}

impl Fake {
    pub async fn start() -> Fake {
        let state = web::Data::new(FakeState::default());
        let data = state.clone();
        let server = crate::server::start(move |cfg| {
            cfg.app_data(data.clone())
                .default_service(web::to(record_and_serve));
        });
        Fake { state, server }
    }

    pub fn base(&self) -> &str {
        &self.server.base
    }

    /// Requests seen on `path`, oldest first.
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        let seen = self.state.seen.lock().unwrap();
        seen.iter().filter(|s| s.path == path).cloned().collect()
    }
}

async fn record_and_serve(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<FakeState>,
) -> actix_web::HttpResponse {
    let text = String::from_utf8_lossy(&body).into_owned();
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let seen = Seen {
        method: req.method().to_string(),
        path: req.path().to_owned(),
        query: req.query_string().to_owned(),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        form,
        body: text,
    };
    state.seen.lock().unwrap().push(seen.clone());
    crate::scripted_routes::serve(&seen)
}
