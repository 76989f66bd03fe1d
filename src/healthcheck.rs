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
    /// The status, and the reason `/readyz` gave (its `status` field).
    #[error("answered HTTP {0}{reason}", reason = .1.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    NotReady(u16, Option<String>),
}

/// The longest reason printed.
const MAX_REASON: usize = 80;

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
        .map_err(|e| ProbeError::Unreachable(with_causes(&e)))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| ProbeError::Unreachable(with_causes(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(status.as_u16());
    }
    let body = response.bytes().await.unwrap_or_default();
    Err(ProbeError::NotReady(status.as_u16(), reason(&body)))
}

/// `e` and its causes, one after the other: the HTTP client's own message
/// ("error sending request for url (…)") says nothing of why, its causes
/// do ("Connection refused").
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut told = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !told.contains(&said) {
            told.push_str(": ");
            told.push_str(&said);
        }
        cause = c.source();
    }
    told
}

/// `/readyz`'s reason (`{"status": "database unreachable"}`), printable and
/// short, for whoever reads the container's health log; `None` for any
/// other answer.
fn reason(body: &[u8]) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    let reason: String = answer
        .get("status")?
        .as_str()?
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(MAX_REASON)
        .collect();
    (!reason.is_empty()).then_some(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_readyz_status_cleaned_and_cut() {
        assert_eq!(
            reason(br#"{"status":"database unreachable"}"#).as_deref(),
            Some("database unreachable")
        );
        assert_eq!(reason(b"<html>502</html>"), None);
        assert_eq!(reason(br#"{"status":5}"#), None);
        let long = format!(r#"{{"status":"a\u001b[31m{}"}}"#, "x".repeat(200));
        let cut = reason(long.as_bytes()).unwrap();
        assert_eq!(cut.len(), MAX_REASON);
        assert!(cut.starts_with("a[31mx"), "{cut}");
    }
}
