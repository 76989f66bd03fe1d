//! Checks on a model-supplied API request before anything is sent. The
//! path is attacker-controlled: it must not leave the provider's API base
//! URL by any spelling (absolute URL, `//host`, dot segments — encoded or
//! not —, backslashes, userinfo, control characters). Checked twice: the
//! raw text, and the joined URL against the base.

use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};
use url::Url;

use super::ProviderError;

const MAX_PATH_LEN: usize = 2048;
/// Methods whose requests carry a body.
const BODY_METHODS: &[&str] = &["POST", "PUT", "PATCH"];

fn refused(why: &str) -> ProviderError {
    ProviderError::PathRefused(why.to_owned())
}

/// Joins `path` under `base` (which ends with `/`). A single leading `/`
/// is read as "from the base", the way people write API paths.
pub(super) fn resolve(base: &Url, path: &str) -> Result<Url, ProviderError> {
    let relative = relative_path(path)?;
    let joined = base
        .join(relative)
        .map_err(|_| refused("is not a valid URL path"))?;
    check_under(base, &joined)?;
    Ok(joined)
}

/// What [`resolve`] refuses of `path` whatever the base: its text alone.
/// Checked before the user is asked to connect (`check_request`). The
/// path relative to the base (without its one leading `/`).
pub(super) fn relative_path(path: &str) -> Result<&str, ProviderError> {
    if path.len() > MAX_PATH_LEN {
        return Err(refused("longer than 2048 characters"));
    }
    if path
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\u{feff}')
    {
        return Err(refused("contains whitespace or control characters"));
    }
    if path.contains('\\') {
        return Err(refused("contains a backslash"));
    }
    // `@` is left alone: APIs use it in paths (Discord's `users/@me`,
    // Graph's `users/alice@contoso.com`), and a relative path never starts
    // an authority, so it cannot name userinfo (`check_under` refuses any).
    if path.contains('#') {
        return Err(refused("contains a fragment (`#`)"));
    }
    if path.starts_with("//") {
        return Err(refused("must be relative to the API base, not `//host`"));
    }
    let relative = path.strip_prefix('/').unwrap_or(path);
    let (path_part, _query) = relative.split_once('?').unwrap_or((relative, ""));
    let first_segment = path_part.split('/').next().unwrap_or_default();
    if first_segment.contains(':') || decoded(first_segment).contains(':') {
        return Err(refused("must be relative to the API base, not a URL"));
    }
    for segment in path_part.split('/') {
        // Decoded until stable, so `%252e%252e` is caught as well as `%2e%2e`;
        // and split again, so an encoded `/` cannot hide `..` inside a segment.
        // A `;` ends what Tomcat-style servers read as the segment, so
        // `..;` is `..` there.
        // Trailing dots and spaces are stripped as `routed` strips them
        // (IIS ignores them): `...` and `..%20` are `..` there.
        let text = decoded(segment);
        let dots = |s: &str| {
            let segment = s.split(';').next().unwrap_or_default();
            !segment.is_empty() && segment.trim_end_matches(['.', ' ']).is_empty()
        };
        if text.split(['/', '\\']).any(dots) {
            return Err(refused("contains a `.` or `..` segment"));
        }
    }
    Ok(relative)
}

/// Percent-decodes repeatedly (bounded) until nothing changes.
fn decoded(segment: &str) -> String {
    let mut text = segment.to_owned();
    for _ in 0..4 {
        let next = percent_decode_str(&text).decode_utf8_lossy().into_owned();
        if next == text {
            break;
        }
        text = next;
    }
    text
}

/// The joined URL must be the base's scheme, host and port, and its path
/// must start with the base's path.
pub(super) fn check_under(base: &Url, url: &Url) -> Result<(), ProviderError> {
    let same_origin = url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default();
    if !same_origin || !url.username().is_empty() || url.password().is_some() {
        return Err(refused("leaves the provider's API host"));
    }
    if !url.path().starts_with(base.path()) {
        return Err(refused("leaves the provider's API base path"));
    }
    if url.fragment().is_some() {
        return Err(refused("contains a fragment (`#`)"));
    }
    Ok(())
}

