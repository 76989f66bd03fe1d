//! The JWT-specific rules: which header algorithms and types are accepted,
//! which JWKS keys fit which algorithm, and how `jsonwebtoken`'s errors map
//! onto [`AuthError`]. Only asymmetric algorithms are accepted: `none` and
//! HMAC would let anyone holding (or guessing) a shared value mint tokens.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{
    Algorithm, DecodingKey,
    errors::{Error as JwtError, ErrorKind},
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse},
};
use serde::Deserialize;

use super::AuthError;

/// Tokens longer than this are refused before any parsing or key lookup.
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// What the verifier needs from a JWT header, already vetted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct JwtHeader {
    pub alg: Algorithm,
    pub kid: Option<String>,
}

#[derive(Deserialize)]
struct RawHeader {
    alg: Option<String>,
    kid: Option<String>,
    typ: Option<String>,
    crit: Option<serde_json::Value>,
}

/// A compact JWS has three dot-separated parts; anything else is opaque.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// Parses and vets the protected header before any key is looked up.
pub(crate) fn header(token: &str) -> Result<JwtHeader, AuthError> {
    let encoded = token.split('.').next().unwrap_or_default();
    let bytes = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_| AuthError::Malformed("header is not base64url"))?;
    let raw: RawHeader =
        serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed("header is not JSON"))?;
    let alg = match raw.alg.as_deref() {
        Some("RS256") => Algorithm::RS256,
        Some("ES256") => Algorithm::ES256,
        Some("EdDSA") => Algorithm::EdDSA,
        Some(other) => return Err(AuthError::UnsupportedAlgorithm(printable(other))),
        None => return Err(AuthError::Malformed("header has no alg")),
    };
    // RFC 9068 §2.1 says `at+jwt`; many issuers send `JWT` or nothing.
    // Media types compare case-insensitively, with an optional prefix.
    if let Some(typ) = raw.typ.as_deref() {
        let t = typ.to_ascii_lowercase();
        let t = t.strip_prefix("application/").unwrap_or(&t);
        if t != "at+jwt" && t != "jwt" {
            return Err(AuthError::WrongType(printable(typ)));
        }
    }
    // RFC 7515 §4.1.11: extensions we do not understand must not be ignored.
    if raw.crit.is_some() {
        return Err(AuthError::Malformed(
            "critical header parameters are not supported",
        ));
    }
    Ok(JwtHeader { alg, kid: raw.kid })
}

/// Header values end up in error messages and logs: keep them short and
/// free of control characters.
pub(crate) fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(64)
        .collect()
}

/// The one accepted algorithm a JWK can verify, from its type and curve;
/// an `alg` on the key must agree, and a `use` other than `sig` rules it out.
pub(crate) fn key_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    match jwk.common.key_algorithm {
        None => Some(by_type),
        Some(declared) if declared == KeyAlgorithm::from(by_type) => Some(by_type),
        Some(_) => None,
    }
}

/// A usable verification key for `jwk`, if it is one we accept.
pub(crate) fn decoding_key(jwk: &Jwk) -> Option<(Algorithm, DecodingKey)> {
    let alg = key_algorithm(jwk)?;
    DecodingKey::from_jwk(jwk).ok().map(|key| (alg, key))
}

pub(crate) fn map_error(e: JwtError) -> AuthError {
    match e.into_kind() {
        ErrorKind::InvalidSignature => AuthError::BadSignature,
        ErrorKind::ExpiredSignature => AuthError::Expired,
        ErrorKind::ImmatureSignature => AuthError::NotYetValid,
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
        ErrorKind::MissingRequiredClaim(c) => AuthError::MissingClaim(c),
        ErrorKind::InvalidClaimFormat(c) => AuthError::InvalidClaim(c),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => AuthError::KeyMismatch,
        ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidEddsaKey | ErrorKind::InvalidRsaKey(_) => {
            AuthError::KeyMismatch
        }
        _ => AuthError::Malformed("undecodable token"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_with_header(header: &str) -> String {
        format!("{}.e30.sig", URL_SAFE_NO_PAD.encode(header))
    }

    #[test]
    fn accepted_algorithms_and_types() {
        let h = header(&token_with_header(
            r#"{"alg":"ES256","kid":"k1","typ":"at+jwt"}"#,
        ))
        .unwrap();
        assert_eq!(
            h,
            JwtHeader {
                alg: Algorithm::ES256,
                kid: Some("k1".into())
            }
        );
        for typ in [r#","typ":"JWT""#, r#","typ":"application/AT+JWT""#, ""] {
            let t = token_with_header(&format!(r#"{{"alg":"RS256"{typ}}}"#));
            assert!(header(&t).is_ok(), "{typ}");
        }
    }

    #[test]
    fn none_hmac_and_other_algorithms_are_refused() {
        for alg in ["none", "HS256", "RS384", "PS256", "ES384"] {
            let t = token_with_header(&format!(r#"{{"alg":"{alg}"}}"#));
            assert!(
                matches!(header(&t), Err(AuthError::UnsupportedAlgorithm(a)) if a == alg),
                "{alg}"
            );
        }
    }

    #[test]
    fn odd_headers_are_refused() {
        let cases = [
            r#"{"alg":"RS256","typ":"id_token+jwt"}"#,
            r#"{"alg":"RS256","crit":["exp"]}"#,
            r#"{"kid":"k"}"#,
            "not json",
        ];
        for h in cases {
            assert!(header(&token_with_header(h)).is_err(), "{h}");
        }
        assert!(header("%%%.e30.x").is_err());
    }

    #[test]
    fn keys_fit_only_their_algorithm() {
        let jwk = |v: serde_json::Value| -> Jwk { serde_json::from_value(v).unwrap() };
        let x = URL_SAFE_NO_PAD.encode([7u8; 32]);
        let okp = jwk(serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": x}));
        assert_eq!(key_algorithm(&okp), Some(Algorithm::EdDSA));
        let rsa_enc =
            jwk(serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "use": "enc"}));
        assert_eq!(key_algorithm(&rsa_enc), None);
        let rsa_ps =
            jwk(serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": "PS256"}));
        assert_eq!(key_algorithm(&rsa_ps), None);
        let oct = jwk(serde_json::json!({"kty": "oct", "k": "c2VjcmV0"}));
        assert_eq!(key_algorithm(&oct), None);
        let p384 = jwk(serde_json::json!({"kty": "EC", "crv": "P-384", "x": x, "y": x}));
        assert_eq!(key_algorithm(&p384), None);
    }
}
