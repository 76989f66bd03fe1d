//! Loading: the code-supplied base table, then the TOML file, then the
//! environment, merged into one table and deserialized into [`Settings`].
//! Deserialization errors are reworded here so they name the setting and the
//! variable that sets it.

use std::path::Path;

use super::{
    ConfigError, ENV_PREFIX, Settings,
    env::{env_entries, env_name},
};

impl Settings {
    /// Loads settings from the optional file and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::from_sources(file, prefixed_env()?, toml::Table::new())
    }

    /// Layers `base` (code-supplied values, e.g. dev mode's), then the file,
    /// then the given environment, and validates the result.
    pub fn from_sources(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        base: toml::Table,
    ) -> Result<Self, ConfigError> {
        let mut table = layered(file, env, base)?;
        // Present the required table so a missing key inside it is named precisely.
        table
            .entry("auth")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let missing = missing_required(&table);
        if missing.len() > 1 {
            return Err(ConfigError::MissingSeveral {
                list: missing
                    .iter()
                    .map(|key| format!("`{key}` ({})", env_name(key)))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let written_with_slash = table
            .get("auth")
            .and_then(|auth| auth.get("issuer"))
            .and_then(toml::Value::as_str)
            .is_some_and(|issuer| issuer.trim().ends_with('/'));
        let mut settings: Settings = deserialize(table, file)?;
        settings.auth.issuer_written_with_slash = written_with_slash;
        settings.validate()?;
        settings.mcp_resource = settings.mcp_resource();
        Ok(settings)
    }
}

/// The process's `MCP_CONNECT_…` variables.
pub(super) fn prefixed_env() -> Result<Vec<(String, String)>, ConfigError> {
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let k = k.into_string().ok()?;
            k.starts_with(ENV_PREFIX).then_some((k, v))
        })
        .map(|(k, v)| match v.into_string() {
            Ok(v) => Ok((k, v)),
            Err(_) => Err(ConfigError::NotUnicode { var: k }),
        })
        .collect()
}

/// The variables among `env` that set one of `keys` (directly or as
/// `…_FILE`): for a command that reads a few settings only, so that
/// another's `…_FILE` — naming a file that command was not given — is
/// never opened.
pub(super) fn only(
    env: impl IntoIterator<Item = (String, String)>,
    keys: &[&str],
) -> Vec<(String, String)> {
    env.into_iter()
        .filter(|(var, _)| {
            let var = var.strip_suffix("_FILE").unwrap_or(var);
            keys.iter().any(|key| super::env_name(key) == var)
        })
        .collect()
}

/// `base`, then the file, then `env`, merged into one table.
pub(super) fn layered(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    base: toml::Table,
) -> Result<toml::Table, ConfigError> {
    let mut table = base;
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::ReadFile {
            path: path.display().to_string(),
            error,
        })?;
        let file_table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Toml {
                    path: path.display().to_string(),
                    message: syntax_error(&text, &e),
                })?;
        merge(&mut table, file_table);
    }
    for (key_path, value) in env_entries(env)? {
        insert_path(&mut table, &key_path, toml::Value::String(value));
    }
    Ok(table)
}

/// A syntax error of the settings file by line and column and what is
/// wrong, never the line itself (toml's own message quotes it): the line
/// may hold a secret, and this message goes to the log.
fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim_end().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
            format!("line {line}, column {column}: {what}")
        }
        None => what,
    }
}

/// The settings without a default. Checked together before deserializing,
/// which stops at the first, so that an operator learns them all at once.
const REQUIRED: [&str; 4] = ["public_url", "database_url", "keys", "auth.issuer"];

fn missing_required(table: &toml::Table) -> Vec<&'static str> {
    REQUIRED
        .into_iter()
        .filter(|key| {
            let mut parts = key.split('.');
            let first = parts.next().and_then(|k| table.get(k));
            parts
                .try_fold(first, |v, k| Some(v?.as_table()?.get(k)))
                .flatten()
                .is_none()
        })
        .collect()
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

