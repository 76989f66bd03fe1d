//! The top-level settings (`Settings`, the keys outside any table) and what
//! is derived from them: the base URL, the MCP resource, the accepted hosts
//! and origins.

use std::{collections::BTreeMap, net::SocketAddr};

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use super::{
    AuthSettings, ClientsSettings, FlowSettings, GrantMode, ProviderSettings, WebSettings,
    defaults, lenient,
};

/// Everything the service needs to run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The public base URL of this service, e.g. `https://connect.example.com`.
    /// The MCP endpoint is `<public_url>/mcp`; that is also the resource
    /// (token audience) this server accepts.
    pub public_url: Url,
    /// Address to listen on.
    #[serde(default = "defaults::bind")]
    pub bind: SocketAddr,
    /// Postgres connection string: `postgres://HOST/DATABASE`, or for a
    /// Unix socket `postgres:///DATABASE?host=/var/run/postgresql`.
    pub database_url: SecretString,
    /// Upper bound of pooled database connections.
    #[serde(
        default = "defaults::db_max_connections",
        deserialize_with = "lenient::number"
    )]
    pub database_max_connections: u32,
    /// Time limits on Postgres: statements, connections, start-up.
    #[serde(default)]
    pub database: super::DatabaseSettings,
    /// How long audit rows are kept.
    #[serde(default)]
    pub audit: super::AuditSettings,
    /// How long a revocation the provider failed is tried again.
    #[serde(default)]
    pub revocation: super::RevocationSettings,
    /// Whether start-up creates the database when it does not exist, through
    /// the server's `postgres` maintenance database (connected to only then:
    /// an existing database is all start-up needs). Managed Postgres and
    /// PgBouncer often forbid that connection: create the database
    /// beforehand there (and set `false`, to hear of a missing one as such).
    #[serde(default = "defaults::yes", deserialize_with = "lenient::boolean")]
    pub database_create_if_missing: bool,
    /// AES-256-GCM keys as `kid:base64` entries; the first seals, all open.
    #[serde(deserialize_with = "lenient::secret_list")]
    pub keys: Vec<SecretString>,
    /// `Host` header values accepted on `/mcp` (DNS-rebinding protection).
    /// Empty means: the host of `public_url` only.
    #[serde(default, deserialize_with = "lenient::list")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted on `/mcp`. Empty means: the origin of
    /// `public_url` only. Requests without `Origin` (non-browser clients) pass.
    #[serde(default, deserialize_with = "lenient::list")]
    pub allowed_origins: Vec<String>,
    /// The reverse proxies in front of the service, as addresses or
    /// networks (`10.0.0.0/8`). Only a request from one of these has its
    /// `X-Forwarded-For` read for the client's address that audit rows and
    /// access lines record; empty, every request is recorded with its peer
    /// address (behind a proxy, the proxy's).
    #[serde(default)]
    pub trusted_proxies: super::TrustedProxies,
    /// Largest accepted request body on `/mcp`, in bytes.
    #[serde(
        default = "defaults::max_body_bytes",
        deserialize_with = "lenient::number"
    )]
    pub max_body_bytes: usize,
    /// How long a request body (on `/mcp` and web forms) may take to
    /// arrive, in seconds; slower ones get 408.
    #[serde(
        default = "defaults::body_read_timeout_secs",
        deserialize_with = "lenient::number"
    )]
    pub body_read_timeout_secs: u64,
    /// How long an idle HTTP/1.1 connection is kept open for the client's
    /// next request, in seconds. Longer than the idle time of the pools in
    /// front (HTTP clients, the proxy): a pool that reuses a connection
    /// the server is closing at that moment loses the request it sent.
    #[serde(
        default = "defaults::keep_alive_secs",
        deserialize_with = "lenient::number"
    )]
    pub keep_alive_secs: u64,
    /// `json` (one object per line) or `pretty`.
    #[serde(default = "defaults::log_format")]
    pub log_format: LogFormat,
    /// `true` only in plain-http development on loopback: cookies lose
    /// `Secure` (and so the `__Host-` prefix).
    #[serde(default, deserialize_with = "lenient::boolean")]
    pub insecure_http: bool,
    /// The bearer token `/metrics` asks for. Unset: `/metrics` answers 404
    /// (dev mode excepted, see [`Settings::metrics_open`]).
    #[serde(default)]
    pub metrics_token: Option<SecretString>,
    /// `/metrics` without a token when none is set. Not a setting (the file
    /// and the environment cannot set it): only `mcp-connect dev`, which
    /// listens on loopback, turns it on.
    #[serde(skip)]
    pub metrics_open: bool,
    /// How bearer tokens for `/mcp` are checked.
    pub auth: AuthSettings,
    /// Lifetimes of the one-time values of the connect flow.
    #[serde(default)]
    pub flow: FlowSettings,
    /// The browser side: sessions.
    #[serde(default)]
    pub web: WebSettings,
    /// Which MCP clients may use a connection: `per_client` (only those the
    /// user approved for it) or `per_user` (every client of the user).
    #[serde(default)]
    pub grants: GrantMode,
    /// How MCP clients are named to people.
    #[serde(default)]
    pub clients: ClientsSettings,
    /// Where connection events are sent (`[webhooks.endpoints.NAME]`).
    #[serde(default)]
    pub webhooks: super::WebhookSettings,
    /// Third-party providers users can connect, by name (`[providers.github]`).
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Derived from `public_url` after loading.
    #[serde(skip)]
    pub(super) mcp_resource: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Pretty,
}

