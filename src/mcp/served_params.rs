//! Params that do not fit a method this server serves are invalid params
//! (`-32602`), whatever rmcp makes of them. rmcp reads a request into one
//! untagged enum of every method it knows: params that do not fit their
//! method's type make it fall through to a custom request, which the
//! handler answers `-32601` (HTTP 404), and a client reads that as "this
//! server has no such method" (no resources at all, say). Optional params
//! that do not fit are read as none instead. This reads the params into
//! the type rmcp reads them into and names the first one that does not
//! fit: before rmcp for the few methods whose misfits cannot be told
//! afterwards ([`before_rmcp`]), else only once rmcp answered 404
//! ([`after_not_found`]), so that it costs other requests nothing.

use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, ReadResourceRequestParams};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

/// The longest part of a client's request (a path through its map keys)
/// that a problem repeats.
const MAX_ECHO: usize = 64;

/// Methods whose params are small enough to read in full before rmcp
/// sees them, because its answer to their misfits cannot be told from a
/// good one afterwards: for legacy clients it is an HTTP 200 with -32601,
/// and the list methods' params are optional, so rmcp takes params that do
/// not fit for none at all (a `cursor` of 5 gets the first page; a bad
/// cursor is invalid params, and so is any cursor here: we issue none). `tools/call` has its own cheaper pass
/// (`envelope`): its arguments may be large.
const READ_BEFORE_RMCP: &[&str] = &[
    "resources/read",
    "tools/list",
    "resources/list",
    "resources/templates/list",
];

/// A request for a served method whose params did not parse.
pub(super) struct Unparsed {
    /// The request's id, to answer it.
    pub id: Value,
    /// What is wrong, without the client's values.
    pub problem: String,
}

/// What became of a method's params.
enum Verdict {
    /// Not a method this server serves: a -32601 for it stands.
    NotServed,
    Fit,
    Misfit(String),
}

#[derive(Deserialize)]
struct Raw {
    id: Option<Value>,
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

/// For a body rmcp answered 404 ("method not found"): the params problem,
/// if it is a request (not a notification) for a method this server serves.
pub(super) fn after_not_found(body: &[u8]) -> Option<Unparsed> {
    let raw: Raw = serde_json::from_slice(body).ok()?;
    let id = raw.id?;
    let problem = match verdict(&raw.method, raw.params) {
        Verdict::NotServed => return None,
        Verdict::Misfit(problem) => problem,
        // rmcp refused what reads here: it still was no unknown method.
        Verdict::Fit => "params do not fit the method".to_owned(),
    };
    Some(Unparsed { id, problem })
}

/// For a body about to go to rmcp, of a request for `method` (its JSON-RPC
/// method, or the one its `Mcp-Method` header names): the params problem
/// rmcp would not answer as one, for the methods in [`READ_BEFORE_RMCP`].
/// With the `headers` rmcp holds a 2026-07-28 request to: none where they
/// disagree with the body, whose answer is rmcp's header mismatch
/// (-32020, which the transport requires first), not the params'.
pub(super) fn before_rmcp(
    method: &str,
    body: &[u8],
    headers: Option<&http::HeaderMap>,
) -> Option<Unparsed> {
    if !READ_BEFORE_RMCP.contains(&method) {
        return None;
    }
    let raw: Raw = serde_json::from_slice(body).ok()?;
    // A header that names another method than the body's is rmcp's to
    // refuse (-32020).
    if raw.method != method {
        return None;
    }
    if let Some(headers) = headers
        && !(name_header_agrees(headers, method, raw.params.as_ref())
            && version_header_agrees(headers, raw.params.as_ref()))
    {
        return None;
    }
    let id = raw.id?;
    match verdict(&raw.method, raw.params) {
        Verdict::Misfit(problem) => Some(Unparsed { id, problem }),
        Verdict::NotServed | Verdict::Fit => None,
    }
}

/// Whether a 2026-07-28 request's `Mcp-Name` header names what its body
/// does, as rmcp will check it, for the one method read before rmcp that
/// carries a name (`resources/read`, by its URI). When it does not, the
/// answer is rmcp's header mismatch (-32020, which the transport requires),
/// not a refusal of the params.
fn name_header_agrees(headers: &http::HeaderMap, method: &str, params: Option<&Value>) -> bool {
    use rmcp::transport::common::http_header::{
        BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX, HEADER_MCP_NAME,
    };
    if method != "resources/read" {
        return true;
    }
    // A URI that is not a string is not compared by rmcp either: the
    // params are what is wrong.
    let Some(uri) = params.and_then(|p| p.get("uri")?.as_str()) else {
        return true;
    };
    let mut values = headers.get_all(HEADER_MCP_NAME).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    match value
        .strip_prefix(BASE64_HEADER_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_HEADER_SUFFIX))
    {
        Some(encoded) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .is_ok_and(|decoded| decoded == uri.as_bytes())
        }
        None => value == uri,
    }
}

