//! The browser side and the operational endpoints. Each module registers its
//! own routes.
//!
//! Browser pages: sign-in and sign-out (`login`, `logout`, on `oidc` and
//! `session`), the connect flow (`connect`: the ticket link, consent, the
//! provider callback) and the connections page (`connections`, with the
//! clients allowed on each connection in `client_access`). Shared
//! pieces: `cookies` (the one cookie builder), `csrf`, `forms` (bounded
//! input), `headers`, `pages` (templates and the error page), `secret`
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

use actix_web::web::ServiceConfig;

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
