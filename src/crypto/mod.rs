//! The AES-256-GCM key ring. Every secret this service keeps at rest or hands
//! out sealed (third-party tokens, PKCE verifiers, `requestState`) goes
//! through here.
//!
//! - Keys are configured as `kid:base64` entries of at least 32 bytes (the
//!   first 32 are used). The first key seals; every key opens. Rotation is
//!   three phases: add the new key second, promote it first, retire the old
//!   one after the longest lifetime of anything it sealed.
//! - A [`Purpose`] is bound as associated data, so a value sealed for one
//!   purpose never opens for another, and callers add their own binding
//!   (e.g. the connection a token belongs to).
//! - A fresh random 96-bit nonce per seal.

mod mac;
pub mod secret;

pub use mac::hmac_sha256;

use aes_gcm::{Aes256Gcm, KeyInit, Nonce, Tag, aead::AeadInPlace};
use base64::{Engine, engine::general_purpose::STANDARD, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::RngCore;

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const KEY_LEN: usize = 32;
/// What a key's names key is derived with (see [`KeyRing::name_tags`]).
const NAMES_LABEL: &[u8] = b"mcp-connect name tags v1";

/// What a sealed value is for; part of the associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    RequestState,
    Token,
    Cookie,
    PkceVerifier,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::RequestState => b"mcp-connect/request-state",
            Purpose::Token => b"mcp-connect/token",
            Purpose::Cookie => b"mcp-connect/cookie",
            Purpose::PkceVerifier => b"mcp-connect/pkce-verifier",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("a key entry must look like `kid:base64` (entry {0})")]
    Malformed(usize),
    /// The entry's number, not its id: an entry written the wrong way
    /// round (`base64:kid`) would otherwise print the key.
    #[error(
        "key entry {0}: the key id (before the `:`) must be 1 to 32 characters of letters, digits, `-` or `_` (entries are `kid:base64`)"
    )]
    BadKeyId(usize),
    #[error("key `{0}` is not valid base64")]
    NotBase64(String),
    #[error("key `{0}` is shorter than 32 bytes")]
    TooShort(String),
    #[error(
        "key id `{0}` appears twice: each key needs an id of its own, so give the new key \
         another (the part before its `:`; `mcp-connect keys generate --id ID` makes one \
         with the id you choose)"
    )]
    DuplicateKeyId(String),
    #[error("no keys configured")]
    Empty,
    #[error("sealed by unknown key `{0}`")]
    UnknownKey(String),
    #[error("sealed value is malformed")]
    BadEnvelope,
    #[error("encryption failed")]
    Encrypt,
    #[error("sealed value does not authenticate")]
    Tampered,
}

/// How much of an outsider's string may reach a log line or a row.
pub const PRINTABLE_PREFIX_CHARS: usize = 32;

/// The first [`PRINTABLE_PREFIX_CHARS`] characters of `s`, escaped (no
/// control characters, quotes or non-ASCII), `…` when cut: for strings an
/// outsider chose.
pub fn printable_prefix(s: &str) -> String {
    printable_prefix_of(s, PRINTABLE_PREFIX_CHARS)
}

/// `value` itself when it has at most `chars` bytes (for a writer that
/// escapes what needs it, as a JSON log line does), else its
/// [`printable_prefix_of`] `chars` characters: no copy for the common case.
pub fn printable_prefix_if_longer(value: &str, chars: usize) -> std::borrow::Cow<'_, str> {
    if value.len() <= chars {
        std::borrow::Cow::Borrowed(value)
    } else {
        std::borrow::Cow::Owned(printable_prefix_of(value, chars))
    }
}

/// [`printable_prefix`] of at most `chars` characters, for values that are
/// longer by nature (a request path).
pub fn printable_prefix_of(s: &str, chars: usize) -> String {
    let mut out: String = s
        .chars()
        .take(chars)
        .flat_map(char::escape_default)
        .collect();
    if s.chars().nth(chars).is_some() {
        out.push('…');
    }
    out
}

/// A value sealed by one key of the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    /// nonce ‖ ciphertext ‖ tag
    pub bytes: Vec<u8>,
}

struct Key {
    id: String,
    cipher: Aes256Gcm,
    /// A key of its own for [`KeyRing::name_tags`], derived from this
    /// key's material: the AES key itself is used for nothing else.
    names: [u8; 32],
}

/// A sealed value taken apart: the key that sealed it, nonce, ciphertext, tag.
struct Envelope<'k, 'b> {
    key: &'k Key,
    nonce: &'b [u8],
    ciphertext: &'b [u8],
    tag: &'b [u8],
}

