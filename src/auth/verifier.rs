//! [`TokenVerifier`]: turns a bearer token into a [`Principal`] or says why
//! not. A JWT is checked locally against the issuer's JWKS; anything else
//! goes to RFC 7662 introspection when that is configured.

use std::sync::Arc;

use jsonwebtoken::Validation;

use super::{
    AuthError, Principal,
    claims::{self, Claims, Expected},
    introspection::Introspector,
    jwt,
    keys::KeySource,
    recent::{self, RecentTokens},
};
use crate::config::AuthSettings;

/// Verifies bearer tokens for one audience (this server's MCP resource).
/// Built without I/O; keys and metadata load on first use and are cached.
pub struct TokenVerifier {
    expected: Expected,
    keys: Arc<KeySource>,
    introspection: Option<Introspector>,
    recent: RecentTokens,
}

impl TokenVerifier {
    pub fn new(settings: &AuthSettings, audience: String, http: reqwest::Client) -> Self {
        Self {
            expected: Expected {
                issuer: settings.issuer.clone(),
                audience,
                subject_claim: settings.subject_claim.clone(),
                leeway_secs: settings.leeway_secs,
            },
            keys: Arc::new(KeySource::new(
                http.clone(),
                settings.issuer.clone(),
                settings.jwks_url.clone(),
            )),
            introspection: settings
                .introspection
                .as_ref()
                .map(|s| Introspector::new(s, http)),
            recent: RecentTokens::default(),
        }
    }

    /// The caller behind `token`, if the token is valid for this server.
    pub async fn verify(&self, token: &str) -> Result<Arc<Principal>, AuthError> {
        if token.len() > jwt::MAX_TOKEN_BYTES {
            return Err(AuthError::Malformed("token too long"));
        }
        if jwt::looks_like_jwt(token) {
            return self.verify_jwt(token).await;
        }
        match &self.introspection {
            Some(introspector) => introspector
                .introspect(token, &self.expected)
                .await
                .map(Arc::new),
            None => Err(AuthError::OpaqueNotSupported),
        }
    }

