//! Corrections to what goes on the wire, where rmcp's serialization differs
//! from the 2026-07-28 schema.
//!
//! rmcp models a URL elicitation with a mandatory `elicitationId` and writes
//! `"elicitationId": ""` when there is none; 2026-07-28 removed the field
//! (`URLElicitationRequest` in schema.json has no `elicitationId`). Legacy
//! 2025-11-25 responses carry a real, non-empty id and are left alone.

use bytes::Bytes;
use serde_json::Value;

const EMPTY_ID: &[u8] = br#""elicitationId":"""#;

/// Fixes one JSON-RPC response body. Bodies without the offending bytes are
/// returned untouched (no parse on the hot path).
pub fn correct_json(body: Bytes) -> Bytes {
    if !contains(&body, EMPTY_ID) {
        return body;
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(mut value) => {
            strip_empty_elicitation_ids(&mut value);
            serde_json::to_vec(&value).map(Bytes::from).unwrap_or(body)
        }
        Err(_) => body,
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
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match line.strip_prefix("data:") {
            Some(data) => {
                let (json, ending) = split_line_ending(data);
                match serde_json::from_str::<Value>(json.trim_start()) {
                    Ok(mut value) => {
                        strip_empty_elicitation_ids(&mut value);
                        out.push_str("data: ");
                        out.push_str(&value.to_string());
                        out.push_str(ending);
                    }
                    Err(_) => out.push_str(line),
                }
            }
            None => out.push_str(line),
        }
    }
    Bytes::from(out)
}

fn split_line_ending(s: &str) -> (&str, &str) {
    let trimmed = s.trim_end_matches(['\r', '\n']);
    (trimmed, &s[trimmed.len()..])
}

/// Removes `elicitationId: ""` from URL-mode elicitations in `inputRequests`.
pub fn strip_empty_elicitation_ids(message: &mut Value) {
    let Some(requests) = message
        .get_mut("result")
        .and_then(|r| r.get_mut("inputRequests"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for request in requests.values_mut() {
        if let Some(params) = request.get_mut("params").and_then(Value::as_object_mut)
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && params.get("elicitationId").and_then(Value::as_str) == Some("")
        {
            params.remove("elicitationId");
        }
    }
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

    #[test]
    fn sse_chunks_are_corrected() {
        let chunk = Bytes::from(format!("id: 0\ndata: {}\n\n", input_required("")));
        let fixed = String::from_utf8(correct_sse_chunk(chunk).to_vec()).unwrap();
        assert!(fixed.starts_with("id: 0\ndata: {"), "{fixed}");
        assert!(!fixed.contains("elicitationId"), "{fixed}");
        assert!(fixed.ends_with("\n\n"));
    }
}