impl Key {
    /// Decrypts `buffer` (the ciphertext) where it lies, checking `tag`.
    fn open_in_place(
        &self,
        purpose: Purpose,
        context: &[u8],
        nonce: &[u8],
        buffer: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let aad = associated_data(purpose, &self.id, context);
        self.cipher
            .decrypt_in_place_detached(Nonce::from_slice(nonce), &aad, buffer, Tag::from_slice(tag))
            .map_err(|_| CryptoError::Tampered)
    }
}

/// The configured keys. Cheap to share behind an `Arc`.
pub struct KeyRing {
    keys: Vec<Key>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("KeyRing").field("key_ids", &ids).finish()
    }
}

impl KeyRing {
    /// Parses `kid:base64` entries (standard or URL-safe base64).
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, CryptoError> {
        let mut keys: Vec<Key> = Vec::new();
        for (index, entry) in entries.into_iter().enumerate() {
            let (id, b64) = entry
                .trim()
                .split_once(':')
                .ok_or(CryptoError::Malformed(index + 1))?;
            if !is_key_id(id) {
                return Err(CryptoError::BadKeyId(index + 1));
            }
            let raw = STANDARD
                .decode(b64.trim())
                .or_else(|_| URL_SAFE_NO_PAD.decode(b64.trim().trim_end_matches('=')))
                .map_err(|_| CryptoError::NotBase64(id.to_owned()))?;
            if raw.len() < KEY_LEN {
                return Err(CryptoError::TooShort(id.to_owned()));
            }
            if keys.iter().any(|k| k.id == id) {
                return Err(CryptoError::DuplicateKeyId(id.to_owned()));
            }
            let cipher = Aes256Gcm::new_from_slice(&raw[..KEY_LEN])
                .map_err(|_| CryptoError::TooShort(id.to_owned()))?;
            keys.push(Key {
                id: id.to_owned(),
                cipher,
                names: mac::hmac_sha256(&raw[..KEY_LEN], &[NAMES_LABEL]),
            });
        }
        if keys.is_empty() {
            return Err(CryptoError::Empty);
        }
        Ok(Self { keys })
    }

    /// A new random key entry, `kid:base64`, for configuration.
    pub fn generate_entry(key_id: &str) -> String {
        let mut raw = [0u8; KEY_LEN];
        rand::rng().fill_bytes(&mut raw);
        format!("{key_id}:{}", STANDARD.encode(raw))
    }

    /// Tags naming a tuple of strings (a user and a provider) to whoever
    /// holds a key of this ring, and to no one else: HMAC-SHA256 under
    /// each key's names key over the parts, each with its length in front,
    /// cut to 128 bits, in hex. One per key, the current key's first: two
    /// rings that share a key (every instance, also in the middle of a
    /// rotation) share that key's tag.
    pub fn name_tags(&self, parts: &[&str]) -> Vec<String> {
        let mut framed = Vec::new();
        for part in parts {
            framed.extend_from_slice(&(part.len() as u64).to_be_bytes());
            framed.extend_from_slice(part.as_bytes());
        }
        self.keys
            .iter()
            .map(|k| hex(&mac::hmac_sha256(&k.names, &[&framed])[..16]))
            .collect()
    }

    /// Whether the ring holds a key with this id.
    pub fn has_key(&self, key_id: &str) -> bool {
        self.keys.iter().any(|k| k.id == key_id)
    }