/// `json` or `pretty`, in any case (`JSON` too, as `dev` takes it).
impl<'de> Deserialize<'de> for LogFormat {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.eq_ignore_ascii_case("json") {
            Ok(Self::Json)
        } else if text.eq_ignore_ascii_case("pretty") {
            Ok(Self::Pretty)
        } else {
            Err(serde::de::Error::unknown_variant(
                &text,
                &["json", "pretty"],
            ))
        }
    }
}

impl Settings {
    /// See `body_read_timeout_secs`.
    pub fn body_read_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.body_read_timeout_secs)
    }

    /// See `keep_alive_secs`.
    pub fn keep_alive(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.keep_alive_secs)
    }

    /// The base URL without a trailing slash, for joining paths.
    pub fn base_url(&self) -> String {
        self.public_url.as_str().trim_end_matches('/').to_owned()
    }

    /// The canonical resource URI of the MCP endpoint: the audience bearer
    /// tokens must carry and the audience of every sealed `requestState`.
    pub fn mcp_resource(&self) -> String {
        format!("{}/mcp", self.base_url())
    }

    /// [`Self::mcp_resource`] without allocating, for per-request use.
    pub fn mcp_resource_str(&self) -> &str {
        &self.mcp_resource
    }

    /// The `Host` values `/mcp` accepts.
    pub fn effective_allowed_hosts(&self) -> Vec<String> {
        if !self.allowed_hosts.is_empty() {
            return self.allowed_hosts.clone();
        }
        let host = self.public_url.host_str().unwrap_or_default().to_owned();
        match self.public_url.port() {
            Some(port) => vec![host.clone(), format!("{host}:{port}")],
            None => vec![host],
        }
    }

    /// The browser origins `/mcp` accepts.
    pub fn effective_allowed_origins(&self) -> Vec<String> {
        if !self.allowed_origins.is_empty() {
            return self.allowed_origins.clone();
        }
        vec![self.public_url.origin().ascii_serialization()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::minimal;

    #[test]
    fn minimal_environment_loads_with_defaults() {
        let s = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
        assert_eq!(s.mcp_resource(), "https://connect.example.com/mcp");
        assert_eq!(s.max_body_bytes, 1024 * 1024);
        assert_eq!(s.auth.subject_claim, "sub");
        assert_eq!(s.flow.ticket_ttl_secs, 600);
        assert_eq!(
            s.effective_allowed_hosts(),
            vec!["connect.example.com".to_string()]
        );
        assert_eq!(
            s.effective_allowed_origins(),
            vec!["https://connect.example.com".to_string()]
        );
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_METRICS_TOKEN".into(),
            "metrics-token-0123456789".into(),
        ));
        let s = Settings::from_sources(None, vars, toml::Table::new()).unwrap();
        let shown = format!("{s:?}");
        assert!(!shown.contains("postgres://localhost/x"), "{shown}");
        assert!(!shown.contains("AAECAwQF"), "{shown}");
        assert!(!shown.contains("metrics-token"), "{shown}");
        // As the README says they show.
        assert!(shown.contains("[REDACTED]"), "{shown}");
    }

    #[test]
    fn the_log_format_is_read_in_any_case() {
        for (given, format) in [
            ("JSON", LogFormat::Json),
            ("json", LogFormat::Json),
            ("Pretty", LogFormat::Pretty),
        ] {
            let mut vars = minimal();
            vars.push(("MCP_CONNECT_LOG_FORMAT".into(), given.into()));
            let s = Settings::from_sources(None, vars, toml::Table::new()).unwrap();
            assert_eq!(s.log_format, format, "{given}");
        }
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_LOG_FORMAT".into(), "yaml".into()));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("log_format") && err.contains("json"), "{err}");
    }

    #[test]
    fn open_metrics_cannot_be_configured() {
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_METRICS_OPEN".into(), "true".into()));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("metrics_open"), "{err}");
    }
}
