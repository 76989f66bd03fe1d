//! actix-web ⇄ rmcp. Checks what must be checked before rmcp sees the
//! request (Origin, Host, body size, the bearer token, the protocol
//! version a request is made under), turns the actix
//! request into an `http::Request` carrying the caller's [`Principal`], and
//! copies rmcp's response back: sized bodies collected (and their wire form
//! corrected, see [`super::wire`]), unsized ones (SSE) streamed.

// The helpers below return the finished refusal as their error; boxing it
// would buy nothing on this path.
#![allow(clippy::result_large_err)]

use actix_web::{
    HttpRequest, HttpResponse,
    body::{BodyStream, BoxBody as ActixBody},
    http::StatusCode,
    web,
};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use serde_json::json;

use super::{
    McpEndpoint,
    access_log::RequestFacts,
    envelope::{self, Envelope},
    protocol_version, served_params, wire,
};
use crate::{
    auth::{self, AuthError, Principal},
    state::AppState,
};

pub async fn handle(req: HttpRequest, payload: web::Payload) -> HttpResponse {
    // Borrowed from the app's data rather than extracted: an extractor
    // clones each `Arc`, and its count is a cache line every worker
    // writes, twice per request.
    let (Some(state), Some(endpoint)) = (
        req.app_data::<web::Data<AppState>>(),
        req.app_data::<web::Data<McpEndpoint>>(),
    ) else {
        tracing::error!("mcp: the application's state is not configured");
        return HttpResponse::InternalServerError().finish();
    };
    let mut facts = RequestFacts::new(req.method().as_str(), state.client_address(&req));
    let mut response = serve(&req, payload, state, endpoint, &mut facts).await;
    facts.write(response.status().as_u16(), &state.metrics.mcp);
    state.close_connection_if_stopping(response.head_mut());
    response
}

