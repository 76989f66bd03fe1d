//! The checks a loaded configuration must pass before the service starts,
//! beyond what its types already enforce. They run in a fixed order and stop
//! at the first failure, naming the setting.

use secrecy::ExposeSecret;
use url::Url;

use super::{ConfigError, Settings, env_name};

/// The shortest `web.session_idle_secs` other than none: five times the
/// minute between two records of a session's activity.
pub const MIN_SESSION_IDLE_SECS: u64 = 300;

impl Settings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.public_url.scheme(), "http" | "https") || self.public_url.host().is_none()
        {
            return Err(invalid(
                "public_url",
                "must be an http(s) URL with a host".into(),
            ));
        }
        if has_user_part(&self.public_url) {
            // Every link and page would show it, and every start's log.
            return Err(invalid(
                "public_url",
                "must not carry a user or password".into(),
            ));
        }
        if self.public_url.query().is_some() || self.public_url.fragment().is_some() {
            return Err(invalid(
                "public_url",
                "must not carry a query or fragment".into(),
            ));
        }
        for origin in &self.allowed_origins {
            // `null` is what a sandboxed page or a file sends, compared as
            // it is (allowing it is the operator's choice).
            if origin == "null" {
                continue;
            }
            if origin.ends_with(":*") {
                return Err(invalid(
                    "allowed_origins",
                    format!("`{origin}`: a port wildcard is not supported; list each origin"),
                ));
            }
            // Compared as the browser sends `Origin`: scheme, host and a port
            // other than the scheme's own, nothing else.
            let written = url::Url::parse(origin)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
                .map(|u| u.origin().ascii_serialization());
            match written {
                Some(o) if o == *origin => {}
                Some(o) => {
                    return Err(invalid(
                        "allowed_origins",
                        format!("`{origin}` is not an origin as browsers send it; write `{o}`"),
                    ));
                }
                None => {
                    return Err(invalid(
                        "allowed_origins",
                        format!("`{origin}` is not an http(s) origin (scheme://host[:port])"),
                    ));
                }
            }
        }
        for host in &self.allowed_hosts {
            check_allowed_host(host)?;
        }
        // Compared with a document URL's host (and port) as the URL writes
        // them: an entry written otherwise would start up fine and never match.
        for host in &self.clients.metadata_trusted_hosts {
            let key = "clients.metadata_trusted_hosts";
            match canonical_host(host) {
                Some(canonical) if canonical.eq_ignore_ascii_case(host) => {}
                Some(canonical) => {
                    return Err(invalid(
                        key,
                        format!("`{host}` is compared as a URL writes it: write `{canonical}`"),
                    ));
                }
                None => {
                    return Err(invalid(
                        key,
                        format!(
                            "`{host}` is not a host (`registry.internal` or `registry.internal:8443`, no scheme or path)"
                        ),
                    ));
                }
            }
        }
        if self.public_url.path() != "/" {
            // The pages, their redirects and forms, `/static` and the
            // `__Host-` cookies (which must have `Path=/`) live at the root.
            return Err(invalid(
                "public_url",
                "must be a site's root, without a path: give the service a host of its own".into(),
            ));
        }
        if self.public_url.scheme() == "http" && !is_loopback(&self.public_url) {
            // Without TLS, cookies cannot be `Secure` or `__Host-`: anyone on
            // the path could read a session or plant one (login CSRF).
            return Err(invalid(
                "public_url",
                "must be https (plain http is accepted only on loopback)".into(),
            ));
        }
        if self.insecure_http && self.public_url.scheme() == "https" {
            // It would strip `Secure` and `__Host-` from the cookies of an
            // https site, for nothing.
            return Err(invalid(
                "insecure_http",
                "must be false when public_url is https (it is only for plain http on loopback)"
                    .into(),
            ));
        }
        check_database_url(self.database_url.expose_secret())
            .map_err(|m| invalid("database_url", m))?;
        // Tokens are checked against what these URLs answer: on plain http
        // anyone on the path could forge every identity.
        let identity_urls = [
            ("auth.issuer", Some(&self.auth.issuer)),
            ("auth.jwks_url", self.auth.jwks_url.as_ref()),
            (
                "auth.introspection.url",
                self.auth.introspection.as_ref().map(|i| &i.url),
            ),
        ];
        for (key, url) in identity_urls {
            // The issuer is published in the resource's metadata and logged
            // at every start; none of these authenticates that way.
            if let Some(url) = url
                && has_user_part(url)
            {
                return Err(invalid(key, "must not carry a user or password".into()));
            }
            if let Some(url) = url
                && !is_secure_or_loopback(url)
            {
                return Err(invalid(
                    key,
                    "must be https (plain http is accepted only on loopback)".into(),
                ));
            }
        }
        if self.keys.is_empty() {
            return Err(ConfigError::Missing {
                key: "keys".into(),
                env: env_name("keys"),
            });
        }
        crate::crypto::KeyRing::from_entries(self.keys.iter().map(|k| k.expose_secret()))
            .map_err(|e| invalid("keys", e.to_string()))?;
        if let Some(token) = &self.metrics_token {
            let token = token.expose_secret();
            if token.len() < 16 || !is_token68(token) {
                return Err(invalid(
                    "metrics_token",
                    "must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / (e.g. `openssl rand -hex 32`)".into(),
                ));
            }
        }
        if !(1..=300).contains(&self.body_read_timeout_secs) {
            return Err(invalid(
                "body_read_timeout_secs",
                "must be between 1 and 300".into(),
            ));
        }
        if !(1..=300).contains(&self.keep_alive_secs) {
            return Err(invalid(
                "keep_alive_secs",
                "must be between 1 and 300".into(),
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(invalid("max_body_bytes", "must be at least 1024".into()));
        }
        if !(2..=10_000).contains(&self.database_max_connections) {
            return Err(invalid(
                "database_max_connections",
                "must be between 2 and 10000 (half are pooled, half kept per worker thread)".into(),
            ));
        }
        if self.auth.subject_claim.trim().is_empty() {
            return Err(invalid("auth.subject_claim", "must not be empty".into()));
        }
        self.validate_scopes()?;
        for name in self.providers.keys() {
            if !is_valid_name(name) {
                return Err(invalid(
                    &format!("providers.{name}"),
                    "provider names are 1 to 32 lowercase letters, digits, `-` or `_`".into(),
                ));
            }
        }
        const MONTH: u64 = 31 * 24 * 3600;
        for (key, value) in [
            ("flow.ticket_ttl_secs", self.flow.ticket_ttl_secs),
            (
                "flow.request_state_ttl_secs",
                self.flow.request_state_ttl_secs,
            ),
            ("web.session_ttl_secs", self.web.session_ttl_secs),
            ("flow.connect_wait_ms", self.flow.connect_wait_ms / 1000),
        ] {
            if value > MONTH {
                return Err(invalid(key, "is longer than a month".into()));
            }
        }
        for (key, value) in [
            ("flow.ticket_ttl_secs", self.flow.ticket_ttl_secs),
            (
                "flow.request_state_ttl_secs",
                self.flow.request_state_ttl_secs,
            ),
            ("web.session_ttl_secs", self.web.session_ttl_secs),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be greater than zero".into()));
            }
        }
        // Clock skew, not a grace period: more would accept tokens long
        // expired (and past the Unix time itself, overflow the check).
        if self.auth.leeway_secs > 300 {
            return Err(invalid(
                "auth.leeway_secs",
                "is clock skew tolerance: at most 300 seconds".into(),
            ));
        }
        // Activity is written at most once a minute: a shorter idle time
        // would sign out someone who uses the pages every minute.
        if self.web.session_idle_secs != 0
            && !(MIN_SESSION_IDLE_SECS..=MONTH).contains(&self.web.session_idle_secs)
        {
            return Err(invalid(
                "web.session_idle_secs",
                format!("must be 0 (none) or between {MIN_SESSION_IDLE_SECS} seconds and a month"),
            ));
        }
        if !(2..=600).contains(&self.web.page_timeout_secs) {
            return Err(invalid(
                "web.page_timeout_secs",
                "must be between 2 and 600 seconds".into(),
            ));
        }
        if self.flow.links_per_minute == 0 {
            return Err(invalid(
                "flow.links_per_minute",
                "must be at least 1".into(),
            ));
        }
        self.webhooks.validate()?;
        self.validate_operations()
    }
}

