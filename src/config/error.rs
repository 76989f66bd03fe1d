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
/// not show a password written into a URL.
///
/// Nothing that may follow a URL in a message is taken to end it: a
/// password may hold a raw space, quote, bracket or `@` as well as any
/// text after a URL can. So a URL's authority runs from its `://` to the
/// first `/`, `?` or `#`, or else to the next URL's scheme or the end of
/// the text, and its user part is everything before the last `@` in it.
/// An authority that holds no `@` and is no `host[:port]` (alone, or
/// followed by the message's own text: a space, quote, bracket or
/// punctuation first) was cut short by a password's `/`, `?`, `#` or
/// `://`: its user part then ends at the
/// last `@` of the first piece of text, up to the next URL's scheme, that
/// holds one, however many `://` come before it. Both rules may blank text
/// after a URL that holds an `@` (`` `https://host` … admin@example.com
/// ``): more is blanked rather than a password shown.
pub fn without_userinfo(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return std::borrow::Cow::Borrowed(text);
    }
    // Each URL's text: from after its `://` to where the next URL's
    // scheme starts (or the end of the text).
    let seps: Vec<usize> = text.match_indices("://").map(|(i, _)| i).collect();
    let pieces: Vec<(usize, usize)> = seps
        .iter()
        .enumerate()
        .map(|(n, &sep)| {
            let start = sep + 3;
            let end = seps
                .get(n + 1)
                .map_or(text.len(), |&next| scheme_start(text, next).max(start));
            (start, end)
        })
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut n = 0;
    while let Some(&(start, end)) = pieces.get(n) {
        let url = &text[start..end];
        let authority = &url[..url.find(['/', '?', '#']).unwrap_or(url.len())];
        out.push_str(&text[copied..start]);
        // Where the user part ends (an `@`, as an index into `text`), and
        // where the text this URL stands for ends.
        let user_part = match authority.rfind('@') {
            Some(i) => Some((start + i, end)),
            None if is_host_then_text(authority) && !port_then_at(&text[start..], authority) => {
                None
            }
            // Cut short: the first piece from here on that holds an `@`
            // ends the user part, whatever `://` it spans.
            None => pieces[n..].iter().enumerate().find_map(|(k, &(s, e))| {
                text[s..e].rfind('@').map(|i| {
                    n += k;
                    (s + i, e)
                })
            }),
        };
        match user_part {
            Some((at, until)) => {
                out.push_str("***");
                out.push_str(&text[at..until]);
                copied = until;
            }
            None => {
                out.push_str(url);
                copied = end;
            }
        }
        n += 1;
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// Whether `authority`, a `host:port` at the start of `rest` (the text
/// from the URL's authority on), is followed by an `@` anywhere after it:
/// a user and a password that starts with digits and then a `/`, `?` or
/// `#` (`https://u:1234/abc@host`, `https://u:1234/a b@host`,
/// `https://u:1234/a://b@host`), read as the user part. A path holding an
/// `@` after a port, or text after such a URL that holds one, is blanked
/// with it: more is hidden rather than a password shown.
fn port_then_at(rest: &str, authority: &str) -> bool {
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    has_port && rest[authority.len()..].contains('@')
}

/// Where the scheme ending at byte `sep` (its `://`) starts.
fn scheme_start(text: &str, sep: usize) -> usize {
    text[..sep]
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// Whether `authority` is a host, with or without a port, up to the first
/// character that cannot be in one and that a message puts after a URL
/// (`` `https://a.example` and … ``, `https://a.example, …`).
fn is_host_then_text(authority: &str) -> bool {
    let end = authority
        .find(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '"' | '\'' | '`' | '<' | '>' | '(' | ')' | ',' | ';' | '«' | '»'
                )
        })
        .unwrap_or(authority.len());
    is_host_and_port(&authority[..end])
}