/// `table` (from `file`, if one was given, and the environment) as a
/// `T`, the error naming the setting and its variable.
pub(super) fn deserialize<T: serde::de::DeserializeOwned>(
    table: toml::Table,
    file: Option<&Path>,
) -> Result<T, ConfigError> {
    let value = toml::Value::Table(table);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let key = e.path().to_string();
        // The message alone: toml's `Display` adds "in `<key>`" on lines
        // of its own, and the key is named here already.
        let inner = e.into_inner().message().trim_end().to_owned();
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
            // Unlike a missing one, an unknown field is already the last
            // element of serde's path.
            let key = if key == "." {
                field.to_owned()
            } else if key == field || key.ends_with(&format!(".{field}")) {
                key
            } else {
                format!("{key}.{field}")
            };
            let from = match file {
                Some(file) => format!("in {}, or from {}", file.display(), env_name(&key)),
                None => format!("from {}", env_name(&key)),
            };
            return ConfigError::Invalid {
                message: format!("unknown setting ({from}): check its name"),
                key,
            };
        }
        let mut message = without_the_value(&key, inner);
        if key == "bind" {
            message.push_str(": write an IP address and a port, e.g. 0.0.0.0:8080");
        }
        ConfigError::Invalid { message, key }
    })
}

/// The last parts of the names of settings whose value is a secret or may
/// carry one (a webhook receiver's URL often holds its token).
const SECRET_SETTINGS: &[&str] = &[
    "secret",
    "previous_secret",
    "client_secret",
    "web_client_secret",
    "keys",
    "metrics_token",
    "database_url",
    "password",
    "url",
];

