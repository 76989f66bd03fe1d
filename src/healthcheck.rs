//! `mcp-connect health`: the container health check. The runtime image has
//! no curl or wget, so the binary asks its own `/readyz`.

use std::time::Duration;

/// Why a probe failed, for the one line the check prints.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("not a URL: {0}")]
    BadUrl(String),
    #[error("no answer: {0}")]
    Unreachable(String),
    #[error("answered HTTP {0}")]
    NotReady(u16),
}

/// GETs `url` (no redirects) and returns its status when it is 2xx.
pub async fn probe(url: &str, timeout: Duration) -> Result<u16, ProbeError> {
    let url = url::Url::parse(url).map_err(|e| ProbeError::BadUrl(e.to_string()))?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // The instance asks itself: an `HTTP_PROXY` set for the provider
        // calls must not carry the probe elsewhere.
        .no_proxy()
        .timeout(timeout)
        .build()
        .map_err(|e| ProbeError::Unreachable(e.to_string()))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| ProbeError::Unreachable(e.to_string()))?;
    let status = response.status();
    if status.is_success() {
        Ok(status.as_u16())
    } else {
        Err(ProbeError::NotReady(status.as_u16()))
    }
}
