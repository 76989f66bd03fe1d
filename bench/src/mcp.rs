//! The MCP requests of the scenarios, built once per worker, and the check
//! of every answer: each request is a real 2026-07-28 request (routing
//! headers, `_meta` with protocol version and client capabilities, bearer
//! token) and each answer must be the right one — anything else is an error.

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

use crate::client::Reply;

pub const PROTOCOL: &str = "2026-07-28";

/// A ready-to-send MCP request; cheap to turn into an `http::Request` again
/// and again.
#[derive(Clone)]
pub struct Prepared {
    method: http::HeaderValue,
    name: Option<http::HeaderValue>,
    authorization: http::HeaderValue,
    body: Bytes,
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "url": {} } },
    })
}

impl Prepared {
    fn new(token: &str, method: &str, name: Option<&str>, params: Value) -> anyhow::Result<Self> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        Ok(Self {
            method: http::HeaderValue::from_str(method)?,
            name: name.map(http::HeaderValue::from_str).transpose()?,
            authorization: http::HeaderValue::from_str(&format!("Bearer {token}"))?,
            body: Bytes::from(serde_json::to_vec(&body)?),
        })
    }

    /// `server/discover`.
    pub fn discover(token: &str) -> anyhow::Result<Self> {
        Self::new(token, "server/discover", None, json!({ "_meta": meta() }))
    }

    /// A first `tools/call` (no state).
    pub fn call(token: &str, tool: &str, arguments: Value) -> anyhow::Result<Self> {
        let params = json!({ "name": tool, "arguments": arguments, "_meta": meta() });
        Self::new(token, "tools/call", Some(tool), params)
    }

    /// The retry of a `tools/call` after the user accepted `key`.
    pub fn retry(
        token: &str,
        tool: &str,
        arguments: Value,
        state: &str,
        key: &str,
    ) -> anyhow::Result<Self> {
        let params = json!({
            "name": tool,
            "arguments": arguments,
            "requestState": state,
            "inputResponses": { key: { "action": "accept" } },
            "_meta": meta(),
        });
        Self::new(token, "tools/call", Some(tool), params)
    }

    pub fn request(&self) -> http::Request<Full<Bytes>> {
        let mut request = http::Request::new(Full::new(self.body.clone()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from_static("/mcp");
        let headers = request.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        headers.insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            "mcp-protocol-version",
            http::HeaderValue::from_static(PROTOCOL),
        );
        headers.insert("mcp-method", self.method.clone());
        if let Some(name) = &self.name {
            headers.insert("mcp-name", name.clone());
        }
        headers.insert(http::header::AUTHORIZATION, self.authorization.clone());
        request
    }
}

/// What a scenario's answer must be.
#[derive(Clone, Debug)]
pub enum Expect {
    /// `server/discover` listing 2026-07-28.
    Discover,
    /// `input_required` with a URL elicitation `key` to `<base>/connect?ticket=`.
    InputRequired { key: String, url_prefix: String },
    /// `complete`, not an error, `structuredContent.account == account`.
    Complete { account: String },
}

/// The JSON-RPC message of an answer (JSON, or the last SSE `data:` line).
pub fn message(reply: &Reply) -> Result<Value, String> {
    if reply.status != 200 {
        return Err(format!("HTTP {}: {}", reply.status, clip(&reply.text())));
    }
    let sse = reply
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let parsed = if sse {
        let text = reply.text();
        let last = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("null")
            .to_owned();
        serde_json::from_str(&last)
    } else {
        serde_json::from_slice(&reply.body)
    };
    parsed.map_err(|e| format!("not JSON ({e}): {}", clip(&reply.text())))
}

pub fn check(reply: &Reply, expect: &Expect) -> Result<Value, String> {
    let message = message(reply)?;
    let result = &message["result"];
    let wrong = |what: &str| format!("{what}: {}", clip(&message.to_string()));
    if result.is_null() {
        return Err(wrong("no result"));
    }
    if result["_meta"]["io.modelcontextprotocol/serverInfo"].is_null() {
        return Err(wrong("result without _meta serverInfo"));
    }
    match expect {
        Expect::Discover => {
            let listed = result["supportedVersions"]
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v == PROTOCOL));
            if result["resultType"] != "complete" || !listed {
                return Err(wrong("discover does not list 2026-07-28"));
            }
        }
        Expect::InputRequired { key, url_prefix } => {
            let params = &result["inputRequests"][key]["params"];
            let url_ok = params["url"]
                .as_str()
                .is_some_and(|u| u.starts_with(url_prefix.as_str()) && u.len() > url_prefix.len());
            let state_ok = result["requestState"]
                .as_str()
                .is_some_and(|s| !s.is_empty());
            if result["resultType"] != "input_required"
                || params["mode"] != "url"
                || !url_ok
                || !state_ok
            {
                return Err(wrong("not the URL elicitation expected"));
            }
        }
        Expect::Complete { account } => {
            if result["resultType"] != "complete"
                || result["isError"] == true
                || result["structuredContent"]["account"] != account.as_str()
            {
                return Err(wrong("not the completed result expected"));
            }
        }
    }
    Ok(message)
}

/// The URL and `requestState` of an `input_required` answer.
pub fn elicitation(message: &Value, key: &str) -> Option<(String, String)> {
    let result = &message["result"];
    let url = result["inputRequests"][key]["params"]["url"].as_str()?;
    let state = result["requestState"].as_str()?;
    Some((url.to_owned(), state.to_owned()))
}

/// Error texts stay short in the report.
pub fn clip(s: &str) -> String {
    const MAX: usize = 240;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
