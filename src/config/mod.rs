//! Settings: code defaults, then an optional TOML file, then `MCP_CONNECT_…`
//! environment variables (each also as `…_FILE`, read from a file — the way
//! container secrets arrive). Loaded once in `main` and passed down; nothing
//! here is global.
//!
//! Environment names map onto the TOML keys: `MCP_CONNECT_PUBLIC_URL` is
//! `public_url`, and a double underscore descends into a table, so
//! `MCP_CONNECT_AUTH__ISSUER` is `[auth] issuer`. Unknown keys, in the file or
//! the environment, stop start-up with a message that names them.

mod defaults;
mod env;
mod error;
mod lenient;
mod settings;
mod sources;
mod tables;
mod validate;

pub use env::{ENV_PREFIX, env_name};
pub use error::ConfigError;
pub use lenient::parse_list;
pub use settings::{LogFormat, Settings};
pub use tables::{
    AuthSettings, FlowSettings, IntrospectionSettings, ProviderSettings, WebSettings,
};

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

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
