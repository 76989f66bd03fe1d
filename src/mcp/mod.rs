//! The MCP endpoint `POST /mcp`: protocol 2026-07-28 (stateless) and legacy
//! 2025-11-25 clients, served by rmcp's Streamable HTTP service through a
//! small actix bridge that authenticates the caller first.

mod access_line;
mod access_log;
mod bridge;
mod envelope;
mod host;
mod protocol_version;
mod served_params;
mod server;
mod wire;

use std::sync::{Arc, OnceLock};

use actix_web::web;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};

pub use access_log::Ended;
/// The request's log line and metrics, for the benchmark's floor server,
/// which writes the same line with the same code when asked to do the work
/// mcp-connect cannot leave out.
pub use access_log::{CallRecord, RequestFacts, ToolOutcome};
/// The bridge's conversions, for other actix front ends of an rmcp service
/// (the benchmark's bare server uses them, so it differs from ours only by
/// what it leaves out).
pub use bridge::{into_actix, request_head};
pub use server::McpServer;

use crate::{shards::Sharded, state::AppState};

/// The rmcp service behind `/mcp`, one per worker thread. rmcp hangs each
/// request's cancellation token off its service's own token, under that
/// token's lock: with one service, every request of every worker took the
/// same lock and wrote the same reference count, a cache line moving
/// between cores on every request. The copies share the application.
pub struct McpEndpoint {
    services: Sharded<OnceLock<Service>>,
    /// Checked first, so that the refusal is the host's (rmcp checks too).
    hosts: host::AllowedHosts,
    config: StreamableHttpServerConfig,
    server: McpServer,
}

type Service = StreamableHttpService<McpServer, NeverSessionManager>;

/// Origins with the scheme's default port written out. An origin's
/// serialization leaves out 443 and 80 (RFC 6454); rmcp reads a portless
/// entry as "any port" and warns about it at every start, a warning the
/// operator could not act on. With the port explicit it matches exactly
/// the same browser origins (rmcp applies the default port to an `Origin`
/// header without one).
fn with_explicit_ports(origins: Vec<String>) -> Vec<String> {
    origins
        .into_iter()
        .map(|origin| match url::Url::parse(&origin) {
            Ok(url) if url.port().is_none() && url.host_str().is_some() => {
                match url.port_or_known_default() {
                    Some(port) => format!(
                        "{}://{}:{port}",
                        url.scheme(),
                        url.host_str().unwrap_or_default()
                    ),
                    None => origin,
                }
            }
            _ => origin,
        })
        .collect()
}

impl McpEndpoint {
    /// Fails as [`McpServer::new`] does.
    pub fn new(state: &AppState) -> Result<Self, serde_json::Error> {
        let settings = &state.settings;
        let config = StreamableHttpServerConfig::default()
            // Every request stands alone, so any instance can serve any request.
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_allowed_hosts(settings.effective_allowed_hosts())
            .with_allowed_origins(with_explicit_ports(settings.effective_allowed_origins()))
            .enforce_origin_validation()
            .with_max_request_body_bytes(settings.max_body_bytes);
        let server = McpServer::new(
            state.connect.clone(),
            settings.mcp_resource_str().to_owned(),
        )?;
        Ok(Self {
            services: Sharded::default(),
            hosts: host::AllowedHosts::new(&settings.effective_allowed_hosts()),
            config,
            server,
        })
    }

    /// The calling thread's service, built when it first serves.
    fn service(&self) -> &Service {
        self.services.local().get_or_init(|| {
            let server = self.server.own_copy();
            let config = self
                .config
                .clone()
                .with_cancellation_token(tokio_util::sync::CancellationToken::new());
            StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(NeverSessionManager::default()),
                config,
            )
        })
    }
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/mcp").route(web::route().to(bridge::handle)));
}

#[cfg(test)]
mod tests {
    use super::with_explicit_ports;

    #[test]
    fn origins_reach_rmcp_with_their_port() {
        let given = vec![
            "https://connect.example.com".to_owned(),
            "http://localhost:8080".to_owned(),
            "http://example.org".to_owned(),
            "null".to_owned(),
        ];
        assert_eq!(
            with_explicit_ports(given),
            [
                "https://connect.example.com:443",
                "http://localhost:8080",
                "http://example.org:80",
                "null"
            ]
        );
    }
}
