//! `requestState`: what a stateless server remembers between the rounds of a
//! Multi Round-Trip Request, sealed with the key ring (AES-256-GCM, purpose
//! `request-state`) so that the client can neither read nor change it.
//!
//! The state is bound to the request it belongs to: audience, issuer,
//! subject, client id, method, tool name or resource URI, the digest of the
//! canonical arguments, the ticket, the round, an expiry. Opening it checks
//! every binding; every failure — bad encoding, unknown key, forged tag,
//! expired, another principal, another request — is answered with the same
//! error ([`INVALID_STATE_MESSAGE`]) and the real reason goes to the log.

use crate::connect::tickets::TicketSecret;
use crate::domain::{ProviderName, UserRef};
use chrono::Utc;
use rmcp::{ErrorData, model::JsonObject};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use uuid::Uuid;

use crate::crypto::{KeyRing, Purpose};

/// The one answer to any `requestState` that does not open.
pub const INVALID_STATE_MESSAGE: &str = "Invalid or expired requestState";

/// Longest `requestState` accepted; anything longer was not made here.
const MAX_STATE_LEN: usize = 4096;

/// What a request is, for binding. Built from the incoming request each round.
#[derive(Debug, Clone)]
pub struct Binding<'a> {
    pub audience: &'a str,
    pub user: UserRef<'a>,
    pub client_id: &'a str,
    pub method: &'a str,
    /// The tool name, prompt name or resource URI.
    pub target: &'a str,
    pub arguments: Option<&'a JsonObject>,
}

/// What the server carries from one round to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundState {
    /// The connect ticket the round showed; `None` for a round that asked
    /// something else (the `disconnect` confirmation).
    pub ticket: Option<RoundTicket>,
    pub provider: ProviderName,
    pub round: u32,
    /// The account (connection) the user chose in an earlier round, when
    /// they have several at the provider.
    pub account: Option<Uuid>,
    /// The accounts an account question offered, in its order: a numbered
    /// entry in the answer names one of these, not whichever account holds
    /// that place when the answer comes. Empty for other rounds.
    pub offered: Vec<Uuid>,
}

/// A connect ticket as a round remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundTicket {
    pub id: Uuid,
    /// The ticket's secret, so a retry can show the same URL while it lives.
    /// Safe here: the state is encrypted, and the client has the URL anyway.
    pub secret: TicketSecret,
}

#[derive(Serialize, Deserialize)]
/// Bound values are stored as digests (see [`digest`]). Opening borrows
/// them from the decrypted bytes: hex needs no unescaping.
struct Payload<'a> {
    #[serde(borrow)]
    aud: Cow<'a, str>,
    #[serde(borrow)]
    iss: Cow<'a, str>,
    #[serde(borrow)]
    sub: Cow<'a, str>,
    #[serde(borrow)]
    cid: Cow<'a, str>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    target: Cow<'a, str>,
    /// SHA-256 of the canonical arguments, hex.
    #[serde(borrow)]
    args: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ticket: Option<Uuid>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    secret: Option<Cow<'a, str>>,
    provider: ProviderName,
    round: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    offered: Vec<Uuid>,
    /// Expiry, Unix seconds.
    exp: i64,
}

/// Why a state was refused (for the log and the audit table only).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    #[error("too long")]
    TooLong,
    #[error("does not open: {0}")]
    Crypto(#[from] crate::crypto::CryptoError),
    #[error("payload is not the expected JSON")]
    Payload,
    #[error("expired")]
    Expired,
    #[error("bound to another {0}")]
    Mismatch(&'static str),
    #[error("cannot be written: {0}")]
    Seal(String),
}

impl StateError {
    /// The fixed reason recorded for a refusal: never the input itself.
    pub fn reason_code(&self) -> &'static str {
        use crate::crypto::CryptoError;
        match self {
            StateError::TooLong => "too_long",
            StateError::Crypto(CryptoError::UnknownKey(_)) => "unknown_key",
            StateError::Crypto(CryptoError::Tampered) => "does_not_authenticate",
            StateError::Crypto(_) => "malformed",
            StateError::Payload => "bad_payload",
            StateError::Expired => "expired",
            StateError::Mismatch("audience") => "other_audience",
            StateError::Mismatch("issuer") => "other_issuer",
            StateError::Mismatch("subject") => "other_subject",
            StateError::Mismatch("client") => "other_client",
            StateError::Mismatch("method") => "other_method",
            StateError::Mismatch("target") => "other_target",
            StateError::Mismatch("arguments") => "other_arguments",
            StateError::Mismatch(_) => "other_request",
            // Only sealing fails this way; no presented state does.
            StateError::Seal(_) => "malformed",
        }
    }

    /// The JSON-RPC error the client sees, whatever the reason.
    pub fn to_client_error(&self) -> ErrorData {
        super::errors::RequestError::InvalidState.into()
    }
}