    /// The id of the key that seals.
    pub fn current_key_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Encrypts `plaintext` with the current key. Fails only if the cipher
    /// does (it does not with a valid key); the caller answers with an
    /// internal error rather than store something that cannot be opened.
    pub fn seal(
        &self,
        purpose: Purpose,
        context: &[u8],
        plaintext: &[u8],
    ) -> Result<Sealed, CryptoError> {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let aad = associated_data(purpose, &key.id, context);
        // nonce ‖ ciphertext ‖ tag, encrypted where it will be kept.
        let mut bytes = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(plaintext);
        let tag = key
            .cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, &mut bytes[NONCE_LEN..])
            .map_err(|_| CryptoError::Encrypt)?;
        bytes.extend_from_slice(&tag);
        Ok(Sealed {
            key_id: key.id.clone(),
            bytes,
        })
    }

    pub fn open(
        &self,
        purpose: Purpose,
        context: &[u8],
        sealed: &Sealed,
    ) -> Result<Vec<u8>, CryptoError> {
        self.open_bytes(purpose, context, &sealed.key_id, &sealed.bytes)
    }

    /// [`Self::open`] for a value whose key id and bytes are borrowed (a
    /// row's columns): nothing is copied but the plaintext.
    pub fn open_bytes(
        &self,
        purpose: Purpose,
        context: &[u8],
        key_id: &str,
        bytes: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let envelope = self.envelope(key_id, bytes)?;
        let mut plain = envelope.ciphertext.to_vec();
        envelope
            .key
            .open_in_place(purpose, context, envelope.nonce, &mut plain, envelope.tag)?;
        Ok(plain)
    }

    /// The key that sealed `bytes`, and their parts.
    fn envelope<'b>(&self, key_id: &str, bytes: &'b [u8]) -> Result<Envelope<'_, 'b>, CryptoError> {
        let key = self
            .keys
            .iter()
            .find(|k| k.id == key_id)
            // The id comes from the sealed value, which anyone can send:
            // only a short printable prefix travels on into logs and rows.
            .ok_or_else(|| CryptoError::UnknownKey(printable_prefix(key_id)))?;
        if bytes.len() < NONCE_LEN + TAG_LEN {
            return Err(CryptoError::BadEnvelope);
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        Ok(Envelope {
            key,
            nonce,
            ciphertext,
            tag,
        })
    }

    /// Seals into one printable token: `kid.base64url(nonce‖ciphertext‖tag)`.
    pub fn seal_to_string(
        &self,
        purpose: Purpose,
        context: &[u8],
        plaintext: &[u8],
    ) -> Result<String, CryptoError> {
        let sealed = self.seal(purpose, context, plaintext)?;
        let mut out =
            String::with_capacity(sealed.key_id.len() + 1 + sealed.bytes.len().div_ceil(3) * 4);
        out.push_str(&sealed.key_id);
        out.push('.');
        URL_SAFE_NO_PAD.encode_string(&sealed.bytes, &mut out);
        Ok(out)
    }

    pub fn open_string(
        &self,
        purpose: Purpose,
        context: &[u8],
        token: &str,
    ) -> Result<Vec<u8>, CryptoError> {
        let (key_id, body) = token.split_once('.').ok_or(CryptoError::BadEnvelope)?;
        let mut bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| CryptoError::BadEnvelope)?;
        let key = self.envelope(key_id, &bytes)?.key;
        // Decrypted where it was decoded: the plaintext is the middle of
        // the envelope, moved to the front afterwards.
        let tag_at = bytes.len() - TAG_LEN;
        let (head, tag) = bytes.split_at_mut(tag_at);
        let (nonce, ciphertext) = head.split_at_mut(NONCE_LEN);
        key.open_in_place(purpose, context, nonce, ciphertext, tag)?;
        bytes.truncate(tag_at);
        bytes.drain(..NONCE_LEN);
        Ok(bytes)
    }

    /// Re-seals a value under the current key (for `tokens rekey`).
    pub fn reseal(
        &self,
        purpose: Purpose,
        context: &[u8],
        sealed: &Sealed,
    ) -> Result<Sealed, CryptoError> {
        let plain = self.open(purpose, context, sealed)?;
        self.seal(purpose, context, &plain)
    }
}

/// What a key id may be: 1 to 32 letters, digits, `-` or `_` (it is
/// stored beside every sealed value and names the key in messages).
pub fn is_key_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 32
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The id `keys generate` gives a key when none is asked for: `k`, today's
/// date (UTC), `-` and six random hex digits, e.g. `k20260514-3fa91c`. The
/// date shows which key is newer; the random part keeps apart two keys made
/// on one day, since the ring refuses an id twice (a rotation on the day
/// the first key was made would otherwise stop every instance started
/// with both).
pub fn new_key_id() -> String {
    let mut random = [0u8; 3];
    rand::rng().fill_bytes(&mut random);
    format!("k{}-{}", chrono::Utc::now().format("%Y%m%d"), hex(&random))
}

