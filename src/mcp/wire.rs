//! Corrections to what goes on the wire, where rmcp's serialization differs
//! from the 2026-07-28 schema.
//!
//! rmcp models a URL elicitation with a mandatory `elicitationId` and writes
//! `"elicitationId": ""` when there is none; 2026-07-28 removed the field
//! (`URLElicitationRequest` in schema.json has no `elicitationId`). Legacy
//! 2025-11-25 responses carry a real, non-empty id and are left alone.

use std::{borrow::Cow, collections::BTreeMap, ops::Range};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, value::RawValue};

const EMPTY_ID: &[u8] = br#""elicitationId":"""#;

/// Fixes one JSON-RPC response body. Bodies without the offending bytes are
/// returned untouched (no parse on the hot path).
pub fn correct_json(body: Bytes) -> Bytes {
    if !contains(&body, EMPTY_ID) {
        return body;
    }
    match corrected(&body) {
        Some(fixed) => Bytes::from(fixed),
        None => body,
    }
}

/// Fixes one SSE chunk; rmcp writes each event as one chunk, whose `data:`
/// lines hold one JSON-RPC message.
pub fn correct_sse_chunk(chunk: Bytes) -> Bytes {
    if !contains(&chunk, EMPTY_ID) {
        return chunk;
    }
    let Ok(text) = std::str::from_utf8(&chunk) else {
        return chunk;
    };
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let fixed = line.strip_prefix("data:").and_then(|data| {
            let (json, ending) = split_line_ending(data);
            corrected(json.trim_start().as_bytes()).map(|fixed| (fixed, ending))
        });
        match fixed {
            Some((json, ending)) => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&json);
                out.extend_from_slice(ending.as_bytes());
            }
            None => out.extend_from_slice(line.as_bytes()),
        }
    }
    Bytes::from(out)
}

/// The message without its empty URL-elicitation ids, or `None` when it
/// has none to remove (or is not JSON).
///
/// Every `input_required` answer comes here, so the usual case does not
/// rebuild the message: it is read into borrowed raw values down to each
/// elicitation's `params`, and the offending member is cut out of the
/// original bytes (a fraction of the instructions of parsing the whole
/// answer into a `Value` and writing it out again). Anything the cut cannot
/// place with certainty — a key written with escapes, a repeated key —
/// takes the slow path through a `Value`.
fn corrected(json: &[u8]) -> Option<Vec<u8>> {
    match empty_id_spans(json) {
        Some(spans) if spans.is_empty() => None,
        Some(spans) => Some(cut(json, &spans)),
        None => rewritten(json),
    }
}

/// The slow path: the whole message through a `Value`.
fn rewritten(json: &[u8]) -> Option<Vec<u8>> {
    let mut value = serde_json::from_slice::<Value>(json).ok()?;
    strip_empty_elicitation_ids(&mut value)
        .then(|| serde_json::to_vec(&value).ok())
        .flatten()
}

/// `json` without the byte ranges in `spans` (sorted, disjoint).
fn cut(json: &[u8], spans: &[Range<usize>]) -> Vec<u8> {
    let removed: usize = spans.iter().map(|s| s.len()).sum();
    let mut out = Vec::with_capacity(json.len() - removed);
    let mut from = 0;
    for span in spans {
        out.extend_from_slice(&json[from..span.start]);
        from = span.end;
    }
    out.extend_from_slice(&json[from..]);
    out
}

/// The parts of a message the correction looks at; serde skips the rest.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    result: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ResultPart<'a> {
    #[serde(rename = "inputRequests", borrow)]
    input_requests: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
}

#[derive(Deserialize)]
struct InputRequest<'a> {
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    mode: Option<Cow<'a, str>>,
    #[serde(rename = "elicitationId", borrow)]
    elicitation_id: Option<&'a RawValue>,
}