    async fn verify_jwt(&self, token: &str) -> Result<Arc<Principal>, AuthError> {
        let cache_key = recent::key(token);
        if let Some(principal) = self.recent.get(&cache_key) {
            return Ok(principal);
        }
        let header = jwt::header(token)?;
        let key = self.keys.key_for(header.kid.as_deref(), header.alg).await?;

        let mut validation = Validation::new(header.alg);
        validation.leeway = self.expected.leeway_secs;
        validation.validate_nbf = true;
        // Without `aud` in the required set, a token lacking `aud` would pass.
        validation.set_required_spec_claims(&["exp", "aud"]);
        // The audience is compared below, as introspection compares it
        // (the scheme and host in any case), not by the library's exact match.
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| {
            let reason = jwt::map_error(e);
            let kid = header.kid.as_deref().map(jwt::printable);
            tracing::debug!(?kid, %reason, "JWT rejected");
            reason
        })?;
        match data.claims.get("aud").filter(|v| !v.is_null()) {
            Some(aud) if claims::audience_contains(aud, &self.expected.audience)? => {}
            Some(_) => return Err(AuthError::WrongAudience),
            None => return Err(AuthError::MissingClaim("aud".into())),
        }
        let principal = Arc::new(claims::principal(&data.claims, &self.expected, false)?);
        if let Some(exp) = data.claims.get("exp").and_then(serde_json::Value::as_u64) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            self.recent.put(
                cache_key,
                Arc::clone(&principal),
                std::time::Duration::from_secs(exp.saturating_sub(now)),
            );
        }
        Ok(principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_support::{Idp, KeyKind, now};
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use serde_json::json;

    #[actix_web::test]
    async fn valid_tokens_of_each_algorithm_are_accepted() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        for kind in [KeyKind::Rsa, KeyKind::Ec, KeyKind::Ed] {
            let token = idp.token(kind, &idp.claims());
            let p = verifier
                .verify(&token)
                .await
                .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert_eq!(p.issuer, idp.issuer());
            assert_eq!(
                (p.subject.as_str(), p.client_id.as_str()),
                ("alice", "client-1")
            );
            assert_eq!(p.scopes, vec!["mcp:tools"]);
        }
        assert_eq!(idp.jwks_fetches(), 1, "keys are fetched once and cached");
    }

    #[actix_web::test]
    async fn claim_failures_have_precise_reasons() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let with = |patch: serde_json::Value| {
            let mut claims = idp.claims();
            for (k, v) in patch.as_object().unwrap() {
                if v.is_null() {
                    claims.remove(k)
                } else {
                    claims.insert(k.clone(), v.clone())
                };
            }
            idp.token(KeyKind::Ec, &claims)
        };
        let cases = [
            (
                json!({"aud": "https://elsewhere.example.com/mcp"}),
                "audience",
            ),
            (json!({"aud": null}), "aud"),
            (json!({"iss": "https://evil.example.com"}), "issuer"),
            (json!({"exp": now() - 120}), "expired"),
            (json!({"exp": null}), "exp"),
            (json!({"nbf": now() + 120}), "nbf"),
            (json!({"client_id": null}), "client_id"),
            (json!({"sub": null}), "sub"),
        ];
        for (patch, expected) in cases {
            let err = verifier.verify(&with(patch.clone())).await.unwrap_err();
            assert!(err.to_string().contains(expected), "{patch}: {err}");
        }
        assert!(matches!(
            verifier.verify(&with(json!({"exp": now() - 120}))).await,
            Err(AuthError::Expired)
        ));
        assert!(matches!(
            verifier.verify(&with(json!({"iss": "x"}))).await,
            Err(AuthError::WrongIssuer)
        ));
        // azp stands in for client_id; an array `aud` holding ours passes.
        let alt = with(json!({"client_id": null, "azp": "spa", "aud": ["other", idp.audience()]}));
        assert_eq!(verifier.verify(&alt).await.unwrap().client_id, "spa");
    }

    #[actix_web::test]
    async fn the_audience_may_spell_scheme_and_host_in_capitals_and_nothing_else() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let with_aud = |aud: serde_json::Value| {
            let mut claims = idp.claims();
            claims.insert("aud".into(), aud);
            idp.token(KeyKind::Rsa, &claims)
        };
        for aud in [
            json!("HTTPS://MCP.Example.COM/mcp"),
            json!(["other", "https://MCP.example.com/mcp"]),
        ] {
            let token = with_aud(aud.clone());
            assert!(verifier.verify(&token).await.is_ok(), "{aud}");
        }
        for aud in [
            json!("https://mcp.example.com/MCP"),
            json!(["https://mcp.example.com/mcp/"]),
        ] {
            let err = verifier.verify(&with_aud(aud.clone())).await.unwrap_err();
            assert!(matches!(err, AuthError::WrongAudience), "{aud}: {err}");
        }
        // Not a string: the library already reads it as no audience.
        let err = verifier.verify(&with_aud(json!(7))).await.unwrap_err();
        assert!(err.to_string().contains("aud"), "{err}");
    }

    #[actix_web::test]
    async fn issuer_with_or_without_trailing_slash_is_the_same_issuer() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let mut claims = idp.claims();
        claims.insert("iss".into(), json!(format!("{}/", idp.issuer())));
        let p = verifier
            .verify(&idp.token(KeyKind::Rsa, &claims))
            .await
            .unwrap();
        assert_eq!(p.issuer, idp.issuer(), "one spelling: the configured one");
        claims.insert("iss".into(), json!(format!("{}/other", idp.issuer())));
        let err = verifier
            .verify(&idp.token(KeyKind::Rsa, &claims))
            .await
            .unwrap_err();
        assert!(matches!(err, AuthError::WrongIssuer), "{err}");
    }

    #[actix_web::test]
    async fn custom_subject_claim_is_used() {
        let idp = Idp::start().await;
        let verifier = idp.verifier_with("subject_claim = \"oid\"");
        let mut claims = idp.claims();
        claims.insert("oid".into(), json!("object-id-1"));
        let p = verifier
            .verify(&idp.token(KeyKind::Ed, &claims))
            .await
            .unwrap();
        assert_eq!(p.subject, "object-id-1");
        claims.remove("oid");
        let err = verifier
            .verify(&idp.token(KeyKind::Ed, &claims))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, AuthError::MissingClaim(c) if c == "oid"),
            "{err}"
        );
    }

    #[actix_web::test]
    async fn forged_signatures_and_algorithms_are_rejected() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let claims = idp.claims();
        // Another key, same kid as the published RSA key.
        let forged = idp.token_with(KeyKind::Rsa, true, Some(KeyKind::Rsa.kid()), None, &claims);
        assert!(matches!(
            verifier.verify(&forged).await,
            Err(AuthError::BadSignature)
        ));
        // alg none: header and claims, empty signature.
        let b64 = |v: &serde_json::Value| {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let none = format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "kid": KeyKind::Rsa.kid()})),
            b64(&json!(claims))
        );
        assert!(
            matches!(verifier.verify(&none).await, Err(AuthError::UnsupportedAlgorithm(a)) if a == "none")
        );
        // HS256 keyed with something public must never verify.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(KeyKind::Rsa.kid().into());
        let hs = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(b"public").unwrap(),
        )
        .unwrap();
        assert!(
            matches!(verifier.verify(&hs).await, Err(AuthError::UnsupportedAlgorithm(a)) if a == "HS256")
        );
        // ES256 header naming the RSA key.
        let mismatched =
            idp.token_with(KeyKind::Ec, false, Some(KeyKind::Rsa.kid()), None, &claims);
        assert!(matches!(
            verifier.verify(&mismatched).await,
            Err(AuthError::KeyMismatch)
        ));
        // An id_token-typed JWT is not an access token.
        let typed = idp.token_with(
            KeyKind::Ec,
            false,
            Some(KeyKind::Ec.kid()),
            Some("id_token+jwt"),
            &claims,
        );
        assert!(matches!(
            verifier.verify(&typed).await,
            Err(AuthError::WrongType(_))
        ));
    }

    #[actix_web::test]
    async fn unknown_kid_refetches_at_most_once_per_interval() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let claims = idp.claims();
        verifier
            .verify(&idp.token(KeyKind::Rsa, &claims))
            .await
            .unwrap();
        assert_eq!(idp.jwks_fetches(), 1);
        for kid in ["rotated-1", "rotated-2"] {
            let token = idp.token_with(KeyKind::Rsa, false, Some(kid), None, &claims);
            let err = verifier.verify(&token).await.unwrap_err();
            assert!(
                matches!(&err, AuthError::UnknownKey { kid: Some(k) } if k == kid),
                "{err}"
            );
        }
        assert_eq!(
            idp.jwks_fetches(),
            2,
            "two unknown kids in a row cause one refetch"
        );
    }

    #[actix_web::test]
    async fn a_rotated_key_is_picked_up_by_the_refetch() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        verifier
            .verify(&idp.token(KeyKind::Ec, &idp.claims()))
            .await
            .unwrap();
        // A long kid (a hex SHA-256 and more) is matched whole.
        let kid = format!("next-{}", "f".repeat(80));
        idp.publish(KeyKind::Ed, true, &kid);
        let token = idp.token_with(KeyKind::Ed, true, Some(&kid), Some("JWT"), &idp.claims());
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice");
        assert_eq!(idp.jwks_fetches(), 2);
    }

    #[actix_web::test]
    async fn configured_jwks_url_skips_discovery() {
        let idp = Idp::start().await;
        let verifier = idp.verifier_with(&format!("jwks_url = \"{}\"", idp.url("/jwks")));
        let token = idp.token(KeyKind::Rsa, &idp.claims());
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice");
        assert_eq!((idp.metadata_fetches(), idp.jwks_fetches()), (0, 1));
        idp.verifier().verify(&token).await.unwrap();
        assert_eq!(
            idp.metadata_fetches(),
            1,
            "without it, metadata is discovered"
        );
    }

    #[actix_web::test]
    async fn concurrent_first_use_fetches_once() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let token = idp.token(KeyKind::Ec, &idp.claims());
        let results = futures::future::join_all((0..16).map(|_| verifier.verify(&token))).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(idp.jwks_fetches(), 1);
    }

    #[actix_web::test]
    async fn kidless_token_uses_the_single_key_of_its_algorithm() {
        let idp = Idp::start().await;
        let verifier = idp.verifier();
        let token = idp.token_with(KeyKind::Ed, false, None, None, &idp.claims());
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice");
        idp.publish(KeyKind::Ed, true, "second-ed");
        let verifier = idp.verifier();
        let err = verifier.verify(&token).await.unwrap_err();
        assert!(matches!(err, AuthError::UnknownKey { kid: None }), "{err}");
    }

    #[actix_web::test]
    async fn opaque_tokens_go_to_introspection_only_when_configured() {
        let idp = Idp::start().await;
        let err = idp.verifier().verify("opaque-token").await.unwrap_err();
        assert!(matches!(err, AuthError::OpaqueNotSupported), "{err}");
        idp.set_introspection(
            "opaque-token",
            json!({"active": true, "sub": "bob", "client_id": "c", "aud": idp.audience()}),
        );
        let verifier = idp.verifier_with(&idp.introspection_toml());
        assert_eq!(
            verifier.verify("opaque-token").await.unwrap().subject,
            "bob"
        );
        assert_eq!(idp.jwks_fetches(), 0, "no key fetch for an opaque token");
    }
}
