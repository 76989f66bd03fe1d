//! Small HTTP helpers shared by the OAuth, identity and API calls: sending
//! a call counted for `/metrics`, bounded body reads and RFC 6749 Basic
//! client authentication.

use base64::{Engine, engine::general_purpose::STANDARD};
use reqwest::header::CONTENT_TYPE;

use super::{Provider, ProviderError};
use crate::metrics::{Call, CallTimer};

impl Provider {
    /// Sends one call to this provider. The returned timer counts it (by
    /// the answer's status) when dropped or finished; the caller keeps it
    /// while reading the body. A send that fails is counted as `transport`.
    pub(super) async fn send(
        &self,
        call: Call,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::Response, CallTimer<'_>), ProviderError> {
        let mut timer = self.calls.start(call);
        let response = request.send().await.map_err(ProviderError::http)?;
        timer.answered(response.status().as_u16());
        Ok((response, timer))
    }
}

/// A body read up to a limit.
pub(super) struct Body {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

/// Reads at most `limit` bytes, streaming, and reports whether more came.
/// A hostile provider cannot make us buffer more than `limit` (+ one chunk).
/// A transfer that breaks off makes the call's `timer` count no answer.
pub(super) async fn read_bounded(
    response: &mut reqwest::Response,
    limit: usize,
    timer: &mut CallTimer<'_>,
) -> Result<Body, ProviderError> {
    // Sized once for an answer that says its length (most do).
    let announced = response.content_length().unwrap_or(0);
    let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(limit).min(limit));
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                timer.unread();
                return Err(ProviderError::http(e));
            }
        };
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
    timer: &mut CallTimer<'_>,
) -> Result<Vec<u8>, ProviderError> {
    let body = read_bounded(response, limit, timer).await?;
    if body.truncated {
        return Err(ProviderError::BadResponse(format!(
            "answer larger than {limit} bytes"
        )));
    }
    Ok(body.bytes)
}

/// The media type without parameters, lowercase.
pub(super) fn media_type(response: &reqwest::Response) -> Option<String> {
    media_type_as_sent(response).map(|v| v.to_ascii_lowercase())
}

/// The media type without parameters, in the provider's case (to be
/// cleaned of secrets before it is lowercased).
pub(super) fn media_type_as_sent(response: &reqwest::Response) -> Option<&str> {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim())
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
    use provider_fakes::scripted::DEMO_TOKEN;

    use super::*;
    use crate::providers::{
        ApiRequest, TokenHint,
        test_catalog::{Fakes, catalog_for, http},
    };

    #[actix_web::test]
    async fn every_call_sent_is_counted_by_its_http_outcome() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let (demo, rfc, google) = (
            catalog.get("demo").unwrap(),
            catalog.get("rfc").unwrap(),
            catalog.get("google").unwrap(),
        );
        let me = ApiRequest {
            method: "GET".into(),
            path: "me".into(),
            ..Default::default()
        };
        demo.api_request(&http(), DEMO_TOKEN, None, &me)
            .await
            .unwrap();
        demo.account(&http(), DEMO_TOKEN).await.unwrap();
        let stale = rfc.api_request(&http(), "stale", None, &me).await.unwrap();
        assert_eq!(stale.status, 401);
        // Revoked as far as the caller is concerned, but not a 2xx answer.
        google
            .revoke(&http(), "gone", TokenHint::AccessToken, &Default::default())
            .await
            .unwrap();
        // Refused before anything is sent: not a call.
        let outside = ApiRequest {
            path: "../outside".into(),
            ..me.clone()
        };
        assert!(
            demo.api_request(&http(), DEMO_TOKEN, None, &outside)
                .await
                .is_err()
        );
        assert_eq!(demo.calls.count(Call::Api, "ok"), 1);
        assert_eq!(demo.calls.count(Call::Identity, "ok"), 1);
        assert_eq!(rfc.calls.count(Call::Api, "http_error"), 1);
        assert_eq!(google.calls.count(Call::Revoke, "http_error"), 1);
        assert_eq!(rfc.calls.count(Call::Api, "ok"), 0);

        // Nothing listens on port 9 of loopback (a released ephemeral port
        // could be taken again meanwhile).
        let nowhere = "http://127.0.0.1:9".to_owned();
        let gone = catalog_for(&nowhere);
        let demo = gone.get("demo").unwrap();
        assert!(demo.account(&http(), DEMO_TOKEN).await.is_err());
        assert!(
            demo.refresh(&http(), "r", &Default::default())
                .await
                .is_err()
        );
        assert!(demo.exchange_code(&http(), "c", "v").await.is_err());
        assert_eq!(demo.calls.count(Call::Identity, "transport"), 1);
        assert_eq!(demo.calls.count(Call::Refresh, "transport"), 1);
        assert_eq!(demo.calls.count(Call::Token, "transport"), 1);
        assert_eq!(gone.get("rfc").unwrap().calls.count(Call::Api, "ok"), 0);
    }

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
