//! The access line as JSON, formatted here rather than through a `tracing`
//! event: byte for byte what `tracing-subscriber`'s JSON formatter
//! (`flatten_event`, with the target) writes for the same event, without
//! its per-event work — a field visitor per value, a `String` for the
//! timestamp and for the peer address, and a copy of the finished line
//! into the log queue. Serving processes with JSON logs use it (see
//! [`crate::telemetry::json_lines`]); everywhere else the event is emitted.

use std::{borrow::Cow, io::Write, time::SystemTime};

use super::access_log::ToolOutcome;

/// The event's target, as `tracing` names it (the module path of the
/// access log).
pub const TARGET: &str = "mcp_connect::mcp::access_log";

/// The fields of one access line, in the event's order.
pub struct Fields<'a> {
    pub http: &'static str,
    pub peer: Option<std::net::IpAddr>,
    pub method: Option<&'a str>,
    pub status: u16,
    /// Milliseconds, rounded to two decimals.
    pub ms: f64,
    pub subject: Option<Cow<'a, str>>,
    pub client_id: Option<Cow<'a, str>>,
    pub tool: Option<&'a ToolOutcome>,
}

/// The whole line, newline included.
pub fn format(fields: &Fields<'_>, now: SystemTime) -> Vec<u8> {
    let mut out = Vec::with_capacity(320);
    out.extend_from_slice(b"{\"timestamp\":\"");
    timestamp(&mut out, now);
    out.extend_from_slice(b"\",\"level\":\"INFO\",\"message\":\"mcp request\",\"http\":");
    string(&mut out, fields.http);
    if let Some(peer) = fields.peer {
        // An address prints as digits, dots, colons and hex: nothing to escape.
        let _ = write!(out, ",\"peer\":\"{peer}\"");
    }
    if let Some(method) = fields.method {
        out.extend_from_slice(b",\"method\":");
        string(&mut out, method);
    }
    let _ = write!(out, ",\"status\":{}", fields.status);
    out.extend_from_slice(b",\"ms\":");
    let _ = serde_json::to_writer(&mut out, &fields.ms);
    if let Some(subject) = &fields.subject {
        out.extend_from_slice(b",\"subject\":");
        string(&mut out, subject);
    }
    if let Some(client_id) = &fields.client_id {
        out.extend_from_slice(b",\"client_id\":");
        string(&mut out, client_id);
    }
    if let Some(t) = fields.tool {
        out.extend_from_slice(b",\"tool\":");
        string(&mut out, &t.tool);
        let _ = write!(
            out,
            ",\"retry\":{},\"ended\":\"{}\"",
            t.retry,
            t.ended.as_str()
        );
        if let Some(code) = t.code {
            let _ = write!(out, ",\"code\":{code}");
        }
    }
    out.extend_from_slice(b",\"target\":\"");
    out.extend_from_slice(TARGET.as_bytes());
    out.extend_from_slice(b"\"}\n");
    out
}

/// A JSON string, escaped as `serde_json` (and so the formatter) escapes it.
fn string(out: &mut Vec<u8>, value: &str) {
    let plain = value
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, value);
    }
}

/// RFC 3339 in UTC with microseconds, as `tracing-subscriber`'s default
/// timer writes it (`2026-12-01T03:10:57.123456Z`).
fn timestamp(out: &mut Vec<u8>, now: SystemTime) {
    use chrono::{Datelike, Timelike};
    let t = chrono::DateTime::<chrono::Utc>::from(now);
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.nanosecond() % 1_000_000_000 / 1_000
    );
    out.push(b'Z');
}

#[cfg(test)]
mod tests {
    use std::{
        net::SocketAddr,
        time::{Duration, UNIX_EPOCH},
    };

    use super::*;
    use crate::mcp::access_log::{Ended, RequestFacts};