impl Settings {
    /// Scopes are RFC 6749 §3.3 scope tokens (they are written into
    /// `WWW-Authenticate` challenges), and a required scope must be one
    /// clients are told to ask for: they take the challenge's `scope` or
    /// the metadata's `scopes_supported`, never anything else.
    fn validate_scopes(&self) -> Result<(), ConfigError> {
        for (key, scopes) in [
            ("auth.scopes_supported", &self.auth.scopes_supported),
            ("auth.required_scopes", &self.auth.required_scopes),
        ] {
            if let Some(bad) = scopes.iter().find(|s| !is_scope_token(s)) {
                return Err(invalid(
                    key,
                    format!(
                        "{bad:?} is not a scope: one or more visible ASCII characters other than `\"` and `\\`"
                    ),
                ));
            }
        }
        if let Some(missing) = self
            .auth
            .required_scopes
            .iter()
            .find(|s| !self.auth.scopes_supported.contains(s))
        {
            return Err(invalid(
                "auth.required_scopes",
                format!(
                    "names {missing:?}, which auth.scopes_supported does not list: clients ask for the scopes listed there, so their tokens would never carry it"
                ),
            ));
        }
        Ok(())
    }

    /// What `serve` (and dev mode) needs beyond a loadable configuration:
    /// without a provider or a web sign-in client every connect link would
    /// end on an error page. (`migrate`, `purge`, `tokens rekey` need
    /// neither.)
    pub fn validate_for_serving(&self) -> Result<(), ConfigError> {
        if self.providers.is_empty() {
            return Err(ConfigError::Invalid {
                key: "providers".into(),
                message: "no provider is configured: add at least one [providers.NAME] table \
                          (or MCP_CONNECT_PROVIDERS__NAME__CLIENT_ID)"
                    .into(),
            });
        }
        let web_client = self.auth.web_client_id.as_deref().map(str::trim);
        if web_client.is_none_or(str::is_empty) {
            return Err(ConfigError::Invalid {
                key: "auth.web_client_id".into(),
                message: format!(
                    "is required to sign people in on the connect pages (set it in the file or as {})",
                    env_name("auth.web_client_id")
                ),
            });
        }
        Ok(())
    }
}