/// serde's message for a value it refused, without the value where the
/// setting is a secret: "invalid type: integer `123…`, expected a string"
/// keeps only what was expected.
fn without_the_value(key: &str, message: String) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    let last = last.split('[').next().unwrap_or(last);
    if !SECRET_SETTINGS.contains(&last) {
        return message;
    }
    match message.split_once(", expected ") {
        Some((_, expected)) => format!("not a valid value (expected {expected})"),
        None if last == "url" => "not a valid URL".to_owned(),
        None => "not a valid value".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn a_refused_secret_value_is_not_repeated() {
        const SECRET: &str = "98765432123456789";
        let cases = [
            (
                format!("[auth.introspection]\nclient_id = \"c\"\nclient_secret = {SECRET}\n"),
                "auth.introspection.client_secret",
            ),
            (
                format!("[auth]\nweb_client_secret = {SECRET}\n"),
                "auth.web_client_secret",
            ),
            (
                format!(
                    "[webhooks.endpoints.ops]\nurl = \"https://h.example.com:99999/T/{SECRET}\"\n"
                ),
                "webhooks.endpoints.ops.url",
            ),
        ];
        for (toml_text, key) in cases {
            let table: toml::Table = toml_text.parse().unwrap();
            let err = Settings::from_sources(None, crate::config::test_support::minimal(), table)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(key), "{key}: {err}");
            assert!(!err.contains(SECRET), "{key}: {err}");
        }
        // Other settings keep serde's whole message.
        let table: toml::Table = "max_body_bytes = \"lots\"".parse().unwrap();
        let err = Settings::from_sources(None, crate::config::test_support::minimal(), table)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("lots") || err.contains("max_body_bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_kind_says_what_was_expected() {
        for (toml_text, key, expected) in [
            ("max_body_bytes = -1", "max_body_bytes", "whole number"),
            ("max_body_bytes = 1.5", "max_body_bytes", "whole number"),
            ("insecure_http = 3", "insecure_http", "true or false"),
            ("allowed_hosts = 5", "allowed_hosts", "a list"),
        ] {
            let table: toml::Table = toml_text.parse().unwrap();
            let err = Settings::from_sources(None, crate::config::test_support::minimal(), table)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                err.contains(key) && err.contains(expected),
                "{toml_text}: {err}"
            );
            assert!(!err.contains("variant"), "{toml_text}: {err}");
        }
    }

    /// The setting is named once: not again by the TOML library's "in
    /// `key`", which it writes on lines of its own (inside the
    /// parentheses, for a secret's "expected …").
    #[test]
    fn a_refused_value_is_said_on_one_line_naming_its_setting_once() {
        for (toml_text, key) in [
            ("[auth]\nweb_client_secret = 5\n", "auth.web_client_secret"),
            ("log_format = 5\n", "log_format"),
            ("log_format = \"xml\"\n", "log_format"),
            ("bind = 5\n", "bind"),
            ("bind = \"0.0.0.0\"\n", "bind"),
            ("trusted_proxies = [\"x\"]\n", "trusted_proxies"),
            ("[clients]\ngrants = \"sometimes\"\n", "clients.grants"),
            ("max_body_bytes = \"lots\"\n", "max_body_bytes"),
        ] {
            let table: toml::Table = toml_text.parse().unwrap();
            let err = Settings::from_sources(None, crate::config::test_support::minimal(), table)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(&format!("`{key}`")), "{toml_text}: {err}");
            assert!(!err.contains('\n'), "{toml_text}: {err:?}");
            assert_eq!(err.matches(key).count(), 1, "{toml_text}: {err}");
        }
        let table: toml::Table = "bind = \"0.0.0.0\"".parse().unwrap();
        let err = Settings::from_sources(None, crate::config::test_support::minimal(), table)
            .unwrap_err()
            .to_string();
        assert!(err.contains("e.g. 0.0.0.0:8080"), "{err}");
    }

    #[test]
    fn a_syntax_error_names_its_line_but_never_repeats_it() {
        const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let dir = std::env::temp_dir().join(format!("mcp-connect-toml-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let typos = [
            format!(
                "[webhooks.endpoints.ops]\nurl = \"https://h.example.com/x\"\nsecret = {SECRET}\n"
            ),
            format!(
                "[webhooks.endpoints.ops]\nurl = \"https://h.example.com/x\"\nsecret = \"{SECRET}\n"
            ),
            format!(
                "[webhooks.endpoints.ops]\nurl = \"https://h.example.com/x\"\nsecret = \"{SECRET}\"\nsecret = \"{SECRET}\"\n"
            ),
            format!(
                "[webhooks.endpoints.ops]\nurl = \"https://h.example.com/x\"\nsecret = '{SECRET}' x\n"
            ),
        ];
        for (i, text) in typos.iter().enumerate() {
            let path = dir.join(format!("{i}.toml"));
            std::fs::write(&path, text).unwrap();
            let err = Settings::from_sources(
                Some(&path),
                crate::config::test_support::minimal(),
                toml::Table::new(),
            )
            .unwrap_err();
            let shown = format!("{:#}", anyhow::Error::from(err));
            assert!(!shown.contains("MfKQ9r8G"), "{i}: {shown}");
            assert!(shown.contains("line "), "{i}: {shown}");
            assert!(shown.contains(&path.display().to_string()), "{i}: {shown}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_missing_required_setting_is_named_at_once() {
        let err = Settings::from_sources(None, Vec::new(), toml::Table::new())
            .unwrap_err()
            .to_string();
        for env in [
            "MCP_CONNECT_PUBLIC_URL",
            "MCP_CONNECT_DATABASE_URL",
            "MCP_CONNECT_KEYS",
            "MCP_CONNECT_AUTH__ISSUER",
        ] {
            assert!(err.contains(env), "{err}");
        }
        // With one left, it is named as before.
        let mut vars = crate::config::test_support::minimal();
        vars.retain(|(k, _)| k != "MCP_CONNECT_AUTH__ISSUER");
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`auth.issuer` is required"), "{err}");
    }
    use crate::config::test_support::minimal;

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
        // No file was read (dev reads none): none is named.
        assert!(!err.contains("file"), "{err}");
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
        assert!(err.contains(&file.display().to_string()), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