/// Where, in `json`, each URL-mode elicitation's `"elicitationId": ""`
/// member is, with the comma that separates it from its neighbours. `None`
/// when the message is not JSON or a member cannot be placed exactly.
fn empty_id_spans(json: &[u8]) -> Option<Vec<Range<usize>>> {
    let message: Message = serde_json::from_slice(json).ok()?;
    let Some(result) = message.result else {
        return Some(Vec::new());
    };
    let part: ResultPart = serde_json::from_str(result.get()).ok()?;
    let mut spans = Vec::new();
    for request in part.input_requests.unwrap_or_default().values() {
        let request: InputRequest = serde_json::from_str(request.get()).ok()?;
        let Some(params) = request.params else {
            continue;
        };
        let params: Params = serde_json::from_str(params.get()).ok()?;
        if params.mode.as_deref() != Some("url") {
            continue;
        }
        if let Some(id) = params.elicitation_id
            && id.get() == r#""""#
        {
            spans.push(member_span(json, id)?);
        }
    }
    spans.sort_by_key(|s| s.start);
    Some(spans)
}

/// The bytes of the object member whose value is `value` (a slice of
/// `json`): from the comma before its key to the end of the value, or, for
/// an object's first member, from its key to the comma after the value.
/// `None` unless the key is written exactly `"elicitationId"`.
fn member_span(json: &[u8], value: &RawValue) -> Option<Range<usize>> {
    const KEY: &[u8] = br#""elicitationId""#;
    let start = (value.get().as_ptr() as usize).checked_sub(json.as_ptr() as usize)?;
    let end = start + value.get().len();
    if end > json.len() {
        return None;
    }
    let before_value = skip_space_back(json, start);
    let colon = before_value.checked_sub(1)?;
    if json[colon] != b':' {
        return None;
    }
    let key_end = skip_space_back(json, colon);
    let key_start = key_end.checked_sub(KEY.len())?;
    if &json[key_start..key_end] != KEY {
        return None;
    }
    let before_key = skip_space_back(json, key_start);
    match json.get(before_key.checked_sub(1)?)? {
        b',' => Some(before_key - 1..end),
        b'{' => {
            let after = skip_space(json, end);
            match json.get(after)? {
                b',' => Some(key_start..skip_space(json, after + 1)),
                b'}' => Some(key_start..end),
                _ => None,
            }
        }
        _ => None,
    }
}

fn skip_space_back(json: &[u8], mut at: usize) -> usize {
    while at > 0 && json[at - 1].is_ascii_whitespace() {
        at -= 1;
    }
    at
}

