//! Settings: code defaults, then an optional TOML file, then `MCP_CONNECT_…`
//! environment variables (each also as `…_FILE`, read from a file — the way
//! container secrets arrive). Loaded once in `main` and passed down; nothing
//! here is global.
//!
//! Environment names map onto the TOML keys: `MCP_CONNECT_PUBLIC_URL` is
//! `public_url`, and a double underscore descends into a table, so
//! `MCP_CONNECT_AUTH__ISSUER` is `[auth] issuer`. Unknown keys, in the file or
//! the environment, stop start-up with a message that names them.

use std::{collections::BTreeMap, path::Path};

use secrecy::ExposeSecret;
use url::Url;

mod defaults;
mod error;
mod lenient;
mod settings;
mod tables;

pub use error::ConfigError;
pub use lenient::parse_list;
pub use settings::{LogFormat, Settings};
pub use tables::{
    AuthSettings, FlowSettings, IntrospectionSettings, ProviderSettings, WebSettings,
};

/// Prefix of every environment variable this service reads.
pub const ENV_PREFIX: &str = "MCP_CONNECT_";

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