pub fn seal(
    keys: &KeyRing,
    binding: &Binding<'_>,
    round: &RoundState,
    ttl: std::time::Duration,
) -> Result<String, StateError> {
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2);
    let bound = [
        digest(binding.audience),
        digest(binding.user.issuer()),
        digest(binding.user.subject()),
        digest(binding.client_id),
        digest(binding.method),
        digest(binding.target),
    ];
    let args = arguments_digest(binding.arguments);
    let payload = Payload {
        aud: bound[0].as_cow(),
        iss: bound[1].as_cow(),
        sub: bound[2].as_cow(),
        cid: bound[3].as_cow(),
        method: bound[4].as_cow(),
        target: bound[5].as_cow(),
        args: args.as_cow(),
        ticket: round.ticket.as_ref().map(|t| t.id),
        secret: round
            .ticket
            .as_ref()
            .map(|t| Cow::Borrowed(t.secret.expose())),
        provider: round.provider.clone(),
        round: round.round,
        account: round.account,
        offered: round.offered.clone(),
        exp: Utc::now().timestamp().saturating_add(ttl),
    };
    let json = serde_json::to_vec(&payload).map_err(|e| StateError::Seal(e.to_string()))?;
    Ok(keys.seal_to_string(Purpose::RequestState, binding.audience.as_bytes(), &json)?)
}

