//! MCP resource-server side: who is calling. Owns the bearer token contract
//! (the `Authorization` header, the `WWW-Authenticate` challenge), the
//! [`Principal`] a verified token yields, the [`AuthError`]s a rejected one
//! gets, and Protected Resource Metadata (RFC 9728).
//!
//! The parts: `verifier` (JWT and introspection dispatch), `jwt` (header and
//! key checks), `keys` (JWKS cache), `discovery` (issuer metadata), `claims`,
//! `introspection` (RFC 7662), `metadata` (the well-known document), `fetch`
//! (bounded outbound JSON).

mod claims;
mod discovery;
mod fetch;
mod introspection;
mod jwt;
mod keys;
mod metadata;
mod recent;
#[cfg(test)]
mod test_support;
mod verifier;

pub(crate) use claims::{issuer_matches, same_issuer};
pub use metadata::{configure, metadata_document, resource_metadata_url};
pub use verifier::TokenVerifier;

use url::Url;

use crate::{config::is_token68, domain::UserRef};

/// Who is calling: the token's issuer and subject, and the OAuth client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `iss`, exactly as the issuer wrote it.
    pub issuer: String,
    pub subject: String,
    pub client_id: String,
    pub scopes: Vec<String>,
}

impl Principal {
    /// The person behind the token, for everything that belongs to them.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }

    /// The subject as a log line keeps it: whole up to OpenID Connect's
    /// longest (255 characters); a longer one, which a token may carry,
    /// cut to its printable prefix, so that no token sets a line's size.
    pub fn subject_for_log(&self) -> std::borrow::Cow<'_, str> {
        crate::crypto::printable_prefix_if_longer(&self.subject, 255)
    }

    /// The client id as a log line keeps it: whole up to the length an
    /// audit row keeps ([`crate::db::audit::CLIENT_ID_CHARS`]; the line's
    /// JSON escapes what needs it, where a row keeps a printable prefix), a
    /// longer one cut to its printable prefix. The client may have chosen
    /// it (a metadata document's URL), whatever its length.
    pub fn client_id_for_log(&self) -> std::borrow::Cow<'_, str> {
        crate::crypto::printable_prefix_if_longer(
            &self.client_id,
            crate::db::audit::CLIENT_ID_CHARS,
        )
    }
}

/// Why a bearer token was not accepted. Messages name the reason (and at
/// most the `kid` or algorithm from the token header), never the token.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("malformed Authorization header: {0}")]
    MalformedHeader(&'static str),
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("signing algorithm {0:?} is not accepted")]
    UnsupportedAlgorithm(String),
    #[error("token type {0:?} is not accepted")]
    WrongType(String),
    #[error("no signing key for kid {kid:?}")]
    UnknownKey { kid: Option<String> },
    #[error("the token's algorithm does not match its key")]
    KeyMismatch,
    #[error("bad signature")]
    BadSignature,
    #[error("expired")]
    Expired,
    #[error("not valid yet (nbf)")]
    NotYetValid,
    #[error("audience does not include this server")]
    WrongAudience,
    #[error("issuer is not the configured one")]
    WrongIssuer,
    #[error("claim `{0}` is missing")]
    MissingClaim(String),
    #[error("claim `{0}` has the wrong type or is empty")]
    InvalidClaim(String),
    #[error("token is not active (introspection)")]
    Inactive,
    #[error("token is not a JWT and introspection is not configured")]
    OpaqueNotSupported,
    /// The issuer's metadata or keys could not be loaded: not the caller's
    /// fault, so not an `invalid_token`.
    #[error("signing keys unavailable: {0}")]
    KeysUnavailable(String),
    /// The introspection endpoint failed to answer usefully.
    #[error("introspection failed: {0}")]
    IntrospectionFailed(String),
}

impl AuthError {
    /// True when the token could not be checked because a dependency (issuer
    /// metadata, JWKS, introspection) failed; answer 503, not 401.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::KeysUnavailable(_) | Self::IntrospectionFailed(_)
        )
    }

    /// The RFC 6750 error code and a short, generic description.
    fn challenge(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::MalformedHeader(_) => {
                Some(("invalid_request", "The Authorization header is malformed"))
            }
            e if e.is_unavailable() => None,
            Self::Expired => Some(("invalid_token", "The access token expired")),
            _ => Some(("invalid_token", "The access token is invalid")),
        }
    }
}

