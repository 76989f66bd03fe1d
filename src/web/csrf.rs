//! CSRF tokens for the forms: HMAC-SHA256 keyed with the session's random
//! `csrf_secret` over a form purpose (e.g. `connect:<ticket id>`), so a token
//! is valid only for one session and one form. Checked in constant time.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use subtle::ConstantTimeEq;

use crate::crypto::hmac_sha256;

/// The hidden form field that carries the token.
pub const FIELD: &str = "csrf";

fn mac(secret: &[u8], purpose: &str) -> [u8; 32] {
    hmac_sha256(secret, &[b"mcp-connect/csrf\0", purpose.as_bytes()])
}

/// The token for `purpose` in the session with `secret`.
pub fn token(secret: &[u8], purpose: &str) -> String {
    URL_SAFE_NO_PAD.encode(mac(secret, purpose))
}

/// True when `presented` is the token for `purpose` in this session.
pub fn verify(secret: &[u8], purpose: &str, presented: Option<&str>) -> bool {
    let Some(presented) = presented else {
        return false;
    };
    let Ok(presented) = URL_SAFE_NO_PAD.decode(presented.trim()) else {
        return false;
    };
    let expected = mac(secret, purpose);
    bool::from(expected.as_slice().ct_eq(&presented))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_verifies_only_for_its_session_and_purpose() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let other = b"fedcba9876543210fedcba9876543210";
        let t = token(secret, "logout");
        assert!(verify(secret, "logout", Some(&t)));
        assert!(!verify(secret, "connect:x", Some(&t)));
        assert!(!verify(other, "logout", Some(&t)));
        assert!(!verify(secret, "logout", None));
        assert!(!verify(secret, "logout", Some("")));
        assert!(!verify(secret, "logout", Some("not base64 !")));
        assert!(!verify(secret, "logout", Some(&t[..t.len() - 2])));
    }
}
