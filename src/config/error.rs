//! What can stop the settings from loading: an unreadable file or secret
//! file, bad TOML, or a setting that is missing or invalid. The messages name
//! the setting, and for a missing one the variable that sets it, since that
//! is what an operator has to change.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // The I/O error is part of the message and deliberately not a `source`:
    // `main` prints the whole chain, which would say it twice.
    #[error("cannot read the configuration file {path}: {error}")]
    ReadFile { path: String, error: std::io::Error },
    #[error(
        "cannot read {var} (the file it names, {path}): {error}{}",
        permission_hint(error)
    )]
    ReadSecretFile {
        var: String,
        path: String,
        error: std::io::Error,
    },
    #[error("{var} is not valid UTF-8")]
    NotUnicode { var: String },
    #[error("the configuration file {path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("setting `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("setting `{key}` is required (set it in the file or as {env})")]
    Missing { key: String, env: String },
    #[error("required settings are missing (set them in the file or as these variables): {list}")]
    MissingSeveral { list: String },
}

/// Secret files are often made mode 0600 by root; the service does not run
/// as root (uid 10001 in the image).
fn permission_hint(error: &std::io::Error) -> &'static str {
    if error.kind() == std::io::ErrorKind::PermissionDenied {
        " (the service's user must be able to read it: in the container image, uid 10001)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Settings, test_support::minimal};

    #[test]
    fn an_unreadable_secret_file_is_reported_once() {
        let dir = std::env::temp_dir();
        let mut vars = minimal();
        vars.retain(|(k, _)| k != "MCP_CONNECT_KEYS");
        vars.push(("MCP_CONNECT_KEYS_FILE".into(), dir.display().to_string()));
        let err = Settings::from_sources(None, vars, toml::Table::new()).unwrap_err();
        let shown = format!("{:#}", anyhow::Error::from(err));
        let reason = std::fs::read_to_string(&dir).unwrap_err().to_string();
        assert_eq!(shown.matches(&reason).count(), 1, "{shown}");
        assert!(shown.contains("MCP_CONNECT_KEYS_FILE"), "{shown}");
    }
}
