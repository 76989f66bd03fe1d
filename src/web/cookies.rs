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
/// A sign-in in progress, sealed ([`super::login_state`]).
pub const LOGIN: &str = "mcp_connect_login";

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

/// A cookie that tells the browser to forget `base`.
pub fn removal(settings: &Settings, base: &str) -> Cookie<'static> {
    let mut cookie = build(settings, base, String::new(), Duration::ZERO);
    cookie.make_removal();
    cookie
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
