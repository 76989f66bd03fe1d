//! The `Host` check against DNS rebinding (the transport's MUST), made
//! before anything else reads the request: a request for another host is
//! refused as such (403), whatever else is wrong with it, rather than
//! answered with the first other problem found. The rule is rmcp's own
//! (which checks again behind it): the host compared without case or
//! brackets, the port only where the allowed entry names one.

// The check returns the finished refusal as its error, as the bridge's
// helpers do; boxing it would buy nothing on this path.
#![allow(clippy::result_large_err)]

use actix_web::{HttpResponse, http::StatusCode};

/// The hosts `/mcp` answers, parsed once.
pub struct AllowedHosts(Vec<Authority>);

#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(match http::uri::Authority::try_from(text) {
            Ok(a) => Self {
                host: normalized(a.host()),
                port: a.port_u16(),
            },
            Err(_) => Self {
                host: normalized(text),
                port: None,
            },
        })
    }
}

fn normalized(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

impl AllowedHosts {
    /// From the settings' list (`allowed_hosts`, or the public URL's host);
    /// an empty list allows every host.
    pub fn new(hosts: &[String]) -> Self {
        Self(hosts.iter().filter_map(|h| Authority::parse(h)).collect())
    }

    /// Refuses a request whose `Host` (or HTTP/2 `:authority`) is not
    /// allowed: 403, or 400 when there is none or it does not parse.
    pub fn check(&self, head: &http::request::Parts) -> Result<(), HttpResponse> {
        if self.0.is_empty() {
            return Ok(());
        }
        let given = match head.headers.get(http::header::HOST) {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|v| http::uri::Authority::try_from(v).ok()),
            None => head.uri.authority().cloned(),
        };
        let Some(given) = given else {
            tracing::info!("mcp: request without a usable Host");
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "Bad Request: invalid or missing Host header",
            ));
        };
        let host = normalized(given.host());
        let port = given.port_u16();
        let allowed = self
            .0
            .iter()
            .any(|a| a.host == host && a.port.is_none_or(|p| port == Some(p)));
        if allowed {
            return Ok(());
        }
        let shown = crate::crypto::printable_prefix(given.as_str());
        tracing::warn!(host = %shown, "mcp: rejected a request for a host this server does not serve (possible DNS rebinding)");
        Err(refusal(
            StatusCode::FORBIDDEN,
            "Forbidden: Host not allowed",
        ))
    }
}

fn refusal(status: StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({
        "jsonrpc": "2.0",
        "error": { "code": -32600, "message": message },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(host: Option<&str>) -> http::request::Parts {
        let mut request = http::Request::builder().uri("/mcp");
        if let Some(host) = host {
            request = request.header(http::header::HOST, host);
        }
        request
            .body(())
            .unwrap_or_else(|e| panic!("{e}"))
            .into_parts()
            .0
    }

    fn status(allowed: &AllowedHosts, host: Option<&str>) -> u16 {
        match allowed.check(&head(host)) {
            Ok(()) => 200,
            Err(refused) => refused.status().as_u16(),
        }
    }

    #[test]
    fn hosts_compare_as_rmcp_compares_them() {
        let allowed = AllowedHosts::new(&[
            "connect.example.com".into(),
            "internal:8443".into(),
            "[::1]".into(),
        ]);
        for ok in [
            "connect.example.com",
            "Connect.Example.COM:443",
            "internal:8443",
            "[::1]:80",
        ] {
            assert_eq!(status(&allowed, Some(ok)), 200, "{ok}");
        }
        for refused in [
            "evil.example",
            "internal",
            "internal:8080",
            "connect.example.com.evil",
        ] {
            assert_eq!(status(&allowed, Some(refused)), 403, "{refused}");
        }
        assert_eq!(status(&allowed, None), 400);
        assert_eq!(status(&allowed, Some("bad host")), 400);
        assert_eq!(status(&AllowedHosts::new(&[]), Some("anything")), 200);
    }
}
