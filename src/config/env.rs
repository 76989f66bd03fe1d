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
