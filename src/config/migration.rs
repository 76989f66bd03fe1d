//! What `mcp-connect migrate` needs: the database and nothing else, so that
//! a job that only applies migrations (a CI step, an init container, an
//! operator's shell) is not made to carry the keys, the public URL or the
//! issuer. Loaded from the same sources as [`super::Settings`]; the other
//! settings may be present (the same file and environment serve both) and
//! are neither read nor checked here: `serve` checks them.

use std::path::Path;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{
    ConfigError, LogFormat, defaults, env_name, lenient,
    sources::{deserialize, layered, only, prefixed_env},
};

/// The settings `migrate` reads.
const READS: [&str; 3] = ["database_url", "database_create_if_missing", "log_format"];

/// The database settings, alone.
#[derive(Debug, Deserialize)]
pub struct MigrationSettings {
    /// Postgres connection string.
    pub database_url: SecretString,
    /// As [`super::Settings::database_create_if_missing`].
    #[serde(default = "defaults::yes", deserialize_with = "lenient::boolean")]
    pub database_create_if_missing: bool,
    /// As [`super::Settings::log_format`].
    #[serde(default = "defaults::log_format")]
    pub log_format: LogFormat,
}

impl MigrationSettings {
    /// Loads them from the optional file and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::from_sources(file, prefixed_env()?)
    }

    /// Loads them from the optional file and the given environment.
    pub fn from_sources(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        // Only the variables read here: another's `…_FILE` may name a file
        // this job was not given (an init container with the database's
        // secret alone).
        let table = layered(file, only(env, &READS), toml::Table::new())?;
        if !table.contains_key("database_url") {
            return Err(ConfigError::Missing {
                key: "database_url".into(),
                env: env_name("database_url"),
            });
        }
        let settings: Self = deserialize(table, file)?;
        // As `serve` checks it: a URL without a database would migrate the
        // one named after the role (`postgres` for the superuser).
        super::validate::check_database_url(settings.database_url.expose_secret()).map_err(
            |m| ConfigError::Invalid {
                key: "database_url".into(),
                message: m,
            },
        )?;
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_database_url_without_a_database_is_refused() {
        for url in [
            "postgres://root@127.0.0.1:5432",
            "postgres://h/",
            "mysql://h/x",
        ] {
            let e =
                MigrationSettings::from_sources(None, env(&[("MCP_CONNECT_DATABASE_URL", url)]))
                    .unwrap_err()
                    .to_string();
            assert!(e.contains("database_url"), "{url}: {e}");
        }
    }

    #[test]
    fn the_database_url_alone_is_enough() {
        let s = MigrationSettings::from_sources(
            None,
            env(&[("MCP_CONNECT_DATABASE_URL", "postgres://db/x")]),
        )
        .unwrap();
        assert_eq!(s.database_url.expose_secret(), "postgres://db/x");
        assert!(s.database_create_if_missing);
    }

    #[test]
    fn the_service_settings_beside_it_are_left_alone() {
        let s = MigrationSettings::from_sources(
            None,
            env(&[
                ("MCP_CONNECT_DATABASE_URL", "postgres://db/x"),
                ("MCP_CONNECT_DATABASE_CREATE_IF_MISSING", "false"),
                ("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com"),
                ("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com"),
            ]),
        )
        .unwrap();
        assert!(!s.database_create_if_missing);
    }

    #[test]
    fn another_settings_file_is_not_opened() {
        let dir = std::env::temp_dir().join(format!("migrate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url_file = dir.join("database_url");
        std::fs::write(&url_file, "postgres://db/x\n").unwrap();
        let s = MigrationSettings::from_sources(
            None,
            env(&[
                ("MCP_CONNECT_DATABASE_URL_FILE", url_file.to_str().unwrap()),
                ("MCP_CONNECT_KEYS_FILE", "/nonexistent/keys"),
                ("MCP_CONNECT_LOG_FORMAT", "json"),
            ]),
        )
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(s.database_url.expose_secret(), "postgres://db/x");
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn without_a_database_url_the_error_names_its_variable_only() {
        let err = MigrationSettings::from_sources(None, Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("MCP_CONNECT_DATABASE_URL"), "{err}");
        assert!(!err.contains("MCP_CONNECT_KEYS"), "{err}");
        assert!(!err.contains("MCP_CONNECT_PUBLIC_URL"), "{err}");
    }

    #[test]
    fn a_bad_value_is_named() {
        let err = MigrationSettings::from_sources(
            None,
            env(&[
                ("MCP_CONNECT_DATABASE_URL", "postgres://db/x"),
                ("MCP_CONNECT_DATABASE_CREATE_IF_MISSING", "maybe"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("database_create_if_missing"), "{err}");
    }
}
