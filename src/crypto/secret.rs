//! One-time values of the browser side: cookie values, OAuth `state`, nonces
//! and PKCE verifiers are 256 random bits, base64url; what is stored of them
//! is a SHA-256 digest (the verifier is sealed instead: it must be sent on).

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Length of a base64url-encoded 256-bit value.
pub const ENCODED_LEN: usize = 43;

/// 256 random bits, base64url without padding (43 characters).
pub fn random_value() -> String {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    URL_SAFE_NO_PAD.encode(raw)
}

/// 256 random bits, raw (for keys such as a session's CSRF secret).
pub fn random_bytes() -> Vec<u8> {
    let mut raw = vec![0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    raw
}

/// True when `s` has the shape [`random_value`] produces. Checked before
/// anything presented by a browser is hashed and looked up.
pub fn is_random_value(s: &str) -> bool {
    s.len() == ENCODED_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub fn sha256(value: &str) -> Vec<u8> {
    Sha256::digest(value.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_have_the_expected_shape_and_differ() {
        let a = random_value();
        let b = random_value();
        assert!(is_random_value(&a) && is_random_value(&b));
        assert_ne!(a, b);
        assert!(!is_random_value("short"));
        assert!(!is_random_value(&format!("{}=", &a[..42])));
    }

    #[test]
    fn pkce_challenge_is_s256_of_the_verifier() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        assert_eq!(challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }
}
