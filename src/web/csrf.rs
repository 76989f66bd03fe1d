//! CSRF tokens for the forms: HMAC-SHA256 keyed with the session's random
//! `csrf_secret` over a form purpose (e.g. `connect:<ticket id>`), so a token
//! is valid only for one session and one form. Checked in constant time.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The hidden form field that carries the token.
pub const FIELD: &str = "csrf";

fn mac(secret: &[u8], purpose: &str) -> Vec<u8> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => return Vec::new(),
    };
    mac.update(b"mcp-connect/csrf\0");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().to_vec()
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
    !expected.is_empty() && bool::from(expected.ct_eq(&presented))
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
