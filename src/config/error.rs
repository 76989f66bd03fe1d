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
    /// A message may quote the value, which for a URL may carry a user
    /// and password: shown without them ([`without_userinfo`]).
    #[error("setting `{key}`: {}", without_userinfo(message))]
    Invalid { key: String, message: String },
    #[error("setting `{key}` is required (set it in the file or as {env})")]
    Missing { key: String, env: String },
    #[error("required settings are missing (set them in the file or as these variables): {list}")]
    MissingSeveral { list: String },
}

/// `text` with the user part of every URL in it blanked
/// (`https://***@host/…`): a message that quotes a setting's value must
/// not show a password written into a URL. A URL is taken to run from its
/// `scheme://` to the next space or quote; its user part ends at the last
/// `@` before the host's end (the first `/`, `?` or `#`), or, in a URL that
/// does not parse, at its last `@` (a password's `/` cut it short).
pub fn without_userinfo(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        let host_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let scheme_start = before[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let whole = format!("{}{url}", &before[scheme_start..]);
        let user_end = match url[..host_end].rfind('@') {
            Some(i) => Some(i),
            None if url::Url::parse(&whole).is_err() => url.rfind('@'),
            None => None,
        };
        match user_end {
            Some(i) => {
                out.push_str("***");
                out.push_str(&url[i..]);
            }
            None => out.push_str(url),
        }
        rest = tail;
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
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
    use super::without_userinfo;
    use crate::config::{Settings, test_support::minimal};

    #[test]
    fn a_url_s_user_and_password_are_blanked() {
        for (text, shown) in [
            (
                "`https://u:SECRET@idp.example.com/x` is not an origin",
                "`https://***@idp.example.com/x` is not an origin",
            ),
            (
                "invalid port number: \"http://u:SECRET@idp.example.com:99999/\"",
                "invalid port number: \"http://***@idp.example.com:99999/\"",
            ),
            // A password's `/` cut the URL short: it does not parse.
            (
                "`http://u:SE/CRET@idp.example.com` must be https",
                "`http://***@idp.example.com` must be https",
            ),
            (
                "two: https://a:SECRET@x.example and https://b@y.example/p",
                "two: https://***@x.example and https://***@y.example/p",
            ),
            // An `@` in a path is not a user part.
            (
                "`https://api.example.com/users/@me` is fine",
                "`https://api.example.com/users/@me` is fine",
            ),
            ("no URL here: a@b", "no URL here: a@b"),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

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
