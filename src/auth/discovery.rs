//! Finding the issuer's JWKS: OpenID Connect Discovery first, then RFC 8414
//! authorization server metadata. The metadata must name the configured
//! issuer, or a metadata document from elsewhere could substitute its keys.

use serde::Deserialize;
use url::Url;

use super::{AuthError, claims::issuer_matches, fetch};

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: Option<Url>,
}

/// Where the issuer's metadata may be, in the order tried. OIDC appends its
/// well-known segment to the issuer; RFC 8414 §3.1 inserts its segment
/// between the host and the issuer's path.
pub(crate) fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: String| {
        let mut url = issuer.clone();
        url.set_path(&p);
        url.set_query(None);
        url.set_fragment(None);
        url
    };
    vec![
        at(format!("{path}/.well-known/openid-configuration")),
        at(format!("/.well-known/oauth-authorization-server{path}")),
    ]
}

/// The issuer's `jwks_uri`, from the first metadata document that answers.
pub(crate) async fn jwks_uri(http: &reqwest::Client, issuer: &Url) -> Result<Url, AuthError> {
    let mut failures = Vec::new();
    for url in metadata_urls(issuer) {
        match fetch::get_json::<Metadata>(http, &url).await {
            Ok(metadata) if !issuer_matches(issuer, &metadata.issuer) => {
                tracing::warn!(%url, configured = %issuer, "issuer metadata names another issuer");
                failures.push(format!("{url}: names issuer {:?}", metadata.issuer));
            }
            // The keys decide every identity: fetched over plain http off
            // loopback, anyone on the path could swap them (the same rule
            // as for a configured `auth.jwks_url`).
            Ok(Metadata {
                jwks_uri: Some(jwks_uri),
                ..
            }) if !crate::config::is_secure_or_loopback(&jwks_uri) => {
                failures.push(format!("{url}: jwks_uri is not https"));
            }
            Ok(Metadata {
                jwks_uri: Some(jwks_uri),
                ..
            }) => return Ok(jwks_uri),
            Ok(Metadata { jwks_uri: None, .. }) => failures.push(format!("{url}: no jwks_uri")),
            Err(e) => failures.push(format!("{url}: {e}")),
        }
    }
    Err(AuthError::KeysUnavailable(format!(
        "issuer metadata not found ({})",
        failures.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_support::Idp;

    #[test]
    fn well_known_urls_for_bare_and_path_issuers() {
        let bare = Url::parse("https://idp.example.com").unwrap();
        let urls: Vec<String> = metadata_urls(&bare).iter().map(Url::to_string).collect();
        assert_eq!(
            urls,
            [
                "https://idp.example.com/.well-known/openid-configuration",
                "https://idp.example.com/.well-known/oauth-authorization-server",
            ]
        );
        let tenant = Url::parse("https://idp.example.com/tenant1/").unwrap();
        let urls: Vec<String> = metadata_urls(&tenant).iter().map(Url::to_string).collect();
        assert_eq!(
            urls,
            [
                "https://idp.example.com/tenant1/.well-known/openid-configuration",
                "https://idp.example.com/.well-known/oauth-authorization-server/tenant1",
            ]
        );
    }

    #[actix_web::test]
    async fn falls_back_to_rfc8414_for_a_path_issuer() {
        let idp = Idp::start().await;
        let http = crate::providers::outbound_http_client().unwrap();
        // The fake serves OIDC discovery only at the root; `/oauth-only` has
        // nothing but RFC 8414 metadata.
        let issuer = idp.url("/oauth-only");
        let uri = jwks_uri(&http, &issuer).await.unwrap();
        assert_eq!(uri, idp.url("/jwks"));
    }

    #[actix_web::test]
    async fn a_plain_http_jwks_uri_off_loopback_is_refused() {
        let idp = Idp::start().await;
        let http = crate::providers::outbound_http_client().unwrap();
        let err = jwks_uri(&http, &idp.url("/plain-keys")).await.unwrap_err();
        assert!(err.to_string().contains("jwks_uri is not https"), "{err}");
    }

    #[actix_web::test]
    async fn metadata_for_another_issuer_is_refused() {
        let idp = Idp::start().await;
        let http = crate::providers::outbound_http_client().unwrap();
        let issuer = idp.url("/impostor");
        let err = jwks_uri(&http, &issuer).await.unwrap_err();
        assert!(matches!(err, AuthError::KeysUnavailable(_)), "{err}");
    }
}
