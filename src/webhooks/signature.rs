//! The Standard Webhooks signature: `v1,` and the base64 of
//! HMAC-SHA256(key, `{webhook-id}.{webhook-timestamp}.{body}`), where the
//! key is the base64-decoded part of the endpoint's `whsec_…` secret.
//! While a secret is rotated, the header lists one such signature per
//! key, separated by spaces; a receiver accepts any it can verify.

use base64::{Engine, engine::general_purpose::STANDARD};

use crate::crypto::hmac_sha256;

/// The `webhook-signature` header value for one attempt: a signature by
/// each of `keys`, in their order.
pub fn sign(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let parts: [&[u8]; 5] = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
    let signatures: Vec<String> = keys
        .iter()
        .map(|key| format!("v1,{}", STANDARD.encode(hmac_sha256(key, &parts))))
        .collect();
    signatures.join(" ")
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
                std::slice::from_ref(&key),
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn while_a_secret_is_rotated_each_key_signs_in_turn() {
        let (new, old) = (vec![1u8; 32], vec![2u8; 32]);
        let both = sign(&[new.clone(), old.clone()], "msg_1", 1_614_265_330, b"{}");
        let alone = |key: &Vec<u8>| sign(std::slice::from_ref(key), "msg_1", 1_614_265_330, b"{}");
        assert_eq!(both, format!("{} {}", alone(&new), alone(&old)));
        assert_ne!(alone(&new), alone(&old));
    }
}
