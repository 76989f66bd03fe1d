//! The MCP endpoint `POST /mcp`: protocol 2026-07-28 (stateless) and legacy
//! 2025-11-25 clients, served by rmcp's Streamable HTTP service through a
//! small actix bridge that authenticates the caller first.

mod access_log;
mod bridge;
mod envelope;
mod server;
pub mod state;
pub mod unavailable;
mod wire;

use std::sync::Arc;

use actix_web::web;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};

pub use access_log::Ended;
/// The bridge's conversions, for other actix front ends of an rmcp service
/// (the benchmark's bare server uses them, so it differs from ours only by
/// what it leaves out).
pub use bridge::{into_actix, request_head};
pub use server::McpServer;

use crate::startup::AppState;

/// The rmcp service behind `/mcp`, built once per application.
pub struct McpEndpoint {
    service: StreamableHttpService<McpServer, NeverSessionManager>,
}

impl McpEndpoint {
    pub fn new(state: &AppState) -> Self {
        let settings = &state.settings;
        let config = StreamableHttpServerConfig::default()
            // Every request stands alone, so any instance can serve any request.
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_allowed_hosts(settings.effective_allowed_hosts())
            .with_allowed_origins(settings.effective_allowed_origins())
            .enforce_origin_validation()
            .with_max_request_body_bytes(settings.max_body_bytes);
        let server = McpServer::new(state.clone());
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        Self { service }
    }
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/mcp").route(web::route().to(bridge::handle)));
}