/// The bearer token of a request: `Ok(None)` when it carries none — no
/// `Authorization` header, another scheme (`Basic`), or the `Bearer` scheme
/// with nothing after it, which RFC 6750 §3.1 answers as a request without
/// authentication (a 401 naming no error, from which a client starts its
/// authorization) — and an error when it is malformed: more than one
/// header, or a `Bearer` credential that is not a token68.
pub fn bearer_token(headers: &http::HeaderMap) -> Result<Option<&str>, AuthError> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AuthError::MalformedHeader(
            "more than one Authorization header",
        ));
    }
    match bearer_from_authorization(value.as_bytes()) {
        Ok(token) => Ok(Some(token)),
        Err(AuthError::MalformedHeader(NOT_BEARER | NO_TOKEN)) => Ok(None),
        Err(e) => Err(e),
    }
}

const NOT_BEARER: &str = "not a Bearer credential";
const NO_TOKEN: &str = "empty bearer token";

/// Parses one `Authorization` value (for callers holding another `http`
/// version's header map). The scheme is case-insensitive (RFC 9110 §11.1);
/// the credential must be a token68.
pub fn bearer_from_authorization(value: &[u8]) -> Result<&str, AuthError> {
    let value = std::str::from_utf8(value).map_err(|_| AuthError::MalformedHeader("not ASCII"))?;
    let value = value.trim_matches([' ', '\t']);
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::MalformedHeader(NOT_BEARER));
    }
    let token = rest.trim_start_matches(' ');
    if token.is_empty() {
        return Err(AuthError::MalformedHeader(NO_TOKEN));
    }
    if !is_token68(token) {
        return Err(AuthError::MalformedHeader(
            "bearer token has invalid characters",
        ));
    }
    Ok(token)
}

/// The `WWW-Authenticate` value of a 401: where the metadata is, the
/// scopes to ask for (the authorization spec's SHOULD: the configured
/// `scopes_supported`, when there are any) and — when a token was sent
/// and rejected — why, in RFC 6750 terms.
pub fn www_authenticate(
    resource_metadata_url: &str,
    scopes: &[String],
    error: Option<&AuthError>,
) -> String {
    let mut value = format!(
        "Bearer resource_metadata=\"{}\"",
        quoted(resource_metadata_url)
    );
    if !scopes.is_empty() {
        value.push_str(&format!(", scope=\"{}\"", quoted(&scopes.join(" "))));
    }
    if let Some((code, description)) = error.and_then(AuthError::challenge) {
        value.push_str(&format!(
            ", error=\"{code}\", error_description=\"{description}\""
        ));
    }
    value
}

impl Principal {
    /// The `required` scopes this token was not granted. Compared exactly:
    /// this server defines no scope that implies another.
    pub fn missing_scopes<'r>(&self, required: &'r [String]) -> Vec<&'r str> {
        required
            .iter()
            .filter(|scope| !self.scopes.contains(scope))
            .map(String::as_str)
            .collect()
    }
}

/// The `WWW-Authenticate` value of a 403 for a token without a required
/// scope (the authorization spec's "Runtime Insufficient Scope Errors"):
/// every scope the operation needs in one challenge, so a client steps up
/// once, and where the metadata is, as in a 401.
pub fn insufficient_scope_challenge(resource_metadata_url: &str, required: &[String]) -> String {
    format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", \
         error_description=\"The access token lacks a scope this server requires\"",
        quoted(&required.join(" ")),
        quoted(resource_metadata_url),
    )
}

fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The issuer identifier as the operator wrote it: `Url` adds a `/` to a
/// bare host (`https://idp.example.com/`), which real issuers usually lack.
pub fn configured_issuer(issuer: &Url) -> String {
    let s = issuer.as_str();
    match s.strip_suffix('/') {
        Some(bare) if issuer.path() == "/" && issuer.query().is_none() => bare.to_owned(),
        _ => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue, header::AUTHORIZATION};

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn bearer_token_is_read_with_any_scheme_case() {
        assert_eq!(
            bearer_token(&headers(&["Bearer abc.def-_~+/=="])).unwrap(),
            Some("abc.def-_~+/==")
        );
        assert_eq!(
            bearer_token(&headers(&["bearer abc"])).unwrap(),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&["BEARER   abc"])).unwrap(),
            Some("abc")
        );
    }

    #[test]
    fn missing_header_is_none() {
        assert_eq!(bearer_token(&HeaderMap::new()).unwrap(), None);
    }

    #[test]
    fn malformed_headers_are_errors() {
        for bad in ["Bearer a b", "Bearer ===", "Bearer a%b"] {
            let err = bearer_token(&headers(&[bad])).unwrap_err();
            assert!(matches!(err, AuthError::MalformedHeader(_)), "{bad}: {err}");
        }
        // Another scheme, or no token: no authentication at all (RFC 6750
        // §3.1), though a lone Authorization value still refuses them.
        for none in [
            "Basic dXNlcjpwYXNz",
            "Bearer",
            "Bearer ",
            "Bearerabc",
            "Token abc",
        ] {
            assert_eq!(bearer_token(&headers(&[none])).unwrap(), None, "{none}");
            assert!(
                bearer_from_authorization(none.as_bytes()).is_err(),
                "{none}"
            );
        }
        let err = bearer_token(&headers(&["Bearer a", "Bearer b"])).unwrap_err();
        assert!(matches!(err, AuthError::MalformedHeader(_)), "{err}");
    }

    #[test]
    fn challenge_without_token_names_only_the_metadata() {
        let url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            www_authenticate(url, &[], None),
            format!("Bearer resource_metadata=\"{url}\"")
        );
    }

    #[test]
    fn missing_scopes_are_the_required_ones_not_granted() {
        let principal = Principal {
            issuer: "i".into(),
            subject: "s".into(),
            client_id: "c".into(),
            scopes: vec!["openid".into(), "mcp:tools".into()],
        };
        let required = ["mcp:tools".to_owned(), "mcp:resources".to_owned()];
        assert_eq!(principal.missing_scopes(&required), ["mcp:resources"]);
        assert!(principal.missing_scopes(&required[..1]).is_empty());
        assert!(principal.missing_scopes(&[]).is_empty());
        // Exact: a scope is not granted by a longer or shorter one.
        assert_eq!(principal.missing_scopes(&["mcp".to_owned()]), ["mcp"]);
        assert_eq!(
            insufficient_scope_challenge("https://m/.well-known/x", &required),
            "Bearer error=\"insufficient_scope\", scope=\"mcp:tools mcp:resources\", \
             resource_metadata=\"https://m/.well-known/x\", \
             error_description=\"The access token lacks a scope this server requires\""
        );
    }

    #[test]
    fn challenge_names_the_configured_scopes() {
        let url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
        let scopes = ["mcp:tools".to_owned(), "mcp:resources".to_owned()];
        assert_eq!(
            www_authenticate(url, &scopes, Some(&AuthError::Expired)),
            format!(
                "Bearer resource_metadata=\"{url}\", scope=\"mcp:tools mcp:resources\", \
                 error=\"invalid_token\", error_description=\"The access token expired\""
            )
        );
    }

    #[test]
    fn challenge_for_rejected_token_says_invalid_token_generically() {
        let url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
        let value = www_authenticate(
            url,
            &[],
            Some(&AuthError::UnknownKey {
                kid: Some("k9".into()),
            }),
        );
        assert_eq!(
            value,
            format!(
                "Bearer resource_metadata=\"{url}\", error=\"invalid_token\", \
                 error_description=\"The access token is invalid\""
            )
        );
        assert!(!value.contains("k9"));
        let expired = www_authenticate(url, &[], Some(&AuthError::Expired));
        assert!(
            expired.ends_with(
                "error=\"invalid_token\", error_description=\"The access token expired\""
            )
        );
        let header = www_authenticate(url, &[], Some(&AuthError::MalformedHeader("x")));
        assert!(header.contains("error=\"invalid_request\""), "{header}");
        let down = www_authenticate(url, &[], Some(&AuthError::KeysUnavailable("down".into())));
        assert!(!down.contains("error="), "{down}");
    }

    #[test]
    fn configured_issuer_drops_only_the_slash_url_added() {
        let bare = Url::parse("https://idp.example.com").unwrap();
        assert_eq!(configured_issuer(&bare), "https://idp.example.com");
        let path = Url::parse("https://idp.example.com/realms/x/").unwrap();
        assert_eq!(
            configured_issuer(&path),
            "https://idp.example.com/realms/x/"
        );
        let tenant = Url::parse("https://login.example.com/tenant/v2.0").unwrap();
        assert_eq!(
            configured_issuer(&tenant),
            "https://login.example.com/tenant/v2.0"
        );
    }
}