/// purpose label ‖ 0 ‖ key id ‖ 0 ‖ caller context. The key id is bound so an
/// envelope cannot be relabelled to another key of the ring.
fn associated_data(purpose: Purpose, key_id: &str, context: &[u8]) -> Vec<u8> {
    let label = purpose.label();
    let mut aad = Vec::with_capacity(label.len() + key_id.len() + context.len() + 2);
    aad.extend_from_slice(label);
    aad.push(0);
    aad.extend_from_slice(key_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(context);
    aad
}

/// A 128-bit key naming a tuple of strings (a user, for the per-user link
/// limit's map in memory): SHA-256 over each part with its length in
/// front, so parts cannot run into each other, cut to 16 bytes. Unkeyed:
/// for what never leaves the process ([`KeyRing::name_tags`] is for what
/// does).
pub fn parts_key(parts: &[&str]) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let mut key = [0u8; 16];
    key.copy_from_slice(&h.finalize()[..16]);
    key
}

/// Whether `a` and `b` are equal, in time that depends on their lengths
/// only: the bytes are XOR-folded a word at a time and the result decided
/// once (`subtle`'s comparison of slices pays an optimization barrier per
/// byte, which on a retry's seven digests was most of their cost).
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    if a.len() != b.len() {
        return false;
    }
    let word = |chunk: &[u8]| {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        u64::from_ne_bytes(w)
    };
    let diff = a
        .chunks(8)
        .zip(b.chunks(8))
        .fold(0u64, |acc, (x, y)| acc | (word(x) ^ word(y)));
    diff.ct_eq(&0).into()
}

