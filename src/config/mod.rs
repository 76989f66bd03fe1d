//! Settings: code defaults, then an optional TOML file, then `MCP_CONNECT_…`
//! environment variables (each also as `…_FILE`, read from a file — the way
//! container secrets arrive). Loaded once in `main` and passed down; nothing
//! here is global.
//!
//! Environment names map onto the TOML keys: `MCP_CONNECT_PUBLIC_URL` is
//! `public_url`, and a double underscore descends into a table, so
//! `MCP_CONNECT_AUTH__ISSUER` is `[auth] issuer`. Unknown keys, in the file or
//! the environment, stop start-up with a message that names them.

use std::{collections::BTreeMap, net::SocketAddr, path::Path, time::Duration};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

mod defaults;
mod lenient;

pub use lenient::parse_list;

/// Prefix of every environment variable this service reads.
pub const ENV_PREFIX: &str = "MCP_CONNECT_";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {source}")]
    ReadFile {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read {var} (the file it names, {path}): {source}")]
    ReadSecretFile {
        var: String,
        path: String,
        source: std::io::Error,
    },
    #[error("{var} is not valid UTF-8")]
    NotUnicode { var: String },
    #[error("the configuration file {path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("setting `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("setting `{key}` is required (set it in the file or as {env})")]
    Missing { key: String, env: String },
}

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
    /// Postgres connection string.
    pub database_url: SecretString,
    /// Upper bound of pooled database connections.
    #[serde(
        default = "defaults::db_max_connections",
        deserialize_with = "lenient::number"
    )]
    pub database_max_connections: u32,
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
    /// Largest accepted request body on `/mcp`, in bytes.
    #[serde(
        default = "defaults::max_body_bytes",
        deserialize_with = "lenient::number"
    )]
    pub max_body_bytes: usize,
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
    /// Third-party providers users can connect, by name (`[providers.github]`).
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Derived from `public_url` after loading.
    #[serde(skip)]
    mcp_resource: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSettings {
    /// How long a browser sign-in lasts, in seconds.
    #[serde(
        default = "defaults::session_ttl_secs",
        deserialize_with = "lenient::number"
    )]
    pub session_ttl_secs: u64,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            session_ttl_secs: defaults::session_ttl_secs(),
        }
    }
}

/// One third-party provider. A preset (`github`, `google`, `slack`, `demo`)
/// supplies everything but the client credentials; `generic` takes every URL
/// from here. Any field set here overrides the preset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// `github`, `google`, `slack`, `demo` or `generic`; defaults to the
    /// provider's name when that names a preset, else `generic`.
    #[serde(default)]
    pub preset: Option<String>,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<SecretString>,
    /// The name shown to people ("GitHub").
    #[serde(default)]
    pub display_name: Option<String>,
    /// Scopes requested when a tool asks for none.
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub scopes: Option<Vec<String>>,
    #[serde(default)]
    pub authorize_url: Option<Url>,
    #[serde(default)]
    pub token_url: Option<Url>,
    /// RFC 7009 revocation endpoint.
    #[serde(default)]
    pub revocation_url: Option<Url>,
    /// Where the account identity is read (GET with the access token).
    #[serde(default)]
    pub userinfo_url: Option<Url>,
    /// The only base URL `api_request` may call.
    #[serde(default)]
    pub api_base_url: Option<Url>,
    /// The authorization server's issuer: checked against a callback's `iss`
    /// (RFC 9207).
    #[serde(default)]
    pub issuer: Option<String>,
    /// Refuse callbacks without `iss`: set it for a provider whose metadata
    /// says `authorization_response_iss_parameter_supported` (RFC 9207 §2.4).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub require_iss: Option<bool>,
    /// `client_secret_post`, `client_secret_basic` or `none`.
    #[serde(default)]
    pub token_auth_method: Option<String>,
    /// JSON field of the userinfo answer holding the stable account id.
    #[serde(default)]
    pub account_id_field: Option<String>,
    /// JSON field of the userinfo answer holding the label shown to people.
    #[serde(default)]
    pub account_label_field: Option<String>,
    /// HTTP methods `api_request` may use (default: GET, HEAD).
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub allowed_methods: Option<Vec<String>>,
    /// Largest API response passed back, in bytes.
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub max_response_bytes: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// The authorization server that issues tokens for this MCP server; its
    /// metadata is discovered from here.
    pub issuer: Url,
    /// The JWKS URL; discovered from the issuer's metadata when absent.
    #[serde(default)]
    pub jwks_url: Option<Url>,
    /// The claim that names the user (`sub`; `oid` for Microsoft Entra).
    #[serde(default = "defaults::subject_claim")]
    pub subject_claim: String,
    /// Scopes advertised in protected resource metadata.
    #[serde(default, deserialize_with = "lenient::list")]
    pub scopes_supported: Vec<String>,
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
}

