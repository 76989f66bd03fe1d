//! The tables inside the settings: `[web]` (browser sessions),
//! `[providers.<name>]` (the third-party providers people can connect),
//! `[auth]` with `[auth.introspection]` (how bearer tokens for `/mcp` are
//! checked, and the client that signs people in on the web pages) and
//! `[flow]` (lifetimes of the connect flow's one-time values).

use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use super::{defaults, lenient};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSettings {
    /// How long a browser sign-in lasts, in seconds.
    #[serde(
        default = "defaults::session_ttl_secs",
        deserialize_with = "lenient::number"
    )]
    pub session_ttl_secs: u64,
    /// How long a browser sign-in lasts without being used, in seconds;
    /// 0: only `session_ttl_secs` ends it. Activity is recorded at most
    /// once a minute, so this is accurate to a minute.
    #[serde(
        default = "defaults::session_idle_secs",
        deserialize_with = "lenient::number"
    )]
    pub session_idle_secs: u64,
    /// `Strict-Transport-Security: max-age` sent when `public_url` is
    /// https, in seconds; 0 sends none.
    #[serde(
        default = "defaults::hsts_max_age_secs",
        deserialize_with = "lenient::number"
    )]
    pub hsts_max_age_secs: u64,
    /// How long a page may take, in seconds, before it is answered 503
    /// (with `Retry-After`): the bound on a page whose database or
    /// provider stopped answering. Above the slowest page that works (a
    /// provider callback: a code exchange, an account lookup, a few
    /// statements), so that only a fault meets it.
    #[serde(
        default = "defaults::page_timeout_secs",
        deserialize_with = "lenient::number"
    )]
    pub page_timeout_secs: u64,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            session_ttl_secs: defaults::session_ttl_secs(),
            session_idle_secs: defaults::session_idle_secs(),
            hsts_max_age_secs: defaults::hsts_max_age_secs(),
            page_timeout_secs: defaults::page_timeout_secs(),
        }
    }
}

impl WebSettings {
    /// How long a sign-in may go unused, when it may not forever.
    pub fn session_idle(&self) -> Option<Duration> {
        (self.session_idle_secs > 0).then(|| Duration::from_secs(self.session_idle_secs))
    }

    pub fn page_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.page_timeout_secs)
    }
}

/// One third-party provider: a catalog entry (shipped in `catalog/`, or
/// the operator's own) and the client credentials. Any other field
/// overrides the entry's field of that name (tables merge key by key);
/// the catalog refuses fields no entry has.
#[derive(Debug, Clone, Deserialize)]
pub struct ProviderSettings {
    /// The shipped entry to start from; defaults to the provider's name
    /// when an entry has it, else none (every field comes from here).
    #[serde(default)]
    pub preset: Option<String>,
    /// Required by OAuth entries; API-key and Basic entries need none.
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<SecretString>,
    /// Fields of the catalog entry, checked when the catalog is built.
    #[serde(flatten)]
    pub overrides: toml::Table,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// The authorization server that issues tokens for this MCP server; its
    /// metadata is discovered from here.
    pub issuer: Url,
    /// Whether the operator wrote a root issuer with its `/`
    /// (`https://tenant.auth0.com/`), which `Url` cannot tell: clients
    /// compare the advertised issuer with the metadata's exactly.
    #[serde(skip)]
    pub issuer_written_with_slash: bool,
    /// The JWKS URL; discovered from the issuer's metadata when absent.
    #[serde(default)]
    pub jwks_url: Option<Url>,
    /// The claim that names the user (`sub`; `oid` for Microsoft Entra).
    #[serde(default = "defaults::subject_claim")]
    pub subject_claim: String,
    /// Scopes advertised in protected resource metadata.
    #[serde(default, deserialize_with = "lenient::list")]
    pub scopes_supported: Vec<String>,
    /// Scopes every access token must carry (all of them); a token without
    /// one is refused with 403 `insufficient_scope`. Empty: none checked.
    #[serde(default, deserialize_with = "lenient::list")]
    pub required_scopes: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    #[serde(
        default = "defaults::leeway_secs",
        deserialize_with = "lenient::number"
    )]
    pub leeway_secs: u64,
    /// RFC 7662 introspection, for opaque (non-JWT) access tokens.
    #[serde(default)]
    pub introspection: Option<IntrospectionSettings>,
    /// OAuth client used to sign people in on the web pages (OpenID Connect).
    #[serde(default)]
    pub web_client_id: Option<String>,
    #[serde(default)]
    pub web_client_secret: Option<SecretString>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionSettings {
    pub url: Url,
    pub client_id: String,
    pub client_secret: SecretString,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSettings {
    /// Lifetime of a connect ticket, in seconds.
    #[serde(
        default = "defaults::ticket_ttl_secs",
        deserialize_with = "lenient::number"
    )]
    pub ticket_ttl_secs: u64,
    /// Lifetime of one round of `requestState`, in seconds.
    #[serde(
        default = "defaults::request_state_ttl_secs",
        deserialize_with = "lenient::number"
    )]
    pub request_state_ttl_secs: u64,
    /// How long a retry waits for a connection to appear, in milliseconds.
    #[serde(
        default = "defaults::connect_wait_ms",
        deserialize_with = "lenient::number"
    )]
    pub connect_wait_ms: u64,
    /// New connect links one user may be given per minute, per instance.
    #[serde(
        default = "defaults::links_per_minute",
        deserialize_with = "lenient::number"
    )]
    pub links_per_minute: u32,
    /// Accounts one user may connect at one provider; reconnecting one
    /// of them is always allowed.
    #[serde(
        default = "defaults::accounts_per_provider",
        deserialize_with = "lenient::number"
    )]
    pub accounts_per_provider: u32,
}

impl Default for FlowSettings {
    fn default() -> Self {
        Self {
            ticket_ttl_secs: defaults::ticket_ttl_secs(),
            request_state_ttl_secs: defaults::request_state_ttl_secs(),
            connect_wait_ms: defaults::connect_wait_ms(),
            links_per_minute: defaults::links_per_minute(),
            accounts_per_provider: defaults::accounts_per_provider(),
        }
    }
}

impl FlowSettings {
    pub fn ticket_ttl(&self) -> Duration {
        Duration::from_secs(self.ticket_ttl_secs)
    }
    pub fn request_state_ttl(&self) -> Duration {
        Duration::from_secs(self.request_state_ttl_secs)
    }
    pub fn connect_wait(&self) -> Duration {
        Duration::from_millis(self.connect_wait_ms)
    }
}