/// An `allowed_hosts` entry must be a `Host` value that requests can carry.
/// Clients leave a scheme's default port (80 for http, 443 for https) out
/// of `Host`, and the check compares a port only when the entry names
/// one: an entry with either would match no request (public_url's scheme
/// or, inside the network, the other's).
fn check_allowed_host(host: &str) -> Result<(), ConfigError> {
    if host.is_empty() || host.contains(['/', '@', '?', '#']) || host.contains(char::is_whitespace)
    {
        return Err(invalid(
            "allowed_hosts",
            format!("`{host}` is not a Host value (host or host:port, no scheme or path)"),
        ));
    }
    let authority = http::uri::Authority::try_from(host).ok();
    let default_port = |a: &http::uri::Authority| match a.port_u16() {
        Some(80) => Some("http"),
        Some(443) => Some("https"),
        _ => None,
    };
    if let Some(a) = authority
        && let Some(scheme) = default_port(&a)
    {
        return Err(invalid(
            "allowed_hosts",
            format!(
                "`{host}` never matches: clients leave {scheme}'s default port out of Host; \
                 write `{}`",
                a.host()
            ),
        ));
    }
    Ok(())
}

/// Only Postgres, and a URL naming both the server and the database: a
/// bare `host:port` or another scheme would otherwise become a database
/// named after the port. The URL is a secret: messages never repeat it
/// (the URL parser's own messages never quote what they parse).
pub(crate) fn check_database_url(raw: &str) -> Result<(), String> {
    let url = Url::parse(raw).map_err(|e| match password_hint(raw) {
        "" => format!("is not a valid URL ({e}): write postgres://HOST:PORT/DATABASE"),
        hint => format!("is not a valid URL ({e}){hint}"),
    })?;
    if !matches!(url.scheme(), "postgres" | "postgresql") {
        return Err("must be a postgres:// or postgresql:// URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) && !names_server_in_query(&url) {
        return Err(
            "must name the database server (postgres://HOST/DATABASE, or for a Unix socket \
             postgres:///DATABASE?host=/var/run/postgresql)"
                .into(),
        );
    }
    let database = url.path().trim_start_matches('/');
    if database.is_empty() || database.contains('/') {
        // A password's `/`, `?` or `#` ends the host early: what
        // followed it, up to the `@`, became the path, query or fragment.
        let cut_short = [Some(url.path()), url.query(), url.fragment()]
            .into_iter()
            .flatten()
            .any(|part| part.contains('@'));
        let hint = if cut_short { password_hint(raw) } else { "" };
        return Err(format!(
            "must name the database (postgres://HOST/DATABASE){hint}"
        ));
    }
    Ok(())
}

/// For a URL with a user part: the characters of a password that cut a
/// URL short (`/`, `?`, `#`) or are decoded (`%` and two hex digits).
fn password_hint(raw: &str) -> &'static str {
    if raw.contains('@') {
        "; in a password, write `/` as %2F, `?` as %3F, `#` as %23 and `%` as %25"
    } else {
        ""
    }
}