impl Default for FlowSettings {
    fn default() -> Self {
        Self {
            ticket_ttl_secs: defaults::ticket_ttl_secs(),
            request_state_ttl_secs: defaults::request_state_ttl_secs(),
            connect_wait_ms: defaults::connect_wait_ms(),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Json,
    Pretty,
}

impl Settings {
    /// Loads settings from the optional file and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let vars: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                k.starts_with(ENV_PREFIX).then_some((k, v))
            })
            .map(|(k, v)| match v.into_string() {
                Ok(v) => Ok((k, v)),
                Err(_) => Err(ConfigError::NotUnicode { var: k }),
            })
            .collect::<Result<_, _>>()?;
        Self::from_sources(file, vars, toml::Table::new())
    }

    /// Layers `base` (code-supplied values, e.g. dev mode's), then the file,
    /// then the given environment, and validates the result.
    pub fn from_sources(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        base: toml::Table,
    ) -> Result<Self, ConfigError> {
        let mut table = base;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
                path: path.display().to_string(),
                source,
            })?;
            let file_table: toml::Table =
                text.parse()
                    .map_err(|e: toml::de::Error| ConfigError::Toml {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
            merge(&mut table, file_table);
        }
        for (key_path, value) in env_entries(env)? {
            insert_path(&mut table, &key_path, toml::Value::String(value));
        }
        // Present the required table so a missing key inside it is named precisely.
        table
            .entry("auth")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let mut settings: Settings = deserialize(table)?;
        settings.validate()?;
        settings.mcp_resource = settings.mcp_resource();
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.to_owned(),
            message,
        };
        if !matches!(self.public_url.scheme(), "http" | "https") || self.public_url.host().is_none()
        {
            return Err(invalid(
                "public_url",
                "must be an http(s) URL with a host".into(),
            ));
        }
        if self.public_url.query().is_some() || self.public_url.fragment().is_some() {
            return Err(invalid(
                "public_url",
                "must not carry a query or fragment".into(),
            ));
        }
        if self.public_url.scheme() == "http" && !is_loopback(&self.public_url) {
            // Without TLS, cookies cannot be `Secure` or `__Host-`: anyone on
            // the path could read a session or plant one (login CSRF).
            return Err(invalid(
                "public_url",
                "must be https (plain http is accepted only on loopback)".into(),
            ));
        }
        if self.keys.is_empty() {
            return Err(ConfigError::Missing {
                key: "keys".into(),
                env: env_name("keys"),
            });
        }
        crate::crypto::KeyRing::from_entries(self.keys.iter().map(|k| k.expose_secret()))
            .map_err(|e| invalid("keys", e.to_string()))?;
        if let Some(token) = &self.metrics_token {
            let token = token.expose_secret();
            if token.len() < 16 || !crate::auth::is_token68(token) {
                return Err(invalid(
                    "metrics_token",
                    "must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / (e.g. `openssl rand -hex 32`)".into(),
                ));
            }
        }
        if self.max_body_bytes < 1024 {
            return Err(invalid("max_body_bytes", "must be at least 1024".into()));
        }
        if !(2..=10_000).contains(&self.database_max_connections) {
            return Err(invalid(
                "database_max_connections",
                "must be between 2 and 10000 (half are pooled, half kept per worker thread)".into(),
            ));
        }
        if self.auth.subject_claim.trim().is_empty() {
            return Err(invalid("auth.subject_claim", "must not be empty".into()));
        }
        for (name, provider) in &self.providers {
            let valid_name = !name.is_empty()
                && name.len() <= 32
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !valid_name {
                return Err(invalid(
                    &format!("providers.{name}"),
                    "provider names are 1 to 32 lowercase letters, digits, `-` or `_`".into(),
                ));
            }
            if provider.client_id.trim().is_empty() {
                return Err(invalid(
                    &format!("providers.{name}.client_id"),
                    "must not be empty".into(),
                ));
            }
        }
        const MONTH: u64 = 31 * 24 * 3600;
        for (key, value) in [
            ("flow.ticket_ttl_secs", self.flow.ticket_ttl_secs),
            (
                "flow.request_state_ttl_secs",
                self.flow.request_state_ttl_secs,
            ),
            ("web.session_ttl_secs", self.web.session_ttl_secs),
            ("flow.connect_wait_ms", self.flow.connect_wait_ms / 1000),
        ] {
            if value > MONTH {
                return Err(invalid(key, "is longer than a month".into()));
            }
        }
        if self.flow.ticket_ttl_secs == 0 || self.flow.request_state_ttl_secs == 0 {
            return Err(invalid(
                "flow",
                "lifetimes must be greater than zero".into(),
            ));
        }
        Ok(())
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

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// The environment variable that sets a dotted key path.
pub fn env_name(key_path: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        key_path.replace('.', "__").to_ascii_uppercase()
    )
}

