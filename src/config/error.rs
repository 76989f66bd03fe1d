//! What can stop the settings from loading: an unreadable file or secret
//! file, bad TOML, or a setting that is missing or invalid. The messages name
//! the setting, and for a missing one the variable that sets it, since that
//! is what an operator has to change.

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