/// The request must not be one of the endpoints that manage the grant
/// (token, refresh, revocation): the model must not be able to end the
/// user's grant, or mint tokens with it, through `api_request`. Compared
/// as a server would route it: decoded, any case, slashes collapsed.
pub(super) fn not_a_grant_endpoint(url: &Url, grant: &[Url]) -> Result<(), ProviderError> {
    let target = routed(url);
    if grant.iter().any(|g| routed(g) == target) {
        return Err(refused(
            "is the provider's token, refresh or revocation endpoint; connections are managed on the connections page",
        ));
    }
    Ok(())
}

/// Nor at or beneath one of the entry's `grant_paths`, the other places
/// under the API base that manage the grant or the app's installation
/// (Zendesk's `oauth/tokens`, Intercom's `auth/uninstall`, Slack's
/// `auth.revoke`): paths relative to `base`, compared as above.
pub(super) fn not_under_grant_paths(
    url: &Url,
    base: &Url,
    grant_paths: &[String],
) -> Result<(), ProviderError> {
    if grant_paths.is_empty() {
        return Ok(());
    }
    let (host, port, target) = routed(url);
    for path in grant_paths {
        // The catalog checked every path (`check_grant_path`); one that no
        // longer resolves refuses rather than lets everything through.
        let (grant_host, grant_port, grant) = routed(&resolve(base, path)?);
        let beneath = target.len() >= grant.len() && target[..grant.len()] == grant[..];
        if beneath && (&host, port) == (&grant_host, grant_port) {
            return Err(refused(
                "manages the connection's grant or credentials at the provider; connections are managed on the connections page",
            ));
        }
    }
    Ok(())
}

/// A grant path as an entry gives it: a path beneath the API base.
pub(super) fn check_grant_path(path: &str) -> Result<(), String> {
    let base = Url::parse("https://provider.invalid/api/").map_err(|e| e.to_string())?;
    let url = resolve(&base, path).map_err(|e| format!("`{path}` {e}"))?;
    if routed(&url).2.len() <= routed(&base).2.len() {
        return Err(format!("`{path}` is the API base itself"));
    }
    Ok(())
}

/// A URL as a server routes it: host, port, and the path's segments,
/// decoded, lower case, each cut at a `;` (what Tomcat-style servers read
/// as path parameters) and stripped of trailing dots and spaces (which
/// IIS ignores), empty ones dropped.
fn routed(url: &Url) -> (Option<String>, Option<u16>, Vec<String>) {
    let path = decoded(url.path()).to_ascii_lowercase();
    let segments = path
        .split('/')
        .map(|p| p.split(';').next().unwrap_or_default())
        .map(|p| p.trim_end_matches(['.', ' ']))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    (
        url.host_str().map(str::to_ascii_lowercase),
        url.port_or_known_default(),
        segments,
    )
}

/// The method, uppercase, if the provider allows it.
pub(super) fn method(allowed: &[String], method: &str) -> Result<reqwest::Method, ProviderError> {
    let upper = method.trim().to_ascii_uppercase();
    let shown: String = upper
        .chars()
        .filter(char::is_ascii_alphabetic)
        .take(16)
        .collect();
    if !allowed.contains(&upper) {
        return Err(ProviderError::MethodRefused(shown));
    }
    reqwest::Method::from_bytes(upper.as_bytes()).map_err(|_| ProviderError::MethodRefused(shown))
}

/// Query values must be strings, numbers or booleans.
pub(super) fn query_pairs(
    query: Option<&Map<String, Value>>,
) -> Result<Vec<(String, String)>, ProviderError> {
    query
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(ProviderError::RequestRefused(
                        "query values must be strings, numbers or booleans".into(),
                    ));
                }
            };
            Ok((key.clone(), text))
        })
        .collect()
}