/// Turns `MCP_CONNECT_…` variables into key paths, resolving `…_FILE`.
fn env_entries(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(Vec<String>, String)>, ConfigError> {
    let mut out = BTreeMap::new();
    for (var, value) in env {
        let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        // Names the configuration file itself (`--config`), not a setting.
        if rest == "CONFIG_FILE" {
            continue;
        }
        let (rest, value) = match rest.strip_suffix("_FILE") {
            Some(rest) => {
                let text = std::fs::read_to_string(&value).map_err(|source| {
                    ConfigError::ReadSecretFile {
                        var: var.clone(),
                        path: value.clone(),
                        source,
                    }
                })?;
                (rest, text.trim_end_matches(['\n', '\r']).to_owned())
            }
            None => (rest, value),
        };
        let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        if path.iter().any(String::is_empty) {
            return Err(ConfigError::Invalid {
                key: var,
                message: "malformed variable name".into(),
            });
        }
        out.insert(path, value);
    }
    Ok(out.into_iter().collect())
}

fn insert_path(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = table;
    for key in parents {
        let entry = current
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        current = next;
    }
    current.insert(last.clone(), value);
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn deserialize(table: toml::Table) -> Result<Settings, ConfigError> {
    let value = toml::Value::Table(table);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names a missing field only in its message; lift it into the key.
        if let Some(field) = inner
            .strip_prefix("missing field `")
            .and_then(|s| s.split('`').next())
        {
            let key = if key == "." {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            };
            return ConfigError::Missing {
                env: env_name(&key),
                key,
            };
        }
        if let Some(field) = inner
            .strip_prefix("unknown field `")
            .and_then(|s| s.split('`').next())
        {
            let key = if key == "." {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            };
            return ConfigError::Invalid {
                message: format!("unknown setting (from the file, or {})", env_name(&key)),
                key,
            };
        }
        ConfigError::Invalid {
            key,
            message: inner,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    fn minimal() -> Vec<(String, String)> {
        env(&[
            ("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com"),
            ("MCP_CONNECT_DATABASE_URL", "postgres://localhost/x"),
            ("MCP_CONNECT_KEYS", KEY),
            ("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com"),
        ])
    }

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
    fn missing_required_setting_is_named_with_its_variable() {
        let mut vars = minimal();
        vars.retain(|(k, _)| k != "MCP_CONNECT_AUTH__ISSUER");
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("auth.issuer"), "{err}");
        assert!(err.contains("MCP_CONNECT_AUTH__ISSUER"), "{err}");
    }

    #[test]
    fn unknown_variable_is_rejected_by_name() {
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_PUBLIK_URL".into(), "x".into()));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("publik_url"), "{err}");
        assert!(err.contains("MCP_CONNECT_PUBLIK_URL"), "{err}");
    }

    #[test]
    fn bad_number_names_the_setting() {
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_MAX_BODY_BYTES".into(), "lots".into()));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_body_bytes"), "{err}");
    }

    #[test]
    fn too_few_database_connections_are_refused() {
        for n in ["0", "1"] {
            let mut vars = minimal();
            vars.push(("MCP_CONNECT_DATABASE_MAX_CONNECTIONS".into(), n.into()));
            let err = Settings::from_sources(None, vars, toml::Table::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains("database_max_connections"), "{err}");
        }
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_DATABASE_MAX_CONNECTIONS".into(), "2".into()));
        assert!(Settings::from_sources(None, vars, toml::Table::new()).is_ok());
    }

    #[test]
    fn plain_http_is_refused_off_loopback() {
        let mut vars = minimal();
        vars[0].1 = "http://connect.example.com".into();
        let err = Settings::from_sources(None, vars.clone(), toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("public_url"), "{err}");
        // Not even when asked for: plain http off loopback has no safe cookies.
        vars.push(("MCP_CONNECT_INSECURE_HTTP".into(), "true".into()));
        assert!(Settings::from_sources(None, vars, toml::Table::new()).is_err());
    }

    #[test]
    fn the_config_file_variable_is_not_a_setting() {
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_CONFIG_FILE".into(), "/nonexistent.toml".into()));
        assert!(Settings::from_sources(None, vars, toml::Table::new()).is_ok());
    }

    #[test]
    fn lifetimes_are_bounded() {
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_WEB__SESSION_TTL_SECS".into(),
            "99999999999".into(),
        ));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("web.session_ttl_secs"), "{err}");
    }

    #[test]
    fn short_key_is_refused() {
        let mut vars = minimal();
        vars[2].1 = "k1:c2hvcnQ=".into();
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("keys"), "{err}");
    }

    #[test]
    fn file_variant_reads_the_secret_and_env_beats_file() {
        let dir = std::env::temp_dir().join(format!("mcp-connect-cfg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("db");
        std::fs::write(&secret, "postgres://from-file/db\n").unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "max_body_bytes = 4096\n[auth]\nissuer = \"https://file.example\"\n",
        )
        .unwrap();
        let mut vars = minimal();
        vars.retain(|(k, _)| k != "MCP_CONNECT_DATABASE_URL");
        vars.push((
            "MCP_CONNECT_DATABASE_URL_FILE".into(),
            secret.display().to_string(),
        ));
        let s = Settings::from_sources(Some(&file), vars, toml::Table::new()).unwrap();
        assert_eq!(s.database_url.expose_secret(), "postgres://from-file/db");
        assert_eq!(s.max_body_bytes, 4096);
        assert_eq!(s.auth.issuer.as_str(), "https://idp.example.com/");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unknown_file_key_is_rejected() {
        let dir = std::env::temp_dir().join(format!("mcp-connect-cfg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "[auth]\nissuer = \"https://x\"\nsubjekt_claim = \"oid\"\n",
        )
        .unwrap();
        let err = Settings::from_sources(Some(&file), minimal(), toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("auth.subjekt_claim"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn providers_come_from_nested_variables() {
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_PROVIDERS__GITHUB__CLIENT_ID".into(),
            "gh-client".into(),
        ));
        vars.push((
            "MCP_CONNECT_PROVIDERS__GITHUB__CLIENT_SECRET".into(),
            "gh-secret".into(),
        ));
        vars.push((
            "MCP_CONNECT_PROVIDERS__GITHUB__SCOPES".into(),
            "repo, read:user".into(),
        ));
        let s = Settings::from_sources(None, vars, toml::Table::new()).unwrap();
        let gh = &s.providers["github"];
        assert_eq!(gh.client_id, "gh-client");
        assert_eq!(
            gh.scopes.as_deref(),
            Some(&["repo".to_string(), "read:user".to_string()][..])
        );
        assert!(!format!("{s:?}").contains("gh-secret"));
    }

    #[test]
    fn bad_provider_name_is_refused() {
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_PROVIDERS__GIT.HUB__CLIENT_ID".into(),
            "x".into(),
        ));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("providers.git.hub"), "{err}");
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
    }

    #[test]
    fn the_metrics_token_is_optional_and_read_from_a_file_too() {
        let s = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
        assert!(s.metrics_token.is_none());
        assert!(!s.metrics_open);
        let dir = std::env::temp_dir().join(format!("mcp-connect-cfg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("metrics_token");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_METRICS_TOKEN_FILE".into(),
            file.display().to_string(),
        ));
        let s = Settings::from_sources(None, vars, toml::Table::new()).unwrap();
        assert_eq!(
            s.metrics_token.as_ref().map(|t| t.expose_secret()),
            Some("0123456789abcdef0123")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_weak_or_unsendable_metrics_token_is_refused() {
        for token in ["", "short", "sixteen chars ok", "0123456789abcdef\u{7f}"] {
            let mut vars = minimal();
            vars.push(("MCP_CONNECT_METRICS_TOKEN".into(), token.into()));
            let err = Settings::from_sources(None, vars, toml::Table::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains("metrics_token"), "{token:?}: {err}");
            if token.len() >= 16 {
                assert!(!err.contains(token), "the secret is not echoed: {err}");
            }
        }
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
