//! HMAC-SHA256 with a key of any length, as one call that cannot fail:
//! for the CSRF tokens of the forms and the webhook signatures.

use hmac::{
    Hmac, Mac,
    digest::{KeyInit, generic_array::GenericArray},
};
use sha2::{Digest, Sha256};

/// SHA-256's block size: HMAC's key is always one block (RFC 2104 §2).
const BLOCK: usize = 64;

/// HMAC-SHA256(`key`, the concatenation of `parts`).
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // RFC 2104 §2: a key longer than a block is hashed first, and the key
    // is then padded with zeros to a block. Doing that here leaves the
    // constructor that takes exactly one block, which has no error to
    // return (the one that takes a slice has, although HMAC never uses it).
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut mac = <Hmac<Sha256> as KeyInit>::new(GenericArray::from_slice(&block));
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_as_hmac_with_the_key_as_given_at_every_length() {
        for len in [0, 1, 32, 63, 64, 65, 200] {
            let key = vec![0x5a_u8; len];
            let mut reference = <Hmac<Sha256> as Mac>::new_from_slice(&key).unwrap();
            reference.update(b"one.two");
            let expected: [u8; 32] = reference.finalize().into_bytes().into();
            assert_eq!(
                hmac_sha256(&key, &[b"one", b".", b"two"]),
                expected,
                "{len}"
            );
        }
    }
}