async fn serve(
    req: &HttpRequest,
    mut payload: web::Payload,
    state: &AppState,
    endpoint: &McpEndpoint,
    facts: &mut RequestFacts,
) -> HttpResponse {
    let head = match request_head(req) {
        Ok(head) => head,
        Err(response) => return response,
    };
    if let Err(response) = check_origin(&head.headers, state) {
        return response;
    }
    if let Err(response) = endpoint.hosts.check(&head) {
        return response;
    }
    let principal = match authenticate(&head, state).await {
        // Shared by the log line and the handler (and with the cache of
        // recently verified tokens): nothing of it is copied.
        Ok(p) => p,
        Err(response) => return response,
    };
    facts.caller = Some(principal.clone());

    // actix's payload is not `Send`; buffer it (bounded) before handing over.
    let limit = state.settings.max_body_bytes;
    if head
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|len| len > limit)
    {
        return too_large(limit);
    }
    // A client dripping its body must not hold the socket (and a worker's
    // attention) for ever.
    let read = tokio::time::timeout(
        state.settings.body_read_timeout(),
        read_body(&mut payload, limit),
    )
    .await;
    let body = match read {
        Ok(Ok(body)) => body,
        Ok(Err(response)) => return response,
        Err(_) => {
            tracing::info!("mcp: request body not received in time");
            return jsonrpc_error(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                "Request body not received in time",
            );
        }
    };

    // JSON-RPC wants a parse error (-32700) for a body that is not JSON;
    // rmcp answers every undecodable body with 415, and a request with
    // mistyped params with -32601 (HTTP 404, or 200 for legacy clients).
    // A syntax-only pass tells them apart. A 2026-07-28 request names its
    // method in `Mcp-Method`, and rmcp refuses one whose header and body
    // disagree: such a request reaches rmcp first, and the pass runs only
    // when rmcp did not answer 200 — a second reading of every body spared
    // where nothing is wrong with it. Only the small params of a few
    // methods are read first anyway (`served_params::before_rmcp`): rmcp
    // would answer their misfits as if nothing were wrong.
    let is_post = head.method == http::Method::POST;
    let routing = if is_post {
        routing(&head.headers)
    } else {
        Routing::Unchecked
    };
    let routed = match &routing {
        Routing::Named(method) => Some(method.as_str()),
        Routing::Unchecked | Routing::Unnamed => None,
    };
    let body = body.freeze();
    if is_post
        && let Some(refused) =
            protocol_version::refusal(&head.headers, &body, |method| facts.set_method(method))
    {
        return refused;
    }
    // A 2026-07-28 request without its one `Mcp-Method` is rmcp's to
    // refuse (-32020) before anything its body gets wrong.
    if is_post
        && matches!(routing, Routing::Unchecked)
        && let Err(refused) = check_body(&body, facts)
    {
        return refused;
    }
    if let Some(method) = routed
        && let Some(unparsed) = served_params::before_rmcp(method, &body, Some(&head.headers))
    {
        facts.set_method(method);
        return refused_params(unparsed);
    }
    let sent_json = head
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
        });

    let mut request = http::Request::from_parts(head, Full::new(body.clone()));
    request.extensions_mut().insert(principal);
    request.extensions_mut().insert(facts.record.clone());
    let response = endpoint.service().handle(request).await;
    if matches!(routing, Routing::Unnamed) {
        let answered = response.status() == http::StatusCode::OK
            || (response.status() == http::StatusCode::BAD_REQUEST && is_json(response.headers()));
        if answered {
            // Served (an `initialize`, which needs no `Mcp-Method`), or
            // refused for its headers: the log names the body's method.
            if let Envelope::Json(Some(method)) | Envelope::InvalidParams { method, .. } =
                envelope::inspect(&body)
            {
                facts.set_method(&method);
            }
        } else if let Err(refused) = check_body(&body, facts) {
            // Not refused for its headers after all: what the body gets wrong.
            return refused;
        }
    }
    if let Some(method) = routed {
        if response.status() == http::StatusCode::OK {
            // A request rmcp answered: it held the body to the header.
            facts.set_method(method);
        } else if response.status() == http::StatusCode::BAD_REQUEST && is_json(response.headers())
        {
            // rmcp's own JSON-RPC refusal of the headers (-32020: the
            // transport says it MUST be that code) or of `_meta`: exact
            // already, and not to be replaced by what the params say. The
            // log names the body's method, not the header's.
            if let Envelope::Json(Some(method)) | Envelope::InvalidParams { method, .. } =
                envelope::inspect(&body)
            {
                facts.set_method(&method);
            }
        } else if let Err(refused) = check_body(&body, facts) {
            return refused;
        }
    }
    // rmcp's 404 is its "method not found"; for a method this server
    // serves, it means the params did not parse.
    if response.status() == http::StatusCode::NOT_FOUND
        && let Some(unparsed) = served_params::after_not_found(&body)
    {
        return refused_params(unparsed);
    }
    if sent_json && response.status() == http::StatusCode::UNSUPPORTED_MEDIA_TYPE {
        // Valid JSON, right media type, still refused: not a JSON-RPC message.
        tracing::info!("mcp: request is not a valid JSON-RPC message");
        return jsonrpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: not a valid JSON-RPC message",
        );
    }
    let mut response = into_actix(response).await;
    if let Some(retry_after_secs) = facts.record.unavailable() {
        // Retryable, and said so in HTTP terms too (proxies, load balancers).
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        response.headers_mut().insert(
            actix_web::http::header::RETRY_AFTER,
            actix_web::http::header::HeaderValue::from(retry_after_secs),
        );
    }
    response
}

/// How rmcp will hold a POSTed request to its headers.
enum Routing {
    /// An earlier version, or none: the headers are not checked.
    Unchecked,
    /// 2026-07-28, naming its method in its one `Mcp-Method` header.
    Named(String),
    /// 2026-07-28 with no `Mcp-Method`, or more than one, or one that is
    /// not text: refused for its headers (-32020), which the transport
    /// says comes first.
    Unnamed,
}

