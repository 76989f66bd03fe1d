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
//!
//! The sealed payload is a fixed binary layout (`payload`); states of the
//! first format, JSON (`json`), still open.

use crate::connect::tickets::TicketSecret;
use crate::domain::{ProviderName, UserRef};
use chrono::Utc;
use rmcp::{ErrorData, model::JsonObject};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::crypto::{KeyRing, Purpose};

mod json;
mod payload;

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

/// The bound values as a state keeps them: digests, so that its length
/// does not grow with long subjects or client ids (a client id can be a
/// whole metadata URL).
#[derive(Debug, PartialEq, Eq)]
struct Bound {
    /// Audience, issuer, subject, client id, method, target: the first
    /// 128 bits of each one's SHA-256, in [`BOUND_NAMES`]' order.
    values: [[u8; 16]; 6],
    /// SHA-256 of the canonical arguments.
    arguments: [u8; 32],
}

/// What a refusal names for each of [`Bound::values`].
const BOUND_NAMES: [&str; 6] = [
    "audience", "issuer", "subject", "client", "method", "target",
];

impl Bound {
    fn of(binding: &Binding<'_>) -> Self {
        Self {
            values: [
                digest(binding.audience),
                digest(binding.user.issuer()),
                digest(binding.user.subject()),
                digest(binding.client_id),
                digest(binding.method),
                digest(binding.target),
            ],
            arguments: arguments_digest(binding.arguments),
        }
    }

    /// The first bound value in which `self` (sealed) and `now` differ,
    /// each compared in constant time.
    fn first_difference(&self, now: &Bound) -> Option<&'static str> {
        let values = self.values.iter().zip(&now.values).zip(BOUND_NAMES);
        for ((sealed, now), what) in values {
            if !crate::crypto::same_bytes(sealed, now) {
                return Some(what);
            }
        }
        (!crate::crypto::same_bytes(&self.arguments, &now.arguments)).then_some("arguments")
    }
}

/// A payload as read, before its expiry and bindings are checked.
#[derive(Debug, PartialEq, Eq)]
struct Opened {
    bound: Bound,
    /// Expiry, Unix seconds.
    exp: i64,
    round: RoundState,
}

/// Why a state was refused (for the log and the audit table only).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    #[error("too long")]
    TooLong,
    #[error("does not open: {0}")]
    Crypto(#[from] crate::crypto::CryptoError),
    #[error("payload is not in a known format")]
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
    let exp = Utc::now().timestamp().saturating_add(ttl);
    let payload = payload::write(&Bound::of(binding), exp, round)?;
    let sealed =
        keys.seal_to_string(Purpose::RequestState, binding.audience.as_bytes(), &payload)?;
    // A state `open` would refuse as too long is an error now, not a
    // round the client can never finish.
    if sealed.len() > MAX_STATE_LEN {
        return Err(StateError::Seal(format!(
            "{} characters, over the {MAX_STATE_LEN} a state may have",
            sealed.len()
        )));
    }
    Ok(sealed)
}

pub fn open(keys: &KeyRing, binding: &Binding<'_>, state: &str) -> Result<RoundState, StateError> {
    if state.len() > MAX_STATE_LEN {
        return Err(StateError::TooLong);
    }
    let plain = keys.open_string(Purpose::RequestState, binding.audience.as_bytes(), state)?;
    let opened = match plain.first() {
        Some(&payload::FORMAT) => payload::read(&plain)?,
        Some(&json::FIRST_BYTE) => json::read(&plain)?,
        _ => return Err(StateError::Payload),
    };
    if opened.exp <= Utc::now().timestamp() {
        return Err(StateError::Expired);
    }
    if let Some(what) = opened.bound.first_difference(&Bound::of(binding)) {
        return Err(StateError::Mismatch(what));
    }
    Ok(opened.round)
}

/// A bound value as stored: the first 128 bits of its SHA-256.
fn digest(value: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&Sha256::digest(value.as_bytes())[..16]);
    out
}

