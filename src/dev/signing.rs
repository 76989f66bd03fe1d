//! The dev identity provider's Ed25519 signing key: generated once with
//! aws-lc-rs, stored as base64 PKCS#8 in `dev_secrets`, published as an OKP
//! JWK. Its `kid` is the RFC 7638 thumbprint, so it is stable across restarts
//! without being stored separately.

use aws_lc_rs::{
    rand::SystemRandom,
    signature::{Ed25519KeyPair, KeyPair},
};
use base64::{
    Engine,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::DevError;

pub(crate) struct SigningKey {
    encoding: EncodingKey,
    kid: String,
    /// The public key, base64url (the JWK `x`).
    x: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh key as base64 PKCS#8, the form kept in `dev_secrets`.
    pub(crate) fn generate_pkcs8_b64() -> Result<String, DevError> {
        let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| DevError::KeyGeneration)?;
        Ok(STANDARD.encode(doc.as_ref()))
    }

    pub(crate) fn from_pkcs8_b64(b64: &str) -> Result<Self, DevError> {
        let der = STANDARD
            .decode(b64.trim())
            .map_err(|_| DevError::BadStoredKey("not base64".into()))?;
        let pair =
            Ed25519KeyPair::from_pkcs8(&der).map_err(|e| DevError::BadStoredKey(e.to_string()))?;
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        Ok(Self {
            encoding: EncodingKey::from_ed_der(&der),
            kid: thumbprint(&x),
            x,
        })
    }

    pub(crate) fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK, for `/dev/idp/jwks`.
    pub(crate) fn public_jwk(&self) -> serde_json::Value {
        serde_json::json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": self.x,
            "kid": self.kid,
            "alg": "EdDSA",
            "use": "sig",
        })
    }

    /// A compact JWS over `claims` with header `typ` (`at+jwt` for RFC 9068
    /// access tokens, `JWT` for ID tokens).
    pub(crate) fn sign<T: Serialize>(&self, typ: &str, claims: &T) -> Result<String, DevError> {
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some(typ.to_owned());
        header.kid = Some(self.kid.clone());
        Ok(jsonwebtoken::encode(&header, claims, &self.encoding)?)
    }
}

/// RFC 7638: SHA-256 over the required members in lexicographic order.
fn thumbprint(x: &str) -> String {
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation, jwk::Jwk};

    #[test]
    fn signed_claims_verify_with_the_published_jwk() {
        let key = SigningKey::from_pkcs8_b64(&SigningKey::generate_pkcs8_b64().unwrap()).unwrap();
        let token = key
            .sign(
                "JWT",
                &serde_json::json!({"sub": "alice", "exp": 4_000_000_000u64}),
            )
            .unwrap();
        let jwk: Jwk = serde_json::from_value(key.public_jwk()).unwrap();
        let decoding = DecodingKey::from_jwk(&jwk).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.validate_aud = false;
        let data =
            jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &validation).unwrap();
        assert_eq!(data.claims["sub"], "alice");
        assert_eq!(data.header.kid.as_deref(), Some(key.kid()));
    }

    #[test]
    fn another_key_does_not_verify() {
        let a = SigningKey::from_pkcs8_b64(&SigningKey::generate_pkcs8_b64().unwrap()).unwrap();
        let b = SigningKey::from_pkcs8_b64(&SigningKey::generate_pkcs8_b64().unwrap()).unwrap();
        assert_ne!(a.kid(), b.kid());
        let token = a
            .sign(
                "JWT",
                &serde_json::json!({"sub": "alice", "exp": 4_000_000_000u64}),
            )
            .unwrap();
        let jwk: Jwk = serde_json::from_value(b.public_jwk()).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.validate_aud = false;
        assert!(
            jsonwebtoken::decode::<serde_json::Value>(
                &token,
                &DecodingKey::from_jwk(&jwk).unwrap(),
                &validation
            )
            .is_err()
        );
    }

    #[test]
    fn stored_key_reloads_with_the_same_kid_and_garbage_is_refused() {
        let stored = SigningKey::generate_pkcs8_b64().unwrap();
        let first = SigningKey::from_pkcs8_b64(&stored).unwrap();
        let again = SigningKey::from_pkcs8_b64(&stored).unwrap();
        assert_eq!(first.kid(), again.kid());
        assert!(matches!(
            SigningKey::from_pkcs8_b64("AAAA"),
            Err(DevError::BadStoredKey(_))
        ));
        assert!(matches!(
            SigningKey::from_pkcs8_b64("%%%"),
            Err(DevError::BadStoredKey(_))
        ));
    }
}
