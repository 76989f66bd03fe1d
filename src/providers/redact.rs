//! Redaction of a connection's secrets from what a provider answers. A
//! provider may reflect the `Authorization` header (or a refresh token, or
//! the client secret) raw, percent-encoded or JSON-escaped (`\/`, `\u002f`,
//! any `\uXXXX`), and a JSON parser turns escapes back into the secret: so
//! the raw text is scanned for every encoding, character by character (the
//! forms may be mixed), and the parsed value is walked again, keys included.

use serde_json::{Map, Value};

const SHOWN: &str = "[redacted]";
/// Shorter values would redact ordinary text; real secrets are far longer.
const MIN_LEN: usize = 4;

/// The secrets to hide; shorter than [`MIN_LEN`] ones are ignored.
pub(super) struct Redactor<'a> {
    secrets: Vec<&'a [u8]>,
}

enum Match {
    /// The whole secret, ending at this byte offset.
    Whole(usize),
    /// The text ended after this many bytes of the secret.
    Cut(usize),
    None,
}

impl<'a> Redactor<'a> {
    pub(super) fn new(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let secrets = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_LEN)
            .map(str::as_bytes)
            .collect();
        Self { secrets }
    }

    /// `text` with every occurrence of a secret, in any encoding, replaced;
    /// a secret cut short by the end of the text (a truncated answer) too.
    pub(super) fn text(&self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut i = 0;
        'scan: while i < bytes.len() {
            for secret in &self.secrets {
                match match_at(bytes, i, secret) {
                    Match::Whole(end) => {
                        out.extend_from_slice(SHOWN.as_bytes());
                        i = end;
                        continue 'scan;
                    }
                    Match::Cut(n) if n >= MIN_LEN => {
                        out.extend_from_slice(SHOWN.as_bytes());
                        break 'scan;
                    }
                    _ => {}
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        // Matches start and end on character boundaries (a secret is valid
        // UTF-8 and escapes are ASCII), so this never replaces anything.
        String::from_utf8_lossy(&out).into_owned()
    }

    /// `value` with every string and every key redacted.
    pub(super) fn value(&self, value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.text(&k), self.value(v)))
                    .collect::<Map<_, _>>(),
            ),
            other => other,
        }
    }
}

/// Whether `secret` starts at `text[at..]`, each of its bytes written raw,
/// percent-encoded, or (ASCII ones) JSON-escaped.
fn match_at(text: &[u8], at: usize, secret: &[u8]) -> Match {
    let mut j = at;
    for (n, &want) in secret.iter().enumerate() {
        if j >= text.len() {
            return Match::Cut(n);
        }
        match one(&text[j..], want) {
            Some(len) => j += len,
            // The text ends inside an escape (`%2`, `\u00`): cut there.
            None if is_cut_escape(&text[j..]) => return Match::Cut(n),
            None => return Match::None,
        }
    }
    Match::Whole(j)
}

/// Whether `rest`, the end of the text, is the start of an escape cut
/// short: shorter than `%XX` or `\uXXXX`.
fn is_cut_escape(rest: &[u8]) -> bool {
    match rest {
        [b'%', ..] => rest.len() < 3,
        [b'\\', ..] => rest.len() < 6 && (rest.len() == 1 || rest[1] == b'u'),
        _ => false,
    }
}

/// The length of the encoding of `want` at the start of `text`, if any.
fn one(text: &[u8], want: u8) -> Option<usize> {
    let hex = |digits: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(digits).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    match text {
        [b, ..] if *b == want => Some(1),
        [b'+', ..] if want == b' ' => Some(1),
        [b'%', a, b, ..] if hex(&[*a, *b]) == Some(u32::from(want)) => Some(3),
        [b'\\', b'u', a, b, c, d, ..]
            if want.is_ascii() && hex(&[*a, *b, *c, *d]) == Some(u32::from(want)) =>
        {
            Some(6)
        }
        [b'\\', c, ..] if *c == want && matches!(want, b'/' | b'"' | b'\\') => Some(2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_encoding_and_cut_tokens_are_redacted() {
        let r = Redactor::new(["fk/ACCESS-1", "ab"]);
        for form in [
            "fk/ACCESS-1",
            "fk\\/ACCESS-1",
            "fk\\u002fACCESS-1",
            "fk\\u002FACCESS-1",
            "%66%6B%2F%41CCESS-1",
            "fk%2fACCESS-1",
            "\\u0066k/ACCESS\\u002d1",
        ] {
            assert_eq!(r.text(&format!("x {form} y")), "x [redacted] y", "{form}");
        }
        assert_eq!(r.text("ends fk/ACC"), "ends [redacted]");
        // Cut inside an escape: still the secret's start.
        for cut in ["fk/ACCESS%2", "fk/ACCESS%", "fk/ACCESS\\u00", "fk/ACCESS\\"] {
            assert_eq!(r.text(&format!("ends {cut}")), "ends [redacted]", "{cut}");
        }
        assert_eq!(r.text("fk/ACCESS%41 ab"), "fk/ACCESS%41 ab");
        assert_eq!(r.text("fk/ACCESS-2 ab"), "fk/ACCESS-2 ab");
    }

    #[test]
    fn parsed_values_are_walked_keys_included() {
        let r = Redactor::new(["fk/ACCESS-1"]);
        let parsed: Value =
            serde_json::from_str(r#"{"fk\/ACCESS-1": ["Bearer fk\u002fACCESS-1", 1]}"#).unwrap();
        assert_eq!(
            r.value(parsed),
            json!({"[redacted]": ["Bearer [redacted]", 1]})
        );
    }
}