/// Whether the version a request's `_meta` names is its
/// `MCP-Protocol-Version` header's, as rmcp will check it. `_meta` without
/// a version is rmcp's to refuse as well (-32602, as the params would be).
fn version_header_agrees(headers: &http::HeaderMap, params: Option<&Value>) -> bool {
    use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
    let Some(named) = params.and_then(|p| {
        p.get("_meta")?
            .get("io.modelcontextprotocol/protocolVersion")?
            .as_str()
    }) else {
        return true;
    };
    headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|header| header == named)
}

fn verdict(method: &str, params: Option<Value>) -> Verdict {
    // The methods of the capabilities `server::server_config` declares
    // (tools, resources), and those every server answers. `ping` takes
    // whatever params come, so it cannot end here.
    let misfit = match method {
        "tools/call" => required::<CallToolRequestParams>(params),
        "resources/read" => required::<ReadResourceRequestParams>(params),
        "tools/list" | "resources/list" | "resources/templates/list" => {
            let cursor = params
                .as_ref()
                .and_then(|p| p.get("cursor"))
                .is_some_and(|c| !c.is_null());
            optional::<PaginatedRequestParams>(params).or_else(|| cursor.then(not_our_cursor))
        }
        // rmcp takes any fields here beside `_meta`.
        "server/discover" => optional::<serde_json::Map<String, Value>>(params),
        // Not `initialize`: 2026-07-28 removed it, and its 404 is a removed
        // method's (a 2025-11-25 client's mistyped one rmcp answers itself).
        _ => return Verdict::NotServed,
    };
    misfit.map_or(Verdict::Fit, Verdict::Misfit)
}

/// Every list here is one page, with no `nextCursor`: any cursor is one
/// this server never issued, which the MCP pagination rules answer as
/// invalid params (a client would otherwise take the first page again
/// for the page it asked for).
fn not_our_cursor() -> String {
    "params.cursor is not a cursor this server issued: every list is one page, with no nextCursor"
        .to_owned()
}

fn required<P: DeserializeOwned>(params: Option<Value>) -> Option<String> {
    match params {
        None | Some(Value::Null) => Some("params are missing".to_owned()),
        Some(params) => first_misfit::<P>(params),
    }
}

fn optional<P: DeserializeOwned>(params: Option<Value>) -> Option<String> {
    match params {
        None | Some(Value::Null) => None,
        Some(params) => first_misfit::<P>(params),
    }
}

/// The first param of `params` that `P` does not take, said as
/// `params.<path> must be …`. `_meta` is read apart from the rest, as rmcp
/// reads it.
fn first_misfit<P: DeserializeOwned>(params: Value) -> Option<String> {
    let Value::Object(mut params) = params else {
        return Some("params must be an object".to_owned());
    };
    match params.remove("_meta") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(_) => return Some("params._meta must be an object".to_owned()),
    }
    let e = serde_path_to_error::deserialize::<_, P>(Value::Object(params)).err()?;
    let path = e.path().to_string();
    let at = match path.as_str() {
        "." => "params".to_owned(),
        path => format!("params.{}", shortened(path)),
    };
    Some(said_without_values(&at, &e.into_inner().to_string()))
}

/// serde's complaint about `at`, keeping only what the server's own types
/// say: the field that is missing, or what was expected; never the value
/// the client sent.
fn said_without_values(at: &str, complaint: &str) -> String {
    if let Some(field) = complaint.strip_prefix("missing field ") {
        return format!("{at}: missing field {field}");
    }
    if complaint.starts_with("unknown field") {
        return format!("{at} has a field it does not take");
    }
    match complaint.split_once(", expected ") {
        Some((_, expected)) => format!("{at} must be {expected}"),
        None => format!("{at} is not valid"),
    }
}

