//! The one cookie builder: every cookie this service sets comes from here,
//! so none can be set without `HttpOnly`, `SameSite=Lax`, `Path=/` and —
//! outside plain-http development — `Secure` and the `__Host-` prefix.
//!
//! `__Host-` makes browsers refuse the cookie unless it is `Secure`, has
//! `Path=/` and no `Domain`, so a sibling subdomain cannot plant or shadow
//! it. Browsers also refuse a `__Host-` cookie that lacks `Secure`, and
//! `Secure` cookies are not stored over plain http; so in `insecure_http`
//! mode (local development only) both the flag and the prefix are dropped.
//!
//! Values are random 256-bit base64url strings ([`crate::crypto::secret`]),
//! of which the server keeps only the SHA-256, or values sealed by the key
//! ring (the sign-in in progress).

use std::time::Duration;

use actix_web::{
    HttpRequest,
    cookie::{Cookie, SameSite, time::Duration as CookieDuration},
};

use crate::config::Settings;
use crate::crypto::secret;

/// The browser session (see [`super::session`]).
pub const SESSION: &str = "mcp_connect_session";
/// A sign-in in progress, sealed ([`super::login_state`]): the start of
/// the name of each sign-in's own cookie ([`login_slot`]).
pub const LOGIN: &str = "mcp_connect_login";

/// At most this many sign-ins in progress per browser: starting one more
/// ends those in progress (each cookie is ≈0.7 KB of every request's
/// headers, and proxies limit those).
pub const MAX_LOGINS_IN_PROGRESS: usize = 4;

/// How long the pre-login cookie (and its login flow) lives.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);

/// The name a cookie is sent under.
pub fn name(settings: &Settings, base: &str) -> String {
    if settings.insecure_http {
        base.to_owned()
    } else {
        format!("__Host-{base}")
    }
}

pub fn build(settings: &Settings, base: &str, value: String, max_age: Duration) -> Cookie<'static> {
    let seconds = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
    Cookie::build(name(settings, base), value)
        .path("/")
        .http_only(true)
        .secure(!settings.insecure_http)
        .same_site(SameSite::Lax)
        .max_age(CookieDuration::seconds(seconds))
        .finish()
}

/// The cookie of the sign-in whose `state` is this: one per sign-in, so
/// two tabs signing in at once (two connect links opened signed out) do
/// not overwrite each other's. Named by a hash of `state`, which the
/// callback brings back; the sealed value is still checked against it.
pub fn login_slot(state: &str) -> String {
    let digest = secret::sha256(state);
    format!("{LOGIN}_{}", crate::crypto::hex(&digest[..6]))
}

/// The base names of the sign-in cookies this request carries (the one
/// name older versions used included).
pub fn logins_in_progress(req: &HttpRequest, settings: &Settings) -> Vec<String> {
    let sent = name(settings, LOGIN);
    let Ok(cookies) = req.cookies() else {
        return Vec::new();
    };
    cookies
        .iter()
        .filter_map(|c| {
            let rest = c.name().strip_prefix(&sent)?;
            (rest.is_empty() || is_slot_suffix(rest)).then(|| format!("{LOGIN}{rest}"))
        })
        .collect()
}

fn is_slot_suffix(rest: &str) -> bool {
    rest.strip_prefix('_')
        .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A cookie that tells the browser to forget `base`.
pub fn removal(settings: &Settings, base: &str) -> Cookie<'static> {
    let mut cookie = build(settings, base, String::new(), Duration::ZERO);
    cookie.make_removal();
    cookie
}

/// Whether the request carries cookie `base` at all, whatever its value.
pub fn sent(req: &HttpRequest, settings: &Settings, base: &str) -> bool {
    req.cookie(&name(settings, base)).is_some()
}

/// The value of cookie `base`, if the request has one of the right shape.
/// Anything else (absent, malformed header, wrong length or alphabet) is
/// `None`: a forged cookie is the same as none.
pub fn read(req: &HttpRequest, settings: &Settings, base: &str) -> Option<String> {
    let cookie = req.cookie(&name(settings, base))?;
    let value = cookie.value();
    if secret::is_random_value(value) {
        Some(value.to_owned())
    } else {
        tracing::info!(cookie = base, "ignoring a malformed cookie");
        None
    }
}

/// The value of cookie `base` holding a sealed value (`kid.base64url`, at
/// most `max_len` long); `None` for anything else. Opening it is the
/// caller's check.
pub fn read_sealed(
    req: &HttpRequest,
    settings: &Settings,
    base: &str,
    max_len: usize,
) -> Option<String> {
    let cookie = req.cookie(&name(settings, base))?;
    let value = cookie.value();
    let shaped = !value.is_empty()
        && value.len() <= max_len
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if shaped {
        Some(value.to_owned())
    } else {
        tracing::info!(cookie = base, "ignoring a malformed cookie");
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(insecure_http: bool) -> Settings {
        // `insecure_http` is accepted only with a plain-http loopback URL.
        let public_url = if insecure_http {
            "http://127.0.0.1:8080"
        } else {
            "https://connect.example.com"
        };
        let table: toml::Table = toml::from_str(&format!(
            r#"
            public_url = "{public_url}"
            database_url = "postgres://localhost/x"
            keys = ["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]
            insecure_http = {insecure_http}
            [auth]
            issuer = "https://idp.example.com"
            "#
        ))
        .unwrap();
        Settings::from_sources(None, Vec::new(), table).unwrap()
    }

    #[test]
    fn production_cookies_are_host_prefixed_secure_httponly_lax() {
        let c = build(
            &settings(false),
            SESSION,
            "v".into(),
            Duration::from_secs(60),
        );
        let header = c.to_string();
        assert_eq!(c.name(), "__Host-mcp_connect_session");
        assert_eq!(c.secure(), Some(true));
        assert_eq!(c.http_only(), Some(true));
        assert_eq!(c.same_site(), Some(SameSite::Lax));
        assert_eq!(c.path(), Some("/"));
        assert_eq!(c.domain(), None);
        assert!(header.contains("Max-Age=60"), "{header}");
    }

    #[test]
    fn each_sign_in_has_its_own_cookie_and_only_those_count_as_sign_ins() {
        let (a, b) = (login_slot("state-a"), login_slot("state-b"));
        assert_ne!(a, b);
        assert!(a.starts_with("mcp_connect_login_") && a.len() == LOGIN.len() + 13);
        let settings = settings(false);
        let req = actix_web::test::TestRequest::default()
            .insert_header((
                "cookie",
                format!(
                    "__Host-{a}=x; __Host-{LOGIN}=y; __Host-{LOGIN}_zz=1; {b}=no-prefix; \
                     __Host-{SESSION}=s"
                ),
            ))
            .to_http_request();
        assert_eq!(
            logins_in_progress(&req, &settings),
            vec![a, LOGIN.to_owned()]
        );
    }

    #[test]
    fn plain_http_dev_cookies_drop_secure_and_the_prefix() {
        let c = build(&settings(true), LOGIN, "v".into(), LOGIN_TTL);
        assert_eq!(c.name(), "mcp_connect_login");
        assert_ne!(c.secure(), Some(true));
        assert_eq!(c.http_only(), Some(true));
        assert_eq!(c.same_site(), Some(SameSite::Lax));
    }

    #[test]
    fn removal_expires_the_cookie_with_the_same_attributes() {
        let c = removal(&settings(false), SESSION);
        assert_eq!(c.name(), "__Host-mcp_connect_session");
        assert_eq!(c.value(), "");
        assert_eq!(c.max_age(), Some(CookieDuration::ZERO));
        assert_eq!(c.secure(), Some(true));
    }
}
