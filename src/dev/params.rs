//! Parsing what browsers and clients send the dev identity provider: user
//! names, redirect URIs, client ids, PKCE values, form bodies. Dev mode has no
//! passwords, but it must never become an open redirector, so redirect URIs
//! are held to loopback or this server's own origin.

use std::collections::HashMap;

use url::{Host, Url};

/// A dev user name, which is also the `sub` of every token issued for it:
/// 1–64 ASCII letters, digits, `.`, `_` or `-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserName(String);

impl UserName {
    pub const RULE: &'static str = "1 to 64 letters, digits, '.', '_' or '-'";

    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!("a user name is {}", Self::RULE))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedirectUriError {
    #[error("redirect_uri is not an absolute URL")]
    NotAUrl,
    #[error("redirect_uri must be http or https")]
    Scheme,
    #[error("redirect_uri must not carry a fragment or user info")]
    Parts,
    #[error(
        "redirect_uri must point at a loopback address (localhost, 127.0.0.1, [::1]) or at this server"
    )]
    Host,
}

/// Accepts `raw` as a redirect target: http(s), no fragment, and either a
/// loopback host (any port, RFC 8252 §7.3) or the same origin as `server`.
pub fn check_redirect_uri(raw: &str, server: &Url) -> Result<Url, RedirectUriError> {
    let url = Url::parse(raw).map_err(|_| RedirectUriError::NotAUrl)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(RedirectUriError::Scheme);
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(RedirectUriError::Parts);
    }
    let loopback = match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if loopback || url.origin() == server.origin() {
        Ok(url)
    } else {
        Err(RedirectUriError::Host)
    }
}

/// Any client id is accepted in dev mode (including Client ID Metadata
/// Document URLs, which are not fetched); only its shape is checked.
pub fn is_client_id(s: &str) -> bool {
    (1..=512).contains(&s.len()) && !s.chars().any(char::is_control)
}

/// An S256 challenge is the base64url SHA-256 digest: exactly 43 characters.
pub fn is_s256_challenge(s: &str) -> bool {
    s.len() == 43
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// RFC 7636 §4.1: 43–128 unreserved characters.
pub fn is_code_verifier(s: &str) -> bool {
    (43..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Parses `application/x-www-form-urlencoded` (a body or a query string).
/// A parameter given twice is an error (RFC 6749 §3.1), named in `Err`.
pub fn parse_form(bytes: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(bytes) {
        if out.insert(k.to_string(), v.into_owned()).is_some() {
            return Err(k.into_owned());
        }
    }
    Ok(out)
}

/// The authorization response: 303 back to the client's `to` with `pairs`,
/// `state` (when given) and `iss` (RFC 9207). Shared by the dev identity
/// provider and the demo provider.
pub fn redirect_back(
    mut to: Url,
    pairs: &[(&str, &str)],
    state: Option<&str>,
    issuer: &str,
) -> actix_web::HttpResponse {
    {
        let mut query = to.query_pairs_mut();
        query.extend_pairs(pairs);
        if let Some(state) = state {
            query.append_pair("state", state);
        }
        query.append_pair("iss", issuer);
    }
    actix_web::HttpResponse::SeeOther()
        .insert_header(("Location", to.as_str()))
        .insert_header(("Cache-Control", "no-store"))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Url {
        Url::parse("http://127.0.0.1:8080").unwrap()
    }

    #[test]
    fn user_names_follow_the_rule() {
        for ok in ["alice", "bob.smith", "a_b-c", "X", &"a".repeat(64)] {
            assert_eq!(UserName::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            " alice",
            "al ice",
            "alice@example.com",
            "ålice",
            "a/b",
            &"a".repeat(65),
            "<script>",
        ] {
            assert!(UserName::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn loopback_and_same_origin_redirects_are_accepted() {
        for ok in [
            "http://localhost:3000/callback",
            "http://127.0.0.1:49152/cb?x=1",
            "http://127.0.0.5/cb",
            "http://[::1]:9000/cb",
            "https://localhost/cb",
            "http://127.0.0.1:8080/oauth/callback",
        ] {
            assert!(
                check_redirect_uri(ok, &server()).is_ok(),
                "{ok} was refused"
            );
        }
    }

    #[test]
    fn foreign_or_odd_redirects_are_refused() {
        let cases = [
            ("https://evil.example/cb", RedirectUriError::Host),
            ("http://localhost.evil.example/cb", RedirectUriError::Host),
            ("http://127.0.0.1.nip.io/cb", RedirectUriError::Host),
            ("http://10.0.0.1/cb", RedirectUriError::Host),
            ("https://127.0.0.1.example.com/cb", RedirectUriError::Host),
            ("http://evil.example@127.0.0.1/cb", RedirectUriError::Parts),
            ("http://localhost/cb#frag", RedirectUriError::Parts),
            ("javascript:alert(1)", RedirectUriError::Scheme),
            ("cursor://callback", RedirectUriError::Scheme),
            ("/relative", RedirectUriError::NotAUrl),
        ];
        for (raw, want) in cases {
            assert_eq!(
                check_redirect_uri(raw, &server()).unwrap_err(),
                want,
                "{raw}"
            );
        }
    }

    #[test]
    fn pkce_value_shapes() {
        assert!(is_s256_challenge(
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(!is_s256_challenge(
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-c"
        ));
        assert!(!is_s256_challenge(
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw+cM"
        ));
        assert!(is_code_verifier(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        ));
        assert!(!is_code_verifier("short"));
        assert!(!is_code_verifier(&"a".repeat(129)));
        assert!(!is_code_verifier(&format!("{} ", "a".repeat(43))));
    }

    #[test]
    fn duplicate_form_parameters_are_refused() {
        let ok = parse_form(b"a=1&b=x%20y").unwrap();
        assert_eq!(ok["b"], "x y");
        assert_eq!(parse_form(b"code=1&code=2").unwrap_err(), "code");
    }

    #[test]
    fn client_ids() {
        assert!(is_client_id("mcp-connect-web"));
        assert!(is_client_id("https://client.example/metadata.json"));
        assert!(!is_client_id(""));
        assert!(!is_client_id("a\nb"));
    }
}
