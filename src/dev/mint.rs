//! Minting the dev identity provider's tokens: RFC 9068 access tokens whose
//! audience is this server's MCP resource (what `mcp-connect dev` prints and
//! the token endpoint returns), and OpenID Connect ID tokens for the web
//! login. Both are signed with the stored Ed25519 key.

use std::time::Duration;

use serde::Serialize;

use super::{DevError, DevServices, UserName, now_secs};

impl DevServices {
    /// An RFC 9068 access token for this server's MCP resource.
    pub fn mint_access_token(
        &self,
        subject: &str,
        client_id: &str,
        scopes: &[&str],
        ttl: Duration,
    ) -> Result<String, DevError> {
        self.access_token(subject, client_id, &scopes.join(" "), ttl)
    }

    pub(crate) fn access_token(
        &self,
        subject: &str,
        client_id: &str,
        scope: &str,
        ttl: Duration,
    ) -> Result<String, DevError> {
        let iat = now_secs();
        let claims = AccessClaims {
            iss: &self.issuer(),
            sub: subject,
            aud: &self.mcp_resource(),
            client_id,
            scope,
            iat,
            exp: iat.saturating_add(ttl.as_secs()),
            jti: uuid::Uuid::new_v4().to_string(),
        };
        self.inner.key.sign("at+jwt", &claims)
    }

    /// An OpenID Connect ID token for `client_id`.
    pub(crate) fn id_token(
        &self,
        user: &UserName,
        client_id: &str,
        nonce: Option<&str>,
        auth_time: u64,
        ttl: Duration,
    ) -> Result<String, DevError> {
        let iat = now_secs();
        let claims = IdClaims {
            iss: &self.issuer(),
            sub: user.as_str(),
            aud: client_id,
            iat,
            exp: iat.saturating_add(ttl.as_secs()),
            auth_time,
            nonce,
            name: user.as_str(),
            preferred_username: user.as_str(),
        };
        self.inner.key.sign("JWT", &claims)
    }
}

#[derive(Serialize)]
struct AccessClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    client_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    scope: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

#[derive(Serialize)]
struct IdClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    auth_time: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    nonce: Option<&'a str>,
    name: &'a str,
    preferred_username: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::JwkSet};

    #[test]
    fn minted_access_token_round_trips_through_the_published_jwks() {
        let dev = DevServices::ephemeral("http://127.0.0.1:8080/");
        assert_eq!(dev.issuer(), "http://127.0.0.1:8080/dev/idp");
        let token = dev
            .mint_access_token("alice", "cli", &["read", "write"], Duration::from_secs(600))
            .unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.typ.as_deref(), Some("at+jwt"));
        assert_eq!(header.alg, Algorithm::EdDSA);
        let jwks: JwkSet = serde_json::from_value(dev.jwks()).unwrap();
        let jwk = jwks.find(header.kid.as_deref().unwrap()).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&["http://127.0.0.1:8080/mcp"]);
        validation.set_issuer(&["http://127.0.0.1:8080/dev/idp"]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(
            &token,
            &DecodingKey::from_jwk(jwk).unwrap(),
            &validation,
        )
        .unwrap();
        let c = data.claims;
        assert_eq!(c["sub"], "alice");
        assert_eq!(c["client_id"], "cli");
        assert_eq!(c["scope"], "read write");
        assert_eq!(c["exp"].as_u64().unwrap() - c["iat"].as_u64().unwrap(), 600);
        assert!(c["jti"].as_str().is_some_and(|j| !j.is_empty()));
    }

    #[test]
    fn a_token_for_another_audience_is_rejected() {
        let dev = DevServices::ephemeral("http://127.0.0.1:8080");
        let token = dev
            .mint_access_token("alice", "cli", &[], Duration::from_secs(60))
            .unwrap();
        let jwks: JwkSet = serde_json::from_value(dev.jwks()).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&["http://127.0.0.1:9090/mcp"]);
        let key = DecodingKey::from_jwk(&jwks.keys[0]).unwrap();
        assert!(jsonwebtoken::decode::<serde_json::Value>(&token, &key, &validation).is_err());
    }
}
