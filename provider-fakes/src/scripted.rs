//! One server with fixed answers, on paths under one base, that records
//! every request it receives: the dev demo provider, a strict RFC 6749
//! server and Atlassian's accessible resources. For unit tests that check
//! exactly what the service sends and how it reads each answer; the routes
//! live in `scripted_routes`. (GitHub, Google and Slack have one fake
//! each, which records requests too: `FakeProvider::seen`.)

use std::sync::Mutex;

use actix_web::{HttpRequest, web};

pub use crate::recording::Seen;
pub use crate::scripted_routes::{ATLASSIAN_CLOUD_ID, ATLASSIAN_TOKEN, DEMO_TOKEN, RFC_TOKEN};
use crate::server::Server;

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
    let seen = Seen::of(&req, &body);
    state.seen.lock().unwrap().push(seen.clone());
    crate::scripted_routes::serve(&seen)
}