/// `path` cut to [`MAX_ECHO`] bytes on a character boundary: its map keys
/// are the client's.
fn shortened(path: &str) -> String {
    if path.len() <= MAX_ECHO {
        return path.to_owned();
    }
    let end = (0..=MAX_ECHO)
        .rev()
        .find(|&i| path.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &path[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem_of(method: &str, params: Value) -> Option<String> {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        after_not_found(body.to_string().as_bytes()).map(|u| {
            assert_eq!(u.id, 7);
            u.problem
        })
    }

    #[test]
    fn names_the_param_and_what_it_must_be() {
        let uri = "connection://demo/profile";
        assert_eq!(
            problem_of("resources/read", json!({"uri": uri, "requestState": 5})).as_deref(),
            Some("params.requestState must be a string")
        );
        assert_eq!(
            problem_of("resources/read", json!({"uri": uri, "inputResponses": []})).as_deref(),
            Some("params.inputResponses must be a map")
        );
        assert_eq!(
            problem_of("resources/read", json!({"_meta": {}})).as_deref(),
            Some("params: missing field `uri`")
        );
        assert_eq!(
            problem_of("tools/list", json!({"cursor": 5})).as_deref(),
            Some("params.cursor must be a string")
        );
        assert_eq!(
            problem_of("resources/templates/list", json!([])).as_deref(),
            Some("params must be an object")
        );
        assert_eq!(
            problem_of("tools/list", json!({"_meta": "x"})).as_deref(),
            Some("params._meta must be an object")
        );
    }

    #[test]
    fn never_repeats_the_clients_values() {
        let secret = "s".repeat(500);
        for params in [
            json!({"uri": "connection://demo/profile", "requestState": [secret.clone()]}),
            json!({"uri": "connection://demo/profile", "inputResponses": {secret.clone(): 5}}),
            json!({"uri": {secret.clone(): 1}}),
        ] {
            let problem = problem_of("resources/read", params).unwrap();
            assert!(problem.len() < 2 * MAX_ECHO, "{problem}");
        }
    }

    #[test]
    fn leaves_unserved_methods_and_notifications_alone() {
        assert_eq!(problem_of("prompts/get", json!({"name": 5})), None);
        assert_eq!(problem_of("tools/nope", json!({})), None);
        let notification = json!({"jsonrpc": "2.0", "method": "tools/list", "params": 5});
        assert!(after_not_found(notification.to_string().as_bytes()).is_none());
    }

    #[test]
    fn before_rmcp_only_misfits_of_small_params_are_refused() {
        let before = |body: Value| {
            let method = body["method"].as_str().unwrap_or_default().to_owned();
            before_rmcp(&method, body.to_string().as_bytes(), None).map(|u| u.problem)
        };
        let read = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": params});
        assert_eq!(
            before(read(
                json!({"uri": "connections://mine", "requestState": 5})
            ))
            .as_deref(),
            Some("params.requestState must be a string")
        );
        assert_eq!(before(read(json!({"uri": "connections://mine"}))), None);
        // List params may be absent, or null.
        assert_eq!(
            before(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
            None
        );
        let null = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": null});
        assert_eq!(before(null), None);
        // We issue no cursors: a string one is never ours; a null one is none.
        let list = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "resources/templates/list", "params": params});
        assert!(
            before(list(json!({"cursor": "page-2"})))
                .is_some_and(|p| p.starts_with("params.cursor is not a cursor this server issued"))
        );
        assert_eq!(before(list(json!({"cursor": null}))), None);
        // tools/call is envelope's; initialize is rmcp's.
        let call =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}});
        assert_eq!(before(call), None);
    }

    #[test]
    fn a_refused_request_whose_params_fit_is_still_no_unknown_method() {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        assert_eq!(
            after_not_found(body.to_string().as_bytes()).map(|u| u.problem),
            Some("params do not fit the method".to_owned())
        );
    }

    #[test]
    fn the_name_header_is_compared_with_the_uri_as_rmcp_does() {
        let uri = "connection://demo/profile";
        let params = json!({"uri": uri});
        let with = |values: &[&str]| {
            let mut headers = http::HeaderMap::new();
            for v in values {
                headers.append("Mcp-Name", http::HeaderValue::from_str(v).unwrap());
            }
            name_header_agrees(&headers, "resources/read", Some(&params))
        };
        use base64::Engine;
        let encoded = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(uri)
        );
        assert!(with(&[uri]));
        assert!(with(&[&encoded]));
        assert!(!with(&[]));
        assert!(!with(&["connection://demo/other"]));
        assert!(!with(&[uri, uri]));
        assert!(!with(&["=?base64?!!?="]));
        // Other methods, and a URI that is no string, are not compared.
        assert!(name_header_agrees(
            &http::HeaderMap::new(),
            "tools/list",
            Some(&params)
        ));
        assert!(name_header_agrees(
            &http::HeaderMap::new(),
            "resources/read",
            Some(&json!({"uri": 5}))
        ));
    }

    #[test]
    fn params_are_judged_before_rmcp_only_where_the_headers_agree_with_the_body() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "MCP-Protocol-Version",
            http::HeaderValue::from_static("2026-07-28"),
        );
        let list = |version: &str| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": 5,
                "_meta": {"io.modelcontextprotocol/protocolVersion": version}}})
            .to_string()
        };
        let before = |body: &str| before_rmcp("tools/list", body.as_bytes(), Some(&headers));
        assert_eq!(
            before(&list("2026-07-28")).map(|u| u.problem).as_deref(),
            Some("params.cursor must be a string")
        );
        // Another version in `_meta`: rmcp's -32020, not the cursor's -32602.
        assert!(before(&list("2025-11-25")).is_none());
        // Without the header's knowledge (a legacy request), the params.
        assert!(before_rmcp("tools/list", list("2025-11-25").as_bytes(), None).is_some());
        // A read whose URI the name header does not name: rmcp's too.
        let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": "connection://demo/profile", "requestState": 5}})
        .to_string();
        assert!(before_rmcp("resources/read", read.as_bytes(), Some(&headers)).is_none());
    }
}