/// Whether `authority` (a URL's, without a user part) is a host, with or
/// without a port: a name or address, or an IPv6 address in brackets.
/// An empty one is (`file:///path`); one that ends in a colon is not
/// (`u:` is what a password holding `://` leaves of `u:pa://ss@host`).
fn is_host_and_port(authority: &str) -> bool {
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ip) => ip
            .chars()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.')),
        None => host
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '%')),
    }
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
            // A password that starts with `/` leaves `u:` of the authority.
            (
                "`https://u:/SECRET@idp.example.com` must be https",
                "`https://***@idp.example.com` must be https",
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
            // A password of digits, then a `/`: it reads as a port.
            (
                "`postgres://u:1234/abc@db.example/mcp` refused",
                "`postgres://***@db.example/mcp` refused",
            ),
            (
                "`https://u:1234?x@idp.example` must be https",
                "`https://***@idp.example` must be https",
            ),
            (
                "`https://u:1234/a b@idp.example` must be https",
                "`https://***@idp.example` must be https",
            ),
            (
                "`https://u:1234/a://b@idp.example` must be https",
                "`https://***@idp.example` must be https",
            ),
            // A port, then a path, then other text with an `@`: blanked
            // up to it, as a password could be that text.
            (
                "`https://idp.example:8443/x` for admin@example.com",
                "`https://***@example.com",
            ),
            // A later URL's user part takes a URL with a port before it
            // along: more hidden, as a password could span them.
            (
                "`https://a.example:8443/x` and `https://b:pw@y.example`",
                "`https://***@y.example`",
            ),
            // A port and a path without an `@` after them: shown.
            (
                "`https://idp.example:8443/x` is not allowed",
                "`https://idp.example:8443/x` is not allowed",
            ),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

    #[test]
    fn a_password_with_a_raw_space_or_quote_is_blanked_whole() {
        for (text, shown) in [
            (
                "`https://u:SEC RET@idp.example.com/x` is not an origin",
                "`https://***@idp.example.com/x` is not an origin",
            ),
            (
                "invalid: \"http://u:SEC\"RET@idp.example.com\"",
                "invalid: \"http://***@idp.example.com\"",
            ),
            (
                "`https://u:SE'C`R<E>T@idp.example.com` must be https",
                "`https://***@idp.example.com` must be https",
            ),
            // An `@` in the password: the user part ends at the last one.
            (
                "`https://u:S@C R@T@idp.example.com/x` is not an origin",
                "`https://***@idp.example.com/x` is not an origin",
            ),
            // A password's `/` and a space: the URL does not parse.
            (
                "`http://u:S/E C@idp.example.com` must be https",
                "`http://***@idp.example.com` must be https",
            ),
            (
                "`http://u:S?E C#R@idp.example.com` must be https",
                "`http://***@idp.example.com` must be https",
            ),
            // A user name alone, with a space.
            (
                "`https://some one@idp.example.com` must end with /",
                "`https://***@idp.example.com` must end with /",
            ),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
            assert!(!without_userinfo(text).contains('R'), "{text}");
        }
    }

    #[test]
    fn each_url_of_a_message_is_blanked_on_its_own() {
        for (text, shown) in [
            (
                "`https://a:P Q@x.example/` and `https://b:R S@y.example:8443/p`",
                "`https://***@x.example/` and `https://***@y.example:8443/p`",
            ),
            (
                "`https://x.example` then `https://b:R\"S@y.example`",
                "`https://x.example` then `https://***@y.example`",
            ),
            (
                "https://a:P@Q@x.example, https://y.example/@me, ftp://c:T U@z.example",
                "https://***@x.example, https://y.example/@me, ftp://***@z.example",
            ),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

    #[test]
    fn a_password_holding_a_scheme_separator_is_blanked_whole() {
        for (text, shown) in [
            (
                "`https://u:pa://ss@host.example/x` is not an origin",
                "`https://***@host.example/x` is not an origin",
            ),
            (
                "`https://u:abc x://y@host.example` must be https",
                "`https://***@host.example` must be https",
            ),
            (
                "`https://u:a://b://c@host.example` and `https://other.example`",
                "`https://***@host.example` and `https://other.example`",
            ),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

    /// A character of more than one byte just before a URL's scheme (a
    /// non-breaking space, a guillemet) once split the text inside it.
    #[test]
    fn text_of_any_script_around_a_url_is_cut_at_character_bounds() {
        for (text, shown) in [
            (
                "`https://a.example`,\u{a0}https://u:secret@b.example",
                "`https://a.example`,\u{a0}https://***@b.example",
            ),
            (
                "«https://u:secret@b.example» and «ftp://c:d@e.example»",
                "«https://***@b.example» and «ftp://***@e.example»",
            ),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

    #[test]
    fn a_message_without_a_user_part_is_left_alone() {
        for text in [
            "`https://idp.example.com` is not an origin",
            "`https://idp.example.com:8443/a/b?c=d#e` must be https",
            "\"https://[::1]:8080/x\" and 'https://127.0.0.1' are loopback",
            "`https://api.example.com/users/@me` is fine",
            "`https://api.example.com?who=a@b` is fine",
            "mailto:someone@example.com is no URL with a host",
            "",
        ] {
            assert_eq!(without_userinfo(text), text);
        }
    }

    /// Text after a URL that holds an `@` before any `/` cannot be told
    /// from a password: it is blanked with the URL's user part.
    #[test]
    fn an_at_sign_after_a_url_blanks_more_not_less() {
        assert_eq!(
            without_userinfo("`https://idp.example.com` is refused; ask admin@example.com"),
            "`https://***@example.com"
        );
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
