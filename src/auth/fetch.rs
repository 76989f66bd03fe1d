//! Bounded outbound JSON. Issuer metadata, JWKS documents and introspection
//! answers come from the network; their size is capped before parsing so a
//! misbehaving or hostile endpoint cannot exhaust memory.

use std::time::Duration;

use reqwest::header::ACCEPT;
use serde::de::DeserializeOwned;
use url::Url;

/// Largest metadata, JWKS or introspection body accepted.
pub(crate) const MAX_BODY_BYTES: usize = 256 * 1024;
/// Whole-request bound: verifications wait on these fetches.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("unexpected HTTP status {0}")]
    Status(u16),
    #[error("response larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error("response is not the expected JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// GET `url` as JSON. The client given to the verifier does not follow
/// redirects, so a 3xx is an error here rather than a detour.
pub(crate) async fn get_json<T: DeserializeOwned>(
    http: &reqwest::Client,
    url: &Url,
) -> Result<T, FetchError> {
    let response = http
        .get(url.clone())
        .header(ACCEPT, "application/json")
        .timeout(TIMEOUT)
        .send()
        .await?;
    read_json(response).await
}

/// Reads a successful response's body as JSON, refusing oversized bodies.
pub(crate) async fn read_json<T: DeserializeOwned>(
    mut response: reqwest::Response,
) -> Result<T, FetchError> {
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Status(status.as_u16()));
    }
    if response
        .content_length()
        .is_some_and(|len| len > MAX_BODY_BYTES as u64)
    {
        return Err(FetchError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(FetchError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(serde_json::from_slice(&body)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_support::Idp;

    #[actix_web::test]
    async fn oversized_and_failing_responses_are_refused() {
        let idp = Idp::start().await;
        let http = crate::providers::outbound_http_client().unwrap();
        let big = idp.url("/big");
        let err = get_json::<serde_json::Value>(&http, &big)
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::TooLarge), "{err}");
        let missing = idp.url("/nothing-here");
        let err = get_json::<serde_json::Value>(&http, &missing)
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Status(404)), "{err}");
        let redirect = idp.url("/redirect");
        let err = get_json::<serde_json::Value>(&http, &redirect)
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Status(302)), "{err}");
    }
}