/// Whether the query names the server, as libpq and sqlx read it: `host`
/// (a host name, or the directory of a Unix socket) or `hostaddr`. A
/// socket's URL has no host of its own to write it in.
fn names_server_in_query(url: &Url) -> bool {
    url.query_pairs()
        .any(|(key, value)| matches!(&*key, "host" | "hostaddr") && !value.is_empty())
}

/// Whether `url` names a user or a password (`https://user:pass@host`).
fn has_user_part(url: &Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// https, or plain http on loopback only: what every URL that tokens are
/// checked against must be.
pub(crate) fn is_secure_or_loopback(url: &Url) -> bool {
    url.scheme() == "https" || (url.scheme() == "http" && is_loopback(url))
}

pub(super) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// RFC 9110 token68: what a bearer credential may consist of. Every MCP
/// request checks its token (hundreds of bytes) with this, so every byte is
/// checked without stopping at the first bad one: the loop then has no
/// branch and the compiler runs it on vector registers, many bytes at a
/// time (a table lookup per byte, stopping early, was ≈4 instructions a
/// byte).
pub fn is_token68(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    !body.is_empty() && body.bytes().fold(true, |ok, b| ok & is_token68_byte(b))
}

/// Whether byte `b` may appear in a token68 before its trailing `=`s.
#[inline(always)]
fn is_token68_byte(b: u8) -> bool {
    // `| 0x20` lowercases an ASCII capital and maps no other byte into a..z.
    let letter = (b | 0x20).wrapping_sub(b'a') < 26;
    let digit = b.wrapping_sub(b'0') < 10;
    letter
        | digit
        | (b == b'-')
        | (b == b'.')
        | (b == b'_')
        | (b == b'~')
        | (b == b'+')
        | (b == b'/')
}

/// The names settings give providers and webhook endpoints (and pages
/// and tools accept back): 1 to 32 lowercase letters, digits, `-` or `_`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// `host` or `host:port` as a URL writes it (lowercase, IPv4 in four
/// parts, IPv6 in brackets and shortest form, international names in
/// punycode); `None` for anything that is not a host and a port.
fn canonical_host(value: &str) -> Option<String> {
    if value.is_empty()
        || value.contains(['/', '@', '?', '#', '\\'])
        || value.contains(char::is_whitespace)
    {
        return None;
    }
    let url = Url::parse(&format!("https://{value}/")).ok()?;
    let host = url.host_str()?;
    // The port as written (the URL drops 443, the scheme's own).
    let port = match value.rsplit_once(':') {
        Some((_, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            Some(port.parse::<u16>().ok()?)
        }
        _ => None,
    };
    Some(match port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// The setting `key` is refused, and why.
fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        message,
    }
}

/// RFC 6749 §3.3: `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::minimal;

    #[test]
    fn token68_allows_exactly_the_rfc_9110_characters() {
        let allowed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/";
        for b in 0..=255u8 {
            let one = [b'a', b, b'a'];
            let s = String::from_utf8_lossy(&one);
            assert_eq!(
                is_token68(&s),
                allowed.as_bytes().contains(&b),
                "byte {b:#04x}"
            );
        }
        assert!(is_token68("abc=="));
        assert!(!is_token68("=="));
        assert!(!is_token68("a=b"));
        assert!(!is_token68(""));
    }

    #[test]
    fn required_scopes_are_scope_tokens_that_clients_are_told_to_ask_for() {
        let load = |supported: &str, required: &str| {
            let mut vars = minimal();
            vars.push((
                "MCP_CONNECT_AUTH__SCOPES_SUPPORTED".into(),
                supported.into(),
            ));
            vars.push(("MCP_CONNECT_AUTH__REQUIRED_SCOPES".into(), required.into()));
            Settings::from_sources(None, vars, toml::Table::new())
        };
        let s = load("mcp:tools,mcp:resources", "mcp:tools").unwrap();
        assert_eq!(s.auth.required_scopes, ["mcp:tools"]);
        assert!(load("", "").unwrap().auth.required_scopes.is_empty());

        let err = load("mcp:tools", "mcp:tools,admin")
            .unwrap_err()
            .to_string();
        assert!(err.contains("auth.required_scopes"), "{err}");
        assert!(err.contains("\"admin\""), "{err}");
        let err = load("", "mcp:tools").unwrap_err().to_string();
        assert!(err.contains("auth.scopes_supported does not list"), "{err}");

        for bad in ["with space", "quote\"d", "back\\slash", "caf\u{e9}"] {
            let mut vars = minimal();
            vars.push(("MCP_CONNECT_AUTH__SCOPES_SUPPORTED".into(), bad.into()));
            let err = Settings::from_sources(None, vars, toml::Table::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains("auth.scopes_supported"), "{bad:?}: {err}");
        }
        assert!(is_scope_token("mcp:tools"));
        assert!(is_scope_token("https://graph.microsoft.com/.default"));
        assert!(!is_scope_token(""));
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
    fn a_zero_lifetime_names_its_setting_and_leeway_is_bounded() {
        for (var, value, key) in [
            (
                "MCP_CONNECT_WEB__SESSION_TTL_SECS",
                "0",
                "web.session_ttl_secs",
            ),
            (
                "MCP_CONNECT_FLOW__TICKET_TTL_SECS",
                "0",
                "flow.ticket_ttl_secs",
            ),
            ("MCP_CONNECT_AUTH__LEEWAY_SECS", "86400", "auth.leeway_secs"),
            (
                "MCP_CONNECT_WEB__PAGE_TIMEOUT_SECS",
                "0",
                "web.page_timeout_secs",
            ),
        ] {
            let mut vars = minimal();
            vars.push((var.into(), value.into()));
            let err = Settings::from_sources(None, vars, toml::Table::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{err}");
        }
        let mut vars = minimal();
        vars.push(("MCP_CONNECT_AUTH__LEEWAY_SECS".into(), "300".into()));
        assert!(Settings::from_sources(None, vars, toml::Table::new()).is_ok());
    }

    #[test]
    fn an_idle_time_is_none_or_at_least_five_minutes() {
        let with = |value: &str| {
            let mut vars = minimal();
            vars.push(("MCP_CONNECT_WEB__SESSION_IDLE_SECS".into(), value.into()));
            Settings::from_sources(None, vars, toml::Table::new())
        };
        for refused in ["1", "299", "99999999999"] {
            let err = with(refused).unwrap_err().to_string();
            assert!(err.contains("web.session_idle_secs"), "{refused}: {err}");
        }
        assert_eq!(with("0").unwrap().web.session_idle(), None);
        assert_eq!(
            with("300").unwrap().web.session_idle(),
            Some(std::time::Duration::from_secs(300))
        );
        let default = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
        assert_eq!(default.web.session_idle_secs, 3600);
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
}