/// Lower-case hex, for digests that end up in sealed payloads, event keys
/// and file names (one allocation, no per-byte formatting).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0; bytes.len() * 2];
    hex_into(bytes, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Lower-case hex of `bytes` into `out`, which is twice as long (extra
/// room is left as it is): for digests kept on the stack.
pub fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0x0f)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_tags_are_shared_by_rings_that_share_a_key_and_by_no_one_else() {
        let a = KeyRing::generate_entry("a");
        let b = KeyRing::generate_entry("b");
        let ring = |entries: &[&str]| KeyRing::from_entries(entries.iter().copied()).unwrap();
        let parts = ["https://idp.example", "alice", "github"];
        let old = ring(&[&a]).name_tags(&parts);
        let rotating = ring(&[&b, &a]).name_tags(&parts);
        let other = ring(&[&b]).name_tags(&parts);
        assert_eq!(old.len(), 1);
        assert_eq!(rotating.len(), 2);
        assert_eq!(rotating[1], old[0], "the key both hold");
        assert_eq!(rotating[0], other[0]);
        assert_ne!(old[0], other[0]);
        // Not the unkeyed digest anyone could compute, and the parts kept apart.
        assert_ne!(old[0], hex(&parts_key(&parts)));
        assert_ne!(
            ring(&[&a]).name_tags(&["ab", "c"]),
            ring(&[&a]).name_tags(&["a", "bc"])
        );
        assert_eq!(old[0].len(), 32);
    }

    #[test]
    fn parts_keys_keep_the_parts_apart() {
        assert_ne!(parts_key(&["ab", "c"]), parts_key(&["a", "bc"]));
        assert_eq!(parts_key(&["a", "b"]), parts_key(&["a", "b"]));
    }

    #[test]
    fn same_bytes_tells_every_difference() {
        let a: Vec<u8> = (0..67).collect();
        assert!(same_bytes(&a, &a.clone()));
        assert!(same_bytes(b"", b""));
        for i in 0..a.len() {
            let mut b = a.clone();
            b[i] ^= 0x80;
            assert!(!same_bytes(&a, &b), "byte {i}");
        }
        assert!(!same_bytes(&a, &a[..66]));
        assert!(!same_bytes(&a[..8], &a[..9]));
    }

    #[test]
    fn hex_is_lower_case_and_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(hex(&[]), "");
    }

    fn ring(entries: &[&str]) -> KeyRing {
        KeyRing::from_entries(entries.iter().copied()).unwrap()
    }

    fn entry(id: &str, byte: u8) -> String {
        format!("{id}:{}", STANDARD.encode([byte; 32]))
    }

    #[test]
    fn round_trip() {
        let r = ring(&[&entry("a", 1)]);
        let s = r.seal(Purpose::Token, b"ctx", b"secret").unwrap();
        assert_ne!(s.bytes[NONCE_LEN..], b"secret"[..]);
        assert_eq!(r.open(Purpose::Token, b"ctx", &s).unwrap(), b"secret");
        let t = r
            .seal_to_string(Purpose::RequestState, b"", b"hello")
            .unwrap();
        assert!(t.starts_with("a."));
        assert_eq!(
            r.open_string(Purpose::RequestState, b"", &t).unwrap(),
            b"hello"
        );
    }

    #[test]
    fn nonces_differ() {
        let r = ring(&[&entry("a", 1)]);
        assert_ne!(
            r.seal(Purpose::Token, b"", b"x").unwrap().bytes,
            r.seal(Purpose::Token, b"", b"x").unwrap().bytes
        );
    }

    #[test]
    fn wrong_purpose_or_context_fails() {
        let r = ring(&[&entry("a", 1)]);
        let s = r.seal(Purpose::Token, b"ctx", b"secret").unwrap();
        assert_eq!(
            r.open(Purpose::RequestState, b"ctx", &s),
            Err(CryptoError::Tampered)
        );
        assert_eq!(
            r.open(Purpose::Token, b"other", &s),
            Err(CryptoError::Tampered)
        );
    }

    #[test]
    fn tamper_fails() {
        let r = ring(&[&entry("a", 1)]);
        let mut s = r.seal(Purpose::Token, b"", b"secret").unwrap();
        let last = s.bytes.len() - 1;
        s.bytes[last] ^= 1;
        assert_eq!(r.open(Purpose::Token, b"", &s), Err(CryptoError::Tampered));
        s.bytes.truncate(10);
        assert_eq!(
            r.open(Purpose::Token, b"", &s),
            Err(CryptoError::BadEnvelope)
        );
    }

    #[test]
    fn unknown_kid_fails_and_relabel_fails() {
        let r = ring(&[&entry("a", 1), &entry("b", 1)]);
        let mut s = r.seal(Purpose::Token, b"", b"secret").unwrap();
        s.key_id = "zzz".into();
        assert_eq!(
            r.open(Purpose::Token, b"", &s),
            Err(CryptoError::UnknownKey("zzz".into()))
        );
        s.key_id = "k\n".repeat(100);
        let Err(CryptoError::UnknownKey(shown)) = r.open(Purpose::Token, b"", &s) else {
            panic!("an unknown key id must be refused");
        };
        assert_eq!(shown, format!("{}…", "k\\n".repeat(16)));
        // Same key material under another id must not open: the id is bound.
        s.key_id = "b".into();
        assert_eq!(r.open(Purpose::Token, b"", &s), Err(CryptoError::Tampered));
    }

    #[test]
    fn rotation_first_seals_all_open() {
        let old = ring(&[&entry("old", 1)]);
        let sealed_old = old.seal(Purpose::Token, b"", b"v").unwrap();
        let rotated = ring(&[&entry("new", 2), &entry("old", 1)]);
        assert_eq!(
            rotated.open(Purpose::Token, b"", &sealed_old).unwrap(),
            b"v"
        );
        let resealed = rotated.reseal(Purpose::Token, b"", &sealed_old).unwrap();
        assert_eq!(resealed.key_id, "new");
        let retired = ring(&[&entry("new", 2)]);
        assert_eq!(retired.open(Purpose::Token, b"", &resealed).unwrap(), b"v");
    }

    #[test]
    fn bad_entries_are_refused() {
        assert!(matches!(
            KeyRing::from_entries(["nocolon"]),
            Err(CryptoError::Malformed(1))
        ));
        assert!(matches!(
            KeyRing::from_entries(["a:c2hvcnQ="]),
            Err(CryptoError::TooShort(_))
        ));
        assert!(matches!(
            KeyRing::from_entries(["a:!!!"]),
            Err(CryptoError::NotBase64(_))
        ));
        assert!(matches!(
            KeyRing::from_entries(["a b:AAAA"]),
            Err(CryptoError::BadKeyId(1))
        ));
        // Written the wrong way round: the key is never repeated.
        let key = STANDARD.encode([7u8; KEY_LEN]);
        let reversed = KeyRing::from_entries([format!("{key}:k1").as_str()])
            .unwrap_err()
            .to_string();
        assert!(!reversed.contains(&key[..16]), "{reversed}");
        assert!(reversed.contains("key entry 1"), "{reversed}");
        let e = entry("a", 1);
        let twice = KeyRing::from_entries([e.as_str(), entry("a", 2).as_str()]);
        assert!(matches!(twice, Err(CryptoError::DuplicateKeyId(_))));
        // What to do about it: the new key needs another id.
        let said = twice.unwrap_err().to_string();
        assert!(said.contains("another") && said.contains("--id"), "{said}");
        assert!(matches!(
            KeyRing::from_entries(std::iter::empty()),
            Err(CryptoError::Empty)
        ));
        let generated = KeyRing::generate_entry("fresh");
        assert!(KeyRing::from_entries([generated.as_str()]).is_ok());
    }
}
