//! Environment variable names: the `MCP_CONNECT_` prefix, the name that sets
//! a given key, and the reverse — turning the variables present into key
//! paths, with `…_FILE` variants read from the file they name.

use std::collections::BTreeMap;

use super::ConfigError;

/// Prefix of every environment variable this service reads.
pub const ENV_PREFIX: &str = "MCP_CONNECT_";

/// The environment variable that sets a dotted key path.
pub fn env_name(key_path: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        key_path.replace('.', "__").to_ascii_uppercase()
    )
}

/// Turns `MCP_CONNECT_…` variables into key paths, resolving `…_FILE`.
pub(super) fn env_entries(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(Vec<String>, String)>, ConfigError> {
    // Each path with its value and the variable that set it.
    let mut out: BTreeMap<Vec<String>, (String, String)> = BTreeMap::new();
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
                let text = std::fs::read_to_string(&value).map_err(|error| {
                    ConfigError::ReadSecretFile {
                        var: var.clone(),
                        path: value.clone(),
                        error,
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
        // `X` and `X_FILE` both set (an old value left beside a new secret
        // file, say): which one won would depend on the environment's order.
        if let Some((other, _)) = out.get(&path) {
            let (first, second) = if *other < var {
                (other.as_str(), var.as_str())
            } else {
                (var.as_str(), other.as_str())
            };
            return Err(ConfigError::Invalid {
                key: path.join("."),
                message: format!("is set by both {first} and {second}: keep one"),
            });
        }
        out.insert(path, (var, value));
    }
    Ok(out
        .into_iter()
        .map(|(path, (_, value))| (path, value))
        .collect())
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use crate::config::{Settings, test_support::minimal};

    #[test]
    fn a_setting_given_both_directly_and_by_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("mcp-connect-cfg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("keys");
        std::fs::write(&file, "k2:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").unwrap();
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_KEYS_FILE".into(),
            file.to_string_lossy().into_owned(),
        ));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MCP_CONNECT_KEYS and MCP_CONNECT_KEYS_FILE"),
            "{err}"
        );
        assert!(!err.contains("AAECAwQF"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn trusted_proxies_come_as_a_list_and_a_bad_entry_is_named() {
        let mut vars = minimal();
        vars.push((
            "MCP_CONNECT_TRUSTED_PROXIES".into(),
            "10.0.0.0/8, 192.0.2.1".into(),
        ));
        let s = Settings::from_sources(None, vars, toml::Table::new()).unwrap();
        let proxies = &s.trusted_proxies;
        let peer = "192.0.2.1".parse().unwrap();
        assert_eq!(
            proxies.client_address(peer, ["198.51.100.4"].into_iter()),
            "198.51.100.4".parse::<std::net::IpAddr>().unwrap()
        );
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_TRUSTED_PROXIES".into(), "0.0.0.0/0".into()));
        let err = Settings::from_sources(None, vars, toml::Table::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("trusted_proxies"), "{err}");
        assert!(err.contains("trusts every address"), "{err}");
    }

    #[test]
    fn the_config_file_variable_is_not_a_setting() {
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_CONFIG_FILE".into(), "/nonexistent.toml".into()));
        assert!(Settings::from_sources(None, vars, toml::Table::new()).is_ok());
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
        // The catalog reads it as a list (see `providers`).
        assert_eq!(gh.overrides["scopes"].as_str(), Some("repo, read:user"));
        assert!(!format!("{s:?}").contains("gh-secret"));
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
}
