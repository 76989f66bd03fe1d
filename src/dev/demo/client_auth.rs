//! Client authentication at the token and revocation endpoints:
//! `client_secret_basic` only (RFC 6749 §2.3.1), the secret compared in
//! constant time. RFC 6749 errors as JSON, shared by both endpoints.

use std::{borrow::Cow, collections::HashMap};

use actix_web::{HttpRequest, HttpResponse, http::StatusCode};
use base64::{Engine, engine::general_purpose::STANDARD};
use percent_encoding::percent_decode_str;
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;

use super::{CLIENT_ID, DemoProvider};

/// An RFC 6749 §5.2 error answer.
pub(super) struct OAuthError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: Cow<'static, str>,
}

pub(super) fn bad_request(
    error: &'static str,
    description: impl Into<Cow<'static, str>>,
) -> OAuthError {
    OAuthError {
        status: StatusCode::BAD_REQUEST,
        error,
        description: description.into(),
    }
}

fn invalid_client(description: &'static str) -> OAuthError {
    OAuthError {
        status: StatusCode::UNAUTHORIZED,
        error: "invalid_client",
        description: description.into(),
    }
}

impl OAuthError {
    pub(super) fn response(&self) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 6749 §5.2: a 401 names the scheme the client should use.
            builder.insert_header(("WWW-Authenticate", r#"Basic realm="mcp-connect demo""#));
        }
        builder
            .insert_header(("Cache-Control", "no-store"))
            .insert_header(("Pragma", "no-cache"))
            .json(serde_json::json!({
                "error": self.error,
                "error_description": self.description,
            }))
    }
}

/// Accepts the request only from the registered client with its secret in
/// an `Authorization: Basic` header.
pub(super) fn authenticate(
    req: &HttpRequest,
    params: &HashMap<String, String>,
    demo: &DemoProvider,
) -> Result<(), OAuthError> {
    let header = req
        .headers()
        .get("Authorization")
        .and_then(|h| h.to_str().ok());
    let credentials = match header.and_then(|v| v.split_once(' ')) {
        Some((scheme, credentials)) if scheme.eq_ignore_ascii_case("basic") => credentials,
        _ if params.contains_key("client_secret") => {
            return Err(invalid_client(
                "this client must authenticate with HTTP Basic (client_secret_basic)",
            ));
        }
        _ => return Err(invalid_client("client authentication is required")),
    };
    // RFC 6749 §2.3: one authentication method per request.
    if params.contains_key("client_secret") {
        return Err(bad_request(
            "invalid_request",
            "the client authenticated with more than one method",
        ));
    }
    let (id, secret) =
        decode_basic(credentials).ok_or_else(|| invalid_client("malformed Basic credentials"))?;
    if params
        .get("client_id")
        .is_some_and(|form_id| *form_id != id)
    {
        return Err(bad_request(
            "invalid_request",
            "client_id differs from the Basic credentials",
        ));
    }
    let secret_ok: bool = secret
        .as_bytes()
        .ct_eq(demo.client_secret().expose_secret().as_bytes())
        .into();
    if id == CLIENT_ID && secret_ok {
        Ok(())
    } else {
        Err(invalid_client("unknown client or wrong secret"))
    }
}

/// `base64(form-encoded id ":" form-encoded secret)` → (id, secret).
fn decode_basic(credentials: &str) -> Option<(String, String)> {
    let decoded = STANDARD.decode(credentials.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let form_decode = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    Some((form_decode(id)?, form_decode(secret)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_form_decoded() {
        // "a b" / "p:w%" as RFC 6749 §2.3.1 sends them.
        let header = STANDARD.encode("a+b:p%3Aw%25");
        assert_eq!(
            decode_basic(&header),
            Some(("a b".to_owned(), "p:w%".to_owned()))
        );
        assert_eq!(decode_basic("not base64!"), None);
        assert_eq!(decode_basic(&STANDARD.encode("no-colon")), None);
    }
}