fn skip_space(json: &[u8], mut at: usize) -> usize {
    while at < json.len() && json[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

fn split_line_ending(s: &str) -> (&str, &str) {
    let trimmed = s.trim_end_matches(['\r', '\n']);
    (trimmed, &s[trimmed.len()..])
}

/// Removes `elicitationId: ""` from URL-mode elicitations in `inputRequests`;
/// whether there was one.
fn strip_empty_elicitation_ids(message: &mut Value) -> bool {
    let Some(requests) = message
        .get_mut("result")
        .and_then(|r| r.get_mut("inputRequests"))
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let mut removed = false;
    for request in requests.values_mut() {
        if let Some(params) = request.get_mut("params").and_then(Value::as_object_mut)
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && params.get("elicitationId").and_then(Value::as_str) == Some("")
        {
            params.remove("elicitationId");
            removed = true;
        }
    }
    removed
}

/// A vectorized search: every JSON response passes here, and comparing
/// each window byte by byte cost ≈5 instructions per byte of the body.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input_required(id: &str) -> Value {
        json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{
            "connect_demo":{"method":"elicitation/create","params":{"mode":"url","url":"https://x/connect?ticket=t","message":"m","elicitationId":id}}
        },"requestState":"s"}})
    }

    #[test]
    fn empty_id_is_removed_from_json() {
        let body = Bytes::from(input_required("").to_string());
        let fixed: Value = serde_json::from_slice(&correct_json(body)).unwrap();
        let params = &fixed["result"]["inputRequests"]["connect_demo"]["params"];
        assert!(params.get("elicitationId").is_none(), "{params}");
        assert_eq!(params["url"], "https://x/connect?ticket=t");
    }

    #[test]
    fn real_id_is_kept_and_clean_bodies_untouched() {
        let body = Bytes::from(input_required("abc").to_string());
        assert_eq!(correct_json(body.clone()), body);
        let other = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(correct_json(other.clone()), other);
    }

    /// What the slow path makes of `body`, for comparison.
    fn through_value(body: &str) -> Value {
        let mut value: Value = serde_json::from_str(body).unwrap();
        strip_empty_elicitation_ids(&mut value);
        value
    }

    fn fixed(body: &str) -> String {
        String::from_utf8(correct_json(Bytes::from(body.to_owned())).to_vec()).unwrap()
    }

    #[test]
    fn the_member_is_cut_from_rmcps_bytes_in_place() {
        // rmcp's order and spacing: everything but the member stays as it was.
        let body = r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"connect_demo":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://x/connect?ticket=t","elicitationId":""}},"connect_github":{"method":"elicitation/create","params":{"mode":"url","elicitationId":"","message":"n","url":"https://x/connect?ticket=u"}}},"requestState":"s"}}"#;
        assert_eq!(empty_id_spans(body.as_bytes()).map(|s| s.len()), Some(2));
        let expected = body
            .replace(r#","elicitationId":"""#, "")
            .replace(r#""elicitationId":"","#, "");
        assert_eq!(fixed(body), expected);
    }

    #[test]
    fn first_member_and_spaced_bodies_are_cut_cleanly() {
        for body in [
            r#"{"result":{"inputRequests":{"a":{"params":{"elicitationId":"","mode":"url","url":"u"}}}}}"#,
            r#"{"result":{"inputRequests":{"a":{"params":{"mode":"url","elicitationId":""}}}}}"#,
            &serde_json::to_string_pretty(&input_required("")).unwrap(),
            r#"{ "result" : { "inputRequests" : { "a" : { "params" : { "mode" : "url" , "elicitationId" :  "" } } } } }"#,
        ] {
            // Past the byte check, which rmcp's compact bodies pass and
            // spaced ones would not.
            let out = corrected(body.as_bytes()).unwrap_or_else(|| panic!("untouched: {body}"));
            let value: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(value, through_value(body), "{body}");
        }
        // No mode: not a URL elicitation, left as it was.
        let no_mode = r#"{"result":{"inputRequests":{"a":{"params":{"elicitationId":""}}}}}"#;
        assert_eq!(fixed(no_mode), no_mode);
    }

    #[test]
    fn a_key_written_with_escapes_takes_the_slow_path() {
        // Serde reads `elicitation\u0049d` as the same key; the cut cannot
        // place it, so the whole message goes through a `Value`.
        let body = r#"{"result":{"inputRequests":{"a":{"params":{"mode":"url","elicitationId":""}},"b":{"params":{"mode":"url","elicitation\u0049d":""}}}}}"#;
        assert_eq!(empty_id_spans(body.as_bytes()), None);
        let value: Value = serde_json::from_str(&fixed(body)).unwrap();
        assert_eq!(value, through_value(body));
        assert!(
            value["result"]["inputRequests"]["b"]["params"]
                .get("elicitationId")
                .is_none()
        );
    }

    #[test]
    fn the_same_bytes_elsewhere_are_left_alone() {
        // A tool's own result may hold such a member; it is the user's data.
        let complete = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","structuredContent":{"elicitationId":""},"content":[{"type":"text","text":"{\"elicitationId\":\"\"}"}]}}"#;
        assert_eq!(fixed(complete), complete);
        let form =
            r#"{"result":{"inputRequests":{"a":{"params":{"mode":"form","elicitationId":""}}}}}"#;
        assert_eq!(fixed(form), form);
        let not_json = r#"{"elicitationId":"" oops"#;
        assert_eq!(fixed(not_json), not_json);
    }

    #[test]
    fn sse_chunks_are_corrected() {
        let chunk = Bytes::from(format!("id: 0\ndata: {}\n\n", input_required("")));
        let fixed = String::from_utf8(correct_sse_chunk(chunk).to_vec()).unwrap();
        assert!(fixed.starts_with("id: 0\ndata: {"), "{fixed}");
        assert!(!fixed.contains("elicitationId"), "{fixed}");
        assert!(fixed.ends_with("\n\n"));
    }
}