    /// What `tracing-subscriber`'s JSON formatter writes, as configured for
    /// serving processes (see `telemetry::install`).
    fn through_tracing(facts: &RequestFacts, status: u16, ms: f64) -> String {
        let (mut reader, writer) = std::io::pipe().unwrap_or_else(|e| panic!("pipe: {e}"));
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.try_clone().unwrap_or_else(|e| panic!("pipe: {e}")))
            .with_target(true)
            .json()
            .flatten_event(true)
            .finish();
        // The subscriber, and with it the pipe's last writer, is gone after this.
        tracing::subscriber::with_default(subscriber, || facts.event(status, ms));
        let mut line = String::new();
        std::io::Read::read_to_string(&mut reader, &mut line).unwrap_or_else(|e| panic!("{e}"));
        line
    }

    /// The timestamp's value, and the line with it blanked out.
    fn split_timestamp(line: &str) -> (String, String) {
        let start = line.find("\"timestamp\":\"").map(|i| i + 13).unwrap_or(0);
        let end = start + line[start..].find('"').unwrap_or(0);
        (
            line[start..end].to_owned(),
            format!("{}{}", &line[..start], &line[end..]),
        )
    }

    fn facts(peer: Option<&str>, method: Option<&str>, who: Option<(&str, &str)>) -> RequestFacts {
        let mut facts = RequestFacts::new(
            "POST",
            peer.and_then(|p| p.parse::<SocketAddr>().ok().map(|a| a.ip())),
        );
        if let Some(m) = method {
            facts.set_method(m);
        }
        if let Some((subject, client)) = who {
            facts.caller = Some(std::sync::Arc::new(crate::auth::Principal {
                issuer: "https://idp.example".to_owned(),
                subject: subject.to_owned(),
                client_id: client.to_owned(),
                scopes: Vec::new(),
            }));
        }
        facts
    }

    #[test]
    fn the_line_is_what_the_tracing_formatter_writes() {
        let cases = [
            (facts(None, None, None), 401, 0.0),
            (
                facts(
                    Some("127.0.0.1:5000"),
                    Some("server/discover"),
                    Some(("alice", "c1")),
                ),
                200,
                0.31,
            ),
            (
                facts(
                    Some("[::1]:443"),
                    Some("tools/call"),
                    // Escapes: quotes, backslashes, controls, non-ASCII, a line separator.
                    Some((
                        "a\"b\\c\n\u{1b}[31m\u{2028}é",
                        "https://c.example/client?x=\"1\"",
                    )),
                ),
                200,
                12.0,
            ),
            (
                facts(Some("10.0.0.2:1"), Some("a\"b\\"), Some(("bob", "c2"))),
                503,
                1234.57,
            ),
        ];
        for (i, (facts, status, ms)) in cases.into_iter().enumerate() {
            if i >= 2 {
                facts.record.set(ToolOutcome {
                    tool: "whoami".into(),
                    retry: i == 2,
                    ended: if i == 2 {
                        Ended::Complete
                    } else {
                        Ended::ProtocolError
                    },
                    code: (i == 3).then_some(-32603),
                });
            }
            let expected = through_tracing(&facts, status, ms);
            let ours = String::from_utf8(format(&facts.fields(status, ms), SystemTime::now()))
                .unwrap_or_default();
            let (expected_time, expected_rest) = split_timestamp(&expected);
            let (our_time, our_rest) = split_timestamp(&ours);
            assert_eq!(our_rest, expected_rest, "case {i}");
            assert_eq!(
                our_time.len(),
                expected_time.len(),
                "{our_time} / {expected_time}"
            );
            assert!(ours.ends_with("}\n"));
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_microseconds() {
        let at = UNIX_EPOCH + Duration::new(1_796_094_657, 123_456_789);
        let mut out = Vec::new();
        timestamp(&mut out, at);
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "2026-12-01T03:10:57.123456Z"
        );
        let mut out = Vec::new();
        timestamp(&mut out, UNIX_EPOCH);
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}