/// The [`Routing`] of a request by its headers, when its
/// `MCP-Protocol-Version` makes rmcp hold the body to them (the same test
/// as rmcp's).
fn routing(headers: &http::HeaderMap) -> Routing {
    use rmcp::transport::common::http_header::{HEADER_MCP_METHOD, HEADER_MCP_PROTOCOL_VERSION};
    let standard = rmcp::model::ProtocolVersion::STANDARD_HEADERS;
    let modern = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= standard.as_str());
    if !modern {
        return Routing::Unchecked;
    }
    let mut values = headers.get_all(HEADER_MCP_METHOD).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => match value.to_str() {
            Ok(method) => Routing::Named(method.to_owned()),
            Err(_) => Routing::Unnamed,
        },
        _ => Routing::Unnamed,
    }
}

/// The syntax pass over a POSTed body: its method for the log line, or the
/// JSON-RPC error for a body that is not JSON or a request whose params
/// have the wrong types (`tools/call`'s by `envelope`, the small params of
/// other served methods by `served_params`).
fn check_body(body: &[u8], facts: &mut RequestFacts) -> Result<(), HttpResponse> {
    match envelope::inspect(body) {
        Envelope::NotJson => {
            tracing::info!("mcp: request body is not JSON");
            Err(jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                "Parse error: the body is not valid JSON",
            ))
        }
        Envelope::Json(None) => Ok(()),
        Envelope::Json(Some(method)) => {
            facts.set_method(&method);
            match served_params::before_rmcp(&method, body, None) {
                Some(unparsed) => Err(refused_params(unparsed)),
                None => Ok(()),
            }
        }
        Envelope::InvalidParams {
            id,
            method,
            problem,
        } => {
            facts.set_method(&method);
            tracing::info!(problem, "mcp: invalid params");
            Err(invalid_params(id, problem))
        }
    }
}

/// [`invalid_params`] for what `served_params` found.
fn refused_params(unparsed: served_params::Unparsed) -> HttpResponse {
    tracing::info!(problem = %unparsed.problem, "mcp: invalid params");
    invalid_params(unparsed.id, &unparsed.problem)
}

/// `-32602` for request `id`, at HTTP 400 as for any other malformed
/// request. An id that is neither a string nor an integer is not a
/// request's (`RequestId`): that is an invalid request, answered without
/// one.
fn invalid_params(id: serde_json::Value, problem: &str) -> HttpResponse {
    if !is_request_id(&id) {
        return invalid_request_id();
    }
    HttpResponse::BadRequest().json(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": -32602, "message": format!("Invalid params: {problem}") },
    }))
}

/// The body, up to `limit` bytes.
async fn read_body(
    payload: &mut web::Payload,
    limit: usize,
) -> Result<web::BytesMut, HttpResponse> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        match chunk {
            Ok(chunk) if body.len() + chunk.len() <= limit => body.extend_from_slice(&chunk),
            Ok(_) => return Err(too_large(limit)),
            Err(e) => {
                tracing::info!(error = %e, "mcp: request body could not be read");
                return Err(jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    -32700,
                    "Parse error: unreadable body",
                ));
            }
        }
    }
    Ok(body)
}

