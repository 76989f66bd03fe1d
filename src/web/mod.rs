//! The browser side and the operational endpoints. Each module registers its
//! own routes.
//!
//! Browser pages: sign-in and sign-out (`login`, `logout`, on `oidc` and
//! `session`), the connect flow (`connect`: the ticket link, consent, the
//! provider callback) and the connections page (`connections`, with the
//! clients allowed on each connection in `client_access`). Shared
//! pieces: `cookies` (the one cookie builder), `csrf`, `deadline` (every
//! page answered in bounded time), `forms` (bounded input), `headers`, `pages` (templates and the error page), `secret`
//! (one-time values).
//!
//! Operational endpoints: `health` (`/healthz`, `/readyz`) and `metrics`.

pub mod access_log;
pub mod assets;
pub mod client_access;
pub mod connect;
pub mod connection_label;
pub mod connections;
pub mod cookies;
pub mod csrf;
pub mod deadline;
pub mod error_pages;
pub mod forms;
pub mod headers;
pub mod health;
pub mod login;
pub mod login_state;
pub mod logout;
pub mod metrics;
pub mod oidc;
pub mod pages;
pub mod session;

use actix_web::{HttpRequest, web::ServiceConfig};

use crate::state::AppState;

pub fn configure(cfg: &mut ServiceConfig) {
    assets::configure(cfg);
    health::configure(cfg);
    metrics::configure(cfg);
    login::configure(cfg);
    logout::configure(cfg);
    connect::configure(cfg);
    connections::configure(cfg);
    client_access::configure(cfg);
    connection_label::configure(cfg);
}

/// The client's address and user agent, for audit rows: the address as
/// [`AppState::client_address`] finds it (never an `X-Forwarded-For` that
/// a client wrote itself), the agent as sent.
pub fn client_info(state: &AppState, req: &HttpRequest) -> (Option<String>, Option<String>) {
    let ip = state.client_address(req).map(|ip| ip.to_string());
    let agent = req
        .headers()
        .get(actix_web::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (ip, agent)
}