/// The caller may not set a query parameter the credential is sent in
/// (`api_key=…`): appended after theirs, it would be the second value, and
/// a provider reading the first would act on a credential the caller chose.
pub(super) fn no_credential_params(
    url: &Url,
    credential_params: &[String],
) -> Result<(), ProviderError> {
    if credential_params.is_empty() {
        return Ok(());
    }
    match url.query_pairs().find(|(name, _)| {
        credential_params
            .iter()
            .any(|c| c.eq_ignore_ascii_case(name))
    }) {
        Some((name, _)) => Err(ProviderError::RequestRefused(format!(
            "the query parameter `{}` carries the credential and cannot be set",
            crate::crypto::printable_prefix_of(&name, 64)
        ))),
        None => Ok(()),
    }
}

/// A body only where the method takes one.
pub(super) fn body_allowed(
    method: &reqwest::Method,
    body: Option<&Value>,
) -> Result<(), ProviderError> {
    match body {
        Some(_) if !BODY_METHODS.contains(&method.as_str()) => Err(ProviderError::RequestRefused(
            format!("{method} requests take no body"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://api.example.com/v1/").unwrap()
    }

    #[test]
    fn good_paths_join_under_the_base() {
        let cases = [
            ("user/repos", "https://api.example.com/v1/user/repos"),
            ("/user/repos", "https://api.example.com/v1/user/repos"),
            ("", "https://api.example.com/v1/"),
            ("search?q=a:b", "https://api.example.com/v1/search?q=a:b"),
            (
                "projects/a%2Fb",
                "https://api.example.com/v1/projects/a%2Fb",
            ),
            ("files/x:run", "https://api.example.com/v1/files/x:run"),
            ("caf\u{e9}", "https://api.example.com/v1/caf%C3%A9"),
            ("users/@me", "https://api.example.com/v1/users/@me"),
            (
                "users/alice@contoso.com/messages",
                "https://api.example.com/v1/users/alice@contoso.com/messages",
            ),
            ("@evil.com/x", "https://api.example.com/v1/@evil.com/x"),
        ];
        for (path, expected) in cases {
            assert_eq!(resolve(&base(), path).unwrap().as_str(), expected, "{path}");
        }
    }

    #[test]
    fn escaping_paths_are_refused() {
        let cases = [
            "https://evil.com/x",
            "http:evil.com/x",
            "javascript:alert(1)",
            "//evil.com/x",
            "///evil.com/x",
            "../x",
            "/../x",
            "a/../../x",
            "%2e%2e/x",
            "%2E%2E/x",
            ".%2e/x",
            "%252e%252e/x",
            "a/..%2f..%2fx",
            "a/%2e%2e%5cx",
            "./x",
            "\\evil",
            "/\\evil.com",
            "//user@evil.com/x",
            "a/..;/..;/x",
            "%2e%2e;/x",
            ".;/x",
            "x#frag",
            "a/\tb",
            "/\n/evil.com",
            "a b",
            "evil.com:443/x",
            "%68ttp:%2f%2fevil.com",
            // Dots and spaces a server strips from a segment's end.
            ".../x",
            "a/..%20/x",
            "a/.%20./x",
            "a/..%2e/x",
        ];
        for path in cases {
            let e = resolve(&base(), path).unwrap_err();
            assert!(matches!(e, ProviderError::PathRefused(_)), "{path}: {e}");
            // The same, by the text alone, before any account is read.
            let e = relative_path(path).unwrap_err();
            assert!(matches!(e, ProviderError::PathRefused(_)), "{path}: {e}");
        }
        for fine in ["users/@me", "v1./x", "a.b/c", "files/.well-known.txt"] {
            assert!(relative_path(fine).is_ok(), "{fine}");
        }
        assert!(resolve(&base(), &"a/".repeat(1100)).is_err());
    }

    #[test]
    fn the_grant_endpoints_beneath_the_base_are_refused() {
        let grant = [Url::parse("https://api.example.com/v1/auth/token/revoke").unwrap()];
        for path in [
            "auth/token/revoke",
            "/auth/token/revoke/",
            "auth//token/revoke",
            "Auth/Token/Revoke",
            "auth/token/revok%65",
            "auth/token/revoke?x=1",
            "auth/token/revoke;x=1",
            "auth;a/token/revoke",
        ] {
            let url = resolve(&base(), path).unwrap();
            assert!(not_a_grant_endpoint(&url, &grant).is_err(), "{path}");
        }
        for path in [
            "auth/token",
            "auth/token/revoked",
            "users/get_current_account",
        ] {
            let url = resolve(&base(), path).unwrap();
            assert!(not_a_grant_endpoint(&url, &grant).is_ok(), "{path}");
        }
    }

    #[test]
    fn requests_at_or_beneath_a_grant_path_are_refused() {
        let paths = ["oauth".to_owned(), "auth.revoke".to_owned()];
        for path in [
            "oauth",
            "oauth/tokens/current.json",
            "OAuth//Tokens/1.json",
            "%6fauth/clients",
            "/auth.revoke",
            "Auth.Revoke?token=x",
            "oauth;jsessionid=1/tokens",
            "oauth./tokens",
            "auth.revoke.",
        ] {
            let url = resolve(&base(), path).unwrap();
            assert!(
                not_under_grant_paths(&url, &base(), &paths).is_err(),
                "{path}"
            );
        }
        for path in ["oauthx/tokens", "users/oauth", "auth.test", "auth.revoked"] {
            let url = resolve(&base(), path).unwrap();
            assert!(
                not_under_grant_paths(&url, &base(), &paths).is_ok(),
                "{path}"
            );
        }
        assert!(check_grant_path("oauth/tokens").is_ok());
        for bad in [
            "",
            "/",
            "..",
            "../oauth",
            "https://other.example/oauth",
            "//x/y",
        ] {
            assert!(check_grant_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn joined_urls_off_the_base_are_refused() {
        let off = [
            "https://evil.com/v1/x",
            "http://api.example.com/v1/x",
            "https://api.example.com:8443/v1/x",
            "https://api.example.com/v1x",
            "https://api.example.com/other",
            "https://u:p@api.example.com/v1/x",
        ];
        for url in off {
            let url = Url::parse(url).unwrap();
            assert!(check_under(&base(), &url).is_err(), "{url}");
        }
        let ok = Url::parse("https://api.example.com:443/v1/x").unwrap();
        assert!(check_under(&base(), &ok).is_ok());
    }

    #[test]
    fn methods_queries_and_bodies() {
        let allowed = vec!["GET".to_string(), "HEAD".to_string()];
        assert_eq!(method(&allowed, "get").unwrap(), reqwest::Method::GET);
        let e = method(&allowed, "delete").unwrap_err();
        assert_eq!(
            e.to_string(),
            "method `DELETE` is not allowed for this provider"
        );
        assert!(method(&allowed, "GET\r\nX: y").is_err());
        let q = serde_json::json!({"a": "x", "n": 2, "b": true});
        let pairs = query_pairs(q.as_object()).unwrap();
        assert_eq!(pairs.len(), 3);
        for bad in [
            serde_json::json!({"a": [1]}),
            serde_json::json!({"a": null}),
        ] {
            assert!(query_pairs(bad.as_object()).is_err(), "{bad}");
        }
        let body = serde_json::json!({"x": 1});
        assert!(body_allowed(&reqwest::Method::GET, Some(&body)).is_err());
        assert!(body_allowed(&reqwest::Method::POST, Some(&body)).is_ok());
        assert!(body_allowed(&reqwest::Method::GET, None).is_ok());
    }
}

/// Slack's Web API is RPC over HTTP: `GET chat.postMessage?…` posts a
/// message, so HTTP methods do not make a call read-only. Unless the
/// operator allowed POST (their sign that writes are wanted), only methods
/// whose names say they read are let through; `oauth.*`, `auth.revoke` and
/// `admin.*` never are.
pub(super) fn slack_method(allowed: &[String], path: &str) -> Result<(), ProviderError> {
    let name = path
        .trim_start_matches('/')
        .split(['?', '/'])
        .next()
        .unwrap_or_default();
    let refused = || {
        ProviderError::PathRefused(format!(
            "Slack method `{}` is not allowed",
            crate::crypto::printable_prefix_of(name, 64)
        ))
    };
    // The path is sent with its escapes, and Slack's edge decodes them: a
    // method name never needs one, so an escaped name (`%61dmin.…`) is an
    // attempt to pass the checks below as another method.
    if decoded(name) != name || !is_method_name(name) {
        return Err(refused());
    }
    // Nor does a method take a path after its name: what Slack would make
    // of `conversations.list/chat.postMessage` is not for these checks,
    // which judge the first name only, to guess.
    let whole = path
        .trim_start_matches('/')
        .split('?')
        .next()
        .unwrap_or_default();
    if whole != name {
        return Err(ProviderError::PathRefused(format!(
            "a Slack method takes no path after its name (`{}`): send the method's name alone",
            crate::crypto::printable_prefix_of(name, 64)
        )));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("oauth.") || lower.starts_with("admin.") || lower == "auth.revoke" {
        return Err(refused());
    }
    if allowed.iter().any(|m| m.eq_ignore_ascii_case("POST")) {
        return Ok(());
    }
    let verb = name.rsplit('.').next().unwrap_or_default();
    const READS: &[&str] = &[
        "list",
        "info",
        "history",
        "replies",
        "test",
        "identity",
        "lookupByEmail",
    ];
    let reads = READS.contains(&verb) || verb.starts_with("get") || name.starts_with("search.");
    if reads { Ok(()) } else { Err(refused()) }
}

/// Dotted words of letters and digits (`conversations.list`): the shape
/// of every Slack method, so nothing (`chat.postMessage;.list`) can end in
/// a reading verb without being one.
fn is_method_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let word = |w: &str| {
        w.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && w.bytes().all(|b| b.is_ascii_alphanumeric())
    };
    parts.clone().count() >= 2 && parts.all(word)
}

#[cfg(test)]
mod slack_tests {
    use super::*;

    #[test]
    fn slack_reads_pass_and_writes_do_not() {
        let read_only = vec!["GET".to_owned(), "HEAD".to_owned()];
        for ok in [
            "conversations.list",
            "users.info",
            "conversations.history",
            "auth.test",
            "search.messages",
            "users.getPresence",
        ] {
            assert!(slack_method(&read_only, ok).is_ok(), "{ok}");
        }
        for bad in [
            "chat.postMessage",
            "chat.delete",
            "auth.revoke",
            "oauth.v2.access",
            "admin.users.remove",
            "conversations.kick",
            // A reading name with another method after it.
            "conversations.list/chat.postMessage",
            "users.info/auth.revoke",
            "conversations.list/",
        ] {
            assert!(slack_method(&read_only, bad).is_err(), "{bad}");
        }
        assert!(slack_method(&read_only, "/conversations.list?limit=5").is_ok());
        let writes = vec!["GET".to_owned(), "POST".to_owned()];
        assert!(slack_method(&writes, "chat.postMessage").is_ok());
        assert!(slack_method(&writes, "auth.revoke").is_err());
    }

    #[test]
    fn an_escaped_or_recased_method_name_is_no_way_around_the_checks() {
        let read_only = vec!["GET".to_owned(), "HEAD".to_owned()];
        let writes = vec!["GET".to_owned(), "POST".to_owned()];
        for bad in [
            "%61dmin.users.list",
            "admin.users%2Elist",
            "%2561dmin.users.list",
            "chat.postMessage;.list",
            "chat.postMessage..list",
            "chat.postMessage.-list",
            "list",
        ] {
            assert!(slack_method(&read_only, bad).is_err(), "{bad}");
        }
        for bad in [
            "auth.revok%65",
            "%6Fauth.v2.access",
            "%61dmin.users.remove",
            "Auth.Revoke",
            "OAUTH.v2.access",
            "Admin.users.remove",
        ] {
            assert!(slack_method(&writes, bad).is_err(), "{bad}");
        }
        assert!(slack_method(&read_only, "/conversations.list?limit=5").is_ok());
    }
}