/// The actix request head as an `http` 1.x head (actix-web 4 is on `http`
/// 0.2), with an absolute URI: rmcp reads the authority for its Host check.
pub fn request_head(req: &HttpRequest) -> Result<http::request::Parts, HttpResponse> {
    let bad = |what: &str| {
        tracing::info!(what, "mcp: request head could not be converted");
        jsonrpc_error(StatusCode::BAD_REQUEST, -32600, "Invalid request")
    };
    let method =
        http::Method::from_bytes(req.method().as_str().as_bytes()).map_err(|_| bad("method"))?;
    // The Host header itself, never X-Forwarded-Host: that one is the
    // client's to choose and would defeat the DNS-rebinding check.
    let host = req
        .headers()
        .get(actix_web::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default()
        .to_owned();
    let path = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let uri: http::Uri = format!("http://{host}{path}")
        .parse()
        .map_err(|_| bad("uri"))?;
    let mut builder = http::Request::builder().method(method).uri(uri);
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    builder
        .body(())
        .map(|r| r.into_parts().0)
        .map_err(|_| bad("headers"))
}

async fn authenticate(
    head: &http::request::Parts,
    state: &AppState,
) -> Result<Arc<Principal>, HttpResponse> {
    // Only refusals name the metadata URL: build it only for them.
    let metadata_url = || auth::resource_metadata_url(&state.settings);
    if query_carries_token(head.uri.query().unwrap_or_default()) {
        tracing::info!("mcp: rejected an access token in the query string");
        return Err(HttpResponse::BadRequest()
            .insert_header(("WWW-Authenticate", format!(r#"Bearer resource_metadata="{}", error="invalid_request", error_description="send the token in the Authorization header""#, metadata_url())))
            .json(json!({"error": "invalid_request", "error_description": "Access tokens are accepted only in the Authorization header."})));
    }
    let unauthorized = |error: Option<&AuthError>| {
        HttpResponse::Unauthorized()
            .insert_header((
                "WWW-Authenticate",
                auth::www_authenticate(
                    &metadata_url(),
                    &state.settings.auth.scopes_supported,
                    error,
                ),
            ))
            .json(json!({
                "error": if error.is_some() { "invalid_token" } else { "unauthorized" },
                "error_description": "A valid bearer token for this MCP server is required.",
            }))
    };
    let token = match auth::bearer_token(&head.headers) {
        Ok(Some(token)) => token,
        Ok(None) => return Err(unauthorized(None)),
        Err(e) => {
            // RFC 6750 §3.1: a malformed request is 400 invalid_request.
            tracing::info!(reason = %e, "mcp: malformed Authorization header");
            return Err(HttpResponse::BadRequest()
                .insert_header(("WWW-Authenticate", auth::www_authenticate(&metadata_url(), &state.settings.auth.scopes_supported, Some(&e))))
                .json(json!({"error": "invalid_request", "error_description": "The Authorization header is malformed."})));
        }
    };
    let principal = state.verifier.verify(token).await.map_err(|e| {
        if e.is_unavailable() {
            // The issuer is down: not the token's fault, and a 401 would send
            // clients into a pointless new login.
            tracing::warn!(reason = %e, "mcp: cannot check tokens right now");
            return HttpResponse::ServiceUnavailable()
                .insert_header(("Retry-After", "5"))
                .json(json!({"error": "temporarily_unavailable", "error_description": "Token validation is temporarily unavailable."}));
        }
        tracing::info!(reason = %e, "mcp: bearer token rejected");
        unauthorized(Some(&e))
    })?;
    let required = &state.settings.auth.required_scopes;
    let missing = principal.missing_scopes(required);
    if !missing.is_empty() {
        // Scopes are the operator's configured names, not the token's.
        tracing::info!(missing = %missing.join(" "), client = %crate::crypto::printable_prefix(&principal.client_id), "mcp: token lacks a required scope");
        return Err(HttpResponse::Forbidden()
            .insert_header((
                "WWW-Authenticate",
                auth::insufficient_scope_challenge(&metadata_url(), required),
            ))
            .json(json!({
                "error": "insufficient_scope",
                "error_description": format!("The access token must carry the scopes: {}.", required.join(" ")),
            })));
    }
    Ok(principal)
}

fn query_carries_token(query: &str) -> bool {
    url::form_urlencoded::parse(query.as_bytes())
        .any(|(k, _)| k.eq_ignore_ascii_case("access_token"))
}

/// Origin before authentication: a browser page on another origin learns
/// nothing, not even whether its token would have worked.
fn check_origin(headers: &http::HeaderMap, state: &AppState) -> Result<(), HttpResponse> {
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return Ok(());
    };
    let allowed = origin.to_str().is_ok_and(|origin| {
        state
            .settings
            .effective_allowed_origins()
            .iter()
            .any(|a| a.eq_ignore_ascii_case(origin))
    });
    if allowed {
        Ok(())
    } else {
        tracing::warn!(
            origin = %crate::crypto::printable_prefix(&String::from_utf8_lossy(origin.as_bytes())),
            "mcp: rejected a request from a disallowed Origin"
        );
        Err(jsonrpc_error(
            StatusCode::FORBIDDEN,
            -32600,
            "Forbidden: Origin not allowed",
        ))
    }
}

fn too_large(limit: usize) -> HttpResponse {
    tracing::info!(limit, "mcp: request body over the limit");
    jsonrpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        -32600,
        &format!("Request body exceeds {limit} bytes"),
    )
}

/// Whether `id` can be a request's (`RequestId`: a string or an integer).
pub(super) fn is_request_id(id: &serde_json::Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// The answer to a request whose id is not a `RequestId`: JSON-RPC's
/// invalid request, without an id (there is none to repeat).
pub(super) fn invalid_request_id() -> HttpResponse {
    tracing::info!("mcp: request id is neither a string nor an integer");
    jsonrpc_error(
        StatusCode::BAD_REQUEST,
        -32600,
        "Invalid Request: the id must be a string or an integer",
    )
}

/// An error for a request whose id was not read (or cannot be trusted):
/// the schema's `JSONRPCErrorResponse` then has no `id` at all (`null` is
/// not a `RequestId`).
fn jsonrpc_error(status: StatusCode, code: i32, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(json!({
        "jsonrpc": "2.0",
        "error": { "code": code, "message": message },
    }))
}

/// Whether rmcp's response is a JSON body.
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

pub async fn into_actix(
    response: http::Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>>,
) -> HttpResponse {
    let (parts, body) = response.into_parts();
    let status =
        StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut out = HttpResponse::build(status);
    for (name, value) in &parts.headers {
        out.append_header((name.as_str(), value.as_bytes()));
    }
    if http_body::Body::size_hint(&body).exact().is_some() {
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        let bytes = if is_json(&parts.headers) {
            wire::correct_json(bytes)
        } else {
            bytes
        };
        return out.body(bytes);
    }
    let stream =
        http_body_util::BodyDataStream::new(body).map(|chunk| chunk.map(wire::correct_sse_chunk));
    out.body(ActixBody::new(BodyStream::new(stream)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_in_query_is_detected() {
        assert!(query_carries_token("access_token=abc"));
        assert!(query_carries_token("x=1&ACCESS_TOKEN=abc"));
        assert!(!query_carries_token("ticket=abc"));
        assert!(!query_carries_token(""));
    }

    fn body_of(response: HttpResponse) -> serde_json::Value {
        let bytes = actix_web::body::to_bytes_limited(response.into_body(), 4096);
        let bytes = futures::executor::block_on(bytes)
            .unwrap_or_else(|_| panic!("body over the limit"))
            .unwrap_or_else(|_| panic!("body unreadable"));
        serde_json::from_slice(&bytes).unwrap_or_default()
    }

    #[test]
    fn error_bodies_are_jsonrpc_without_an_unread_id() {
        let r = jsonrpc_error(StatusCode::FORBIDDEN, -32600, "no");
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let body = body_of(r);
        assert_eq!(body["error"]["code"], -32600);
        assert!(body.get("id").is_none(), "{body}");
    }

    #[test]
    fn invalid_params_echo_only_a_request_id() {
        for id in [json!(7), json!("c1")] {
            let body = body_of(invalid_params(id.clone(), "params.name must be a string"));
            assert_eq!(body["id"], id);
            assert_eq!(body["error"]["code"], -32602);
        }
        for id in [json!({"x": 1}), json!(1.5), json!(null), json!([1])] {
            let body = body_of(invalid_params(id.clone(), "params.name must be a string"));
            assert!(body.get("id").is_none(), "{id}: {body}");
            assert_eq!(body["error"]["code"], -32600, "{id}: {body}");
        }
    }
}