pub fn open(keys: &KeyRing, binding: &Binding<'_>, state: &str) -> Result<RoundState, StateError> {
    if state.len() > MAX_STATE_LEN {
        return Err(StateError::TooLong);
    }
    let plain = keys.open_string(Purpose::RequestState, binding.audience.as_bytes(), state)?;
    let p: Payload = serde_json::from_slice(&plain).map_err(|_| StateError::Payload)?;
    if p.exp <= Utc::now().timestamp() {
        return Err(StateError::Expired);
    }
    let checks: [(&str, &[u8], &'static str); 7] = [
        (&p.aud, &digest(binding.audience).0, "audience"),
        (&p.iss, &digest(binding.user.issuer()).0, "issuer"),
        (&p.sub, &digest(binding.user.subject()).0, "subject"),
        (&p.cid, &digest(binding.client_id).0, "client"),
        (&p.method, &digest(binding.method).0, "method"),
        (&p.target, &digest(binding.target).0, "target"),
        (&p.args, &arguments_digest(binding.arguments).0, "arguments"),
    ];
    for (sealed, now, what) in checks {
        if !crate::crypto::same_bytes(sealed.as_bytes(), now) {
            return Err(StateError::Mismatch(what));
        }
    }
    let ticket = match (p.ticket, p.secret) {
        (Some(id), Some(secret)) => Some(RoundTicket {
            id,
            secret: TicketSecret::parse(&secret).ok_or(StateError::Payload)?,
        }),
        (None, None) => None,
        _ => return Err(StateError::Payload),
    };
    Ok(RoundState {
        ticket,
        provider: p.provider,
        round: p.round,
        account: p.account,
        offered: p.offered,
    })
}

/// A bound value as stored: its SHA-256 (first 128 bits, hex), so the
/// state's length does not grow with long subjects or client ids (a client
/// id can be a whole metadata URL).
fn digest(value: &str) -> HexDigest<32> {
    HexDigest::of(&Sha256::digest(value.as_bytes())[..16])
}

/// SHA-256 (hex) of the arguments as canonical JSON: object keys sorted at
/// every level, no insignificant white space. Absent and `{}` are the same.
fn arguments_digest(arguments: Option<&JsonObject>) -> HexDigest<64> {
    let mut out = Vec::new();
    match arguments {
        Some(args) => write_canonical_object(args, &mut out),
        None => out.extend_from_slice(b"{}"),
    }
    HexDigest::of(&Sha256::digest(&out))
}

/// A digest in lowercase hex, on the stack: opening a state computes seven
/// of them on every retry, and compares them without a `String` each.
#[derive(Debug, PartialEq, Eq)]
struct HexDigest<const N: usize>([u8; N]);

impl<const N: usize> HexDigest<N> {
    /// `bytes` as hex; `N` is twice their length.
    fn of(bytes: &[u8]) -> Self {
        debug_assert_eq!(bytes.len() * 2, N);
        let mut out = [0; N];
        crate::crypto::hex_into(bytes, &mut out);
        Self(out)
    }

    /// For the sealed payload, borrowed. Hex digits are ASCII: nothing is lost.
    fn as_cow(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

fn write_canonical_object(map: &JsonObject, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // A JSON string of the key, escaped as serde_json escapes it.
        write_json(key, out);
        out.push(b':');
        write_canonical(value, out);
    }
    out.push(b'}');
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_canonical_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        other => write_json(other, out),
    }
}

/// A string, number, boolean or null as serde_json writes it. Writing
/// these into a `Vec` cannot fail (no I/O, no map with non-string keys).
fn write_json<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        unreachable!("a JSON scalar cannot fail to serialize into memory: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    use serde_json::json;
    use std::time::Duration;

    fn keys() -> KeyRing {
        KeyRing::from_entries(["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]).unwrap()
    }

    fn args(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    fn binding(a: &JsonObject) -> Binding<'_> {
        Binding {
            audience: "https://c.example/mcp",
            user: UserRef::new("https://idp.example", "alice"),
            client_id: "client-1",
            method: "tools/call",
            target: "whoami",
            arguments: Some(a),
        }
    }

    fn round() -> RoundState {
        RoundState {
            ticket: Some(RoundTicket {
                id: Uuid::new_v4(),
                secret: TicketSecret::generate(),
            }),
            provider: ProviderName::parse("demo").unwrap(),
            round: 1,
            account: None,
            offered: Vec::new(),
        }
    }

    #[test]
    fn round_trip_and_confidential() {
        let a = args(json!({"provider": "demo"}));
        let r = round();
        let s = seal(&keys(), &binding(&a), &r, Duration::from_secs(60)).unwrap();
        assert_eq!(open(&keys(), &binding(&a), &s).unwrap(), r);
        let body = URL_SAFE_NO_PAD
            .decode(s.split_once('.').unwrap().1)
            .unwrap();
        let as_text = String::from_utf8_lossy(&body);
        assert!(
            !as_text.contains("alice")
                && !as_text.contains("demo")
                && !as_text.contains("t-secret"),
            "sealed state must not be readable"
        );
    }

    #[test]
    fn every_binding_is_checked() {
        let a = args(json!({"provider": "demo"}));
        let other_args = args(json!({"provider": "github"}));
        let s = seal(&keys(), &binding(&a), &round(), Duration::from_secs(60)).unwrap();
        let variants: Vec<(&str, Binding<'_>)> = vec![
            (
                "audience",
                Binding {
                    audience: "https://other.example/mcp",
                    ..binding(&a)
                },
            ),
            (
                "issuer",
                Binding {
                    user: UserRef::new("https://evil.example", "alice"),
                    ..binding(&a)
                },
            ),
            (
                "subject",
                Binding {
                    user: UserRef::new("https://idp.example", "bob"),
                    ..binding(&a)
                },
            ),
            (
                "client",
                Binding {
                    client_id: "client-2",
                    ..binding(&a)
                },
            ),
            (
                "method",
                Binding {
                    method: "resources/read",
                    ..binding(&a)
                },
            ),
            (
                "target",
                Binding {
                    target: "api_request",
                    ..binding(&a)
                },
            ),
            (
                "arguments",
                Binding {
                    arguments: Some(&other_args),
                    ..binding(&a)
                },
            ),
        ];
        for (what, b) in variants {
            let err = open(&keys(), &b, &s).unwrap_err();
            // The audience is also the associated data: it fails to open at all.
            if what == "audience" {
                assert!(matches!(err, StateError::Crypto(_)), "{what}: {err:?}");
            } else {
                assert_eq!(err, StateError::Mismatch(what), "{what}");
            }
            assert_eq!(err.to_client_error().message, INVALID_STATE_MESSAGE);
        }
    }

    #[test]
    fn expiry_tamper_and_garbage_fail() {
        let a = args(json!({}));
        let expired = seal(&keys(), &binding(&a), &round(), Duration::from_secs(0)).unwrap();
        assert_eq!(
            open(&keys(), &binding(&a), &expired),
            Err(StateError::Expired)
        );
        let good = seal(&keys(), &binding(&a), &round(), Duration::from_secs(60)).unwrap();
        let mut flipped = good.clone().into_bytes();
        let i = flipped.len() - 5;
        flipped[i] = if flipped[i] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        for bad in [
            "",
            "x",
            "k1.",
            "k1.!!!",
            "zz.AAAA",
            &good[..good.len() - 3],
            &flipped,
        ] {
            assert!(open(&keys(), &binding(&a), bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            open(&keys(), &binding(&a), &"a".repeat(10_000)),
            Err(StateError::TooLong)
        );
    }

    #[test]
    fn canonical_digest_ignores_key_order_but_not_values() {
        let x = args(json!({"a": 1, "b": {"y": [1, 2], "x": "s"}}));
        let y = args(json!({"b": {"x": "s", "y": [1, 2]}, "a": 1}));
        let z = args(json!({"b": {"x": "s", "y": [2, 1]}, "a": 1}));
        assert_eq!(arguments_digest(Some(&x)), arguments_digest(Some(&y)));
        assert_ne!(arguments_digest(Some(&x)), arguments_digest(Some(&z)));
        assert_eq!(
            arguments_digest(None),
            arguments_digest(Some(&JsonObject::new()))
        );
    }

    /// States sealed by an instance of another version still open during a
    /// rolling deploy only if the digests are written the same way.
    #[test]
    fn digests_are_written_as_they_always_were() {
        let x = args(json!({"b": {"y": [1, 2.5, true, null], "x": "s\"\u{1}é"}, "a": 1}));
        assert_eq!(
            arguments_digest(Some(&x)).0.as_slice(),
            b"3524c95f2dc35d9b2066eca1fcf1b7e110fff6b9efecb24405b709f650ddc7df"
        );
        assert_eq!(
            digest("alice").0.as_slice(),
            b"2bd806c97f0e00af1a1fc3328fa763a9"
        );
    }
}