/// SHA-256 of the arguments as canonical JSON: object keys sorted at every
/// level, no insignificant white space. Absent and `{}` are the same.
fn arguments_digest(arguments: Option<&JsonObject>) -> [u8; 32] {
    let mut out = Vec::new();
    match arguments {
        Some(args) => write_canonical_object(args, &mut out),
        None => out.extend_from_slice(b"{}"),
    }
    Sha256::digest(&out).into()
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

    /// The digests a state keeps are computed as they always were (a state
    /// from an instance of another version compares them with these).
    #[test]
    fn digests_are_computed_as_they_always_were() {
        let x = args(json!({"b": {"y": [1, 2.5, true, null], "x": "s\"\u{1}é"}, "a": 1}));
        assert_eq!(
            crate::crypto::hex(&arguments_digest(Some(&x))),
            "3524c95f2dc35d9b2066eca1fcf1b7e110fff6b9efecb24405b709f650ddc7df"
        );
        assert_eq!(
            crate::crypto::hex(&digest("alice")),
            "2bd806c97f0e00af1a1fc3328fa763a9"
        );
    }

    /// A state the previous version sealed (its JSON payload), expiring in
    /// 2106: during a rolling deploy such states reach this version.
    const SEALED_AS_JSON: &str = "k1.CKHMdR9rGpC2DgyTL-ToUa6hGmah6agGvTg1aHaFPL5-EyY3R-p_wWV1jriakQBGdiuOPJOvpZnSQmNOVHu9B62tI2cvPee0XMF8Bc-KBJVg9_MSHgz2A6eXMcFsY91Xw8OVEfqkmL8T-WPE-qfyXyGsJl04xs7rpGkQtLlzPrqI37UKSx18Tg_2q8Qxxq6b3f7ltxAGk53OiU2i0BVYCjaSHDMueNMbwm7Sgz5whxhEhOmphXouzNFUSxDPOX7UM2fgTrRwIVNTkWB3pqwTsqueur2IAmZcYVRqmoeoIctVQq_6itgwumvgEpvm12Qcd7LNVEclhwrGR6sl-I5XNgEGIs_wpFh1toHy6YzO85nuXTrmS-nLZ8bUhiIvhxfPhx70ZB-IizoEQI9spvNownR42xBie84oYdhPe_L9nMgbjaWt8_qFhDLZo3VKMoiWvZySYwM1u4va63hMHYD-kxHQo-ZTfdAoYI2d23GwRfJCT-tc5XS0fjjHGbwPs2f3peZOuRO4aUFy5HOparNcFA3j6got6w3RyJF_VvUMel7ni70PSIFREbVYl6Ta9QHmtEZxeYyMUpXtdiurV3LTM771rtQjHaK9JZ2yUkQKMmqkl5Bq13LWH290jNLhRslOb3yYRfoM5-4xs5VU1EQHyvqBfIyuuL4aEoBsg_lW493f88ijI8TOxgF3akU06d2sSPbGwViA07l9fjPfmphSxXOH73Aha5ioS5AZguUkxDlTkCvfBiHPTo3oZOLPNHLIY46HAVAqk8eheLgtKiPequevMUlzrWIrchd9xwpVx3WHGVnoT8PJWpJeVtgAwN3heSrm5N77M3DPiLuZlEB09Vv4CTU";

    fn json_fixture_arguments() -> JsonObject {
        args(
            json!({"provider": "demo", "path": "/user", "query": {"b": [1, 2.5, true, null], "a": "s\"\u{1}é"}}),
        )
    }

    fn uuid(s: &str) -> Uuid {
        Uuid::parse_str(s).unwrap()
    }

    #[test]
    fn a_state_sealed_by_the_previous_version_opens_with_every_field() {
        let a = json_fixture_arguments();
        let b = Binding {
            target: "api_request",
            ..binding(&a)
        };
        let account = uuid("6f1d2c3b-4a59-4e68-8d7c-1b2a3c4d5e6f");
        let opened = open(&keys(), &b, SEALED_AS_JSON).unwrap();
        assert_eq!(
            opened,
            RoundState {
                ticket: Some(RoundTicket {
                    id: uuid("0b6c7c5e-8f2a-4d61-9a53-2f1e7d4c3b2a"),
                    secret: TicketSecret::parse("AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE")
                        .unwrap(),
                }),
                provider: ProviderName::parse("github").unwrap(),
                round: 3,
                account: Some(account),
                offered: vec![account, uuid("1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d")],
            }
        );
        // Its bindings hold as a new state's do.
        let bob = Binding {
            user: UserRef::new("https://idp.example", "bob"),
            ..b.clone()
        };
        assert_eq!(
            open(&keys(), &bob, SEALED_AS_JSON),
            Err(StateError::Mismatch("subject"))
        );
        let other_args = args(json!({"provider": "demo", "path": "/user"}));
        let changed = Binding {
            arguments: Some(&other_args),
            ..b
        };
        assert_eq!(
            open(&keys(), &changed, SEALED_AS_JSON),
            Err(StateError::Mismatch("arguments"))
        );
    }

    #[test]
    fn a_state_is_sealed_in_the_binary_format_and_half_as_long() {
        let a = json_fixture_arguments();
        let b = Binding {
            target: "api_request",
            ..binding(&a)
        };
        let round = open(&keys(), &b, SEALED_AS_JSON).unwrap();
        let sealed = seal(&keys(), &b, &round, Duration::from_secs(60)).unwrap();
        let plain = keys()
            .open_string(Purpose::RequestState, b.audience.as_bytes(), &sealed)
            .unwrap();
        assert_eq!(plain[0], payload::FORMAT);
        assert!(
            sealed.len() * 2 < SEALED_AS_JSON.len() + 100,
            "{} characters against the JSON format's {}",
            sealed.len(),
            SEALED_AS_JSON.len()
        );
        assert_eq!(open(&keys(), &b, &sealed).unwrap(), round);
    }

    #[test]
    fn a_state_too_long_to_open_is_not_sealed() {
        let a = args(json!({}));
        let many = |n: usize| RoundState {
            offered: (0..n).map(|_| Uuid::new_v4()).collect(),
            ..round()
        };
        let fits = seal(&keys(), &binding(&a), &many(100), Duration::from_secs(60)).unwrap();
        assert_eq!(
            open(&keys(), &binding(&a), &fits).unwrap().offered.len(),
            100
        );
        assert!(matches!(
            seal(&keys(), &binding(&a), &many(200), Duration::from_secs(60)),
            Err(StateError::Seal(_))
        ));
    }

    #[test]
    fn a_payload_of_neither_format_is_refused() {
        let a = args(json!({}));
        for plain in [&b""[..], b"\x01", b"[1]", b"{\"aud\":1}"] {
            let sealed = keys()
                .seal_to_string(
                    Purpose::RequestState,
                    binding(&a).audience.as_bytes(),
                    plain,
                )
                .unwrap();
            assert_eq!(
                open(&keys(), &binding(&a), &sealed),
                Err(StateError::Payload),
                "{plain:?}"
            );
        }
    }
}
