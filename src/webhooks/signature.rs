//! The Standard Webhooks signature: `v1,` and the base64 of
//! HMAC-SHA256(key, `{webhook-id}.{webhook-timestamp}.{body}`), where the
//! key is the base64-decoded part of the endpoint's `whsec_…` secret.

use base64::{Engine, engine::general_purpose::STANDARD};

use crate::crypto::hmac_sha256;

/// The `webhook-signature` header value for one attempt.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let parts: [&[u8]; 5] = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
    format!("v1,{}", STANDARD.encode(hmac_sha256(key, &parts)))
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;
    use crate::config::signing_key;

    #[test]
    fn the_published_test_vector_is_reproduced() {
        // The vector the Standard Webhooks reference libraries test against.
        let key = signing_key(&SecretString::from(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
        ))
        .unwrap();
        assert_eq!(
            sign(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
