//! Small HTTP helpers shared by the OAuth, identity and API calls: bounded
//! body reads and RFC 6749 Basic client authentication.

use base64::{Engine, engine::general_purpose::STANDARD};
use reqwest::header::CONTENT_TYPE;

use super::ProviderError;

/// A body read up to a limit.
pub(super) struct Body {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

/// Reads at most `limit` bytes, streaming, and reports whether more came.
/// A hostile provider cannot make us buffer more than `limit` (+ one chunk).
pub(super) async fn read_bounded(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Body, ProviderError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ProviderError::http)? {
        let room = limit - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(Body {
                bytes,
                truncated: true,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Body {
        bytes,
        truncated: false,
    })
}

/// Reads a whole protocol answer (token, userinfo), refusing one that is
/// larger than `limit` rather than parsing half of it.
pub(super) async fn read_all(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ProviderError> {
    let body = read_bounded(response, limit).await?;
    if body.truncated {
        return Err(ProviderError::BadResponse(format!(
            "answer larger than {limit} bytes"
        )));
    }
    Ok(body.bytes)
}

/// The media type without parameters, lowercase.
pub(super) fn media_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
}

pub(super) fn is_json(media_type: Option<&str>) -> bool {
    media_type.is_some_and(|m| m == "application/json" || m.ends_with("+json"))
}

/// RFC 6749 §2.3.1: id and secret are form-urlencoded before they are
/// joined and base64-encoded (reqwest's `basic_auth` skips that step, which
/// breaks secrets containing `:` or `%`).
pub(super) fn basic_auth(client_id: &str, client_secret: &str) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "Basic {}",
        STANDARD.encode(format!("{}:{}", enc(client_id), enc(client_secret)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_form_encodes_before_base64() {
        // "a b" → "a+b", "p:w%" → "p%3Aw%25"
        let header = basic_auth("a b", "p:w%");
        let decoded = STANDARD
            .decode(header.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), "a+b:p%3Aw%25");
    }

    #[test]
    fn json_media_types() {
        assert!(is_json(Some("application/json")));
        assert!(is_json(Some("application/vnd.github+json")));
        assert!(!is_json(Some("text/html")));
        assert!(!is_json(None));
    }
}
