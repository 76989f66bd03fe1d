//! Response headers every page carries: a strict Content-Security-Policy (no
//! inline script or style exists anywhere), no framing, no referrer, no MIME
//! sniffing. Flow pages add `Cache-Control: no-store`.
//!
//! There is deliberately no `form-action` directive: Chrome applies it to
//! the redirect that follows `POST /connect`, which goes to the provider's
//! authorize endpoint on another origin.

use actix_web::middleware::DefaultHeaders;

pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// The headers of every response, as (name, value).
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Content-Type-Options", "nosniff"),
];

/// Flow pages (they hold one-time links or personal data) are never cached.
pub const NO_STORE: (&str, &str) = ("Cache-Control", "no-store");

/// Middleware adding [`SECURITY_HEADERS`] where a handler has not set them,
/// and `Strict-Transport-Security` when the public URL is https (a browser
/// then never tries plain http to this host, where a session cookie could
/// be stripped or planted). Behind a TLS-terminating proxy the app sees
/// plain http, so the public URL decides, not the request.
pub fn security_headers(settings: &crate::config::Settings) -> DefaultHeaders {
    let headers = SECURITY_HEADERS
        .iter()
        .fold(DefaultHeaders::new(), |headers, pair| headers.add(*pair));
    let max_age = settings.web.hsts_max_age_secs;
    if settings.public_url.scheme() == "https" && max_age > 0 {
        headers.add(("Strict-Transport-Security", format!("max-age={max_age}")))
    } else {
        headers
    }
}

/// Adds the security headers and `no-store` to a response being built; the
/// page helpers use it so pages are protected even where the middleware is
/// not mounted.
pub fn apply(builder: &mut actix_web::HttpResponseBuilder) {
    for pair in SECURITY_HEADERS {
        builder.insert_header(pair);
    }
    builder.insert_header(NO_STORE);
}
