//! The bridge of `src/mcp/bridge.rs` reduced to its shape: actix request →
//! `http::Request` (absolute URI, headers, buffered body) → rmcp → actix
//! response, with the same wire correction for URL elicitations. No Origin
//! or token check: the caller is named by the token's `sub` claim, read
//! without verifying the signature (the ceiling pays no auth).

use actix_web::{HttpRequest, HttpResponse, body::BoxBody as ActixBody, http::StatusCode, web};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::Endpoint;

const MAX_BODY: usize = 1024 * 1024;
const EMPTY_ID: &[u8] = br#""elicitationId":"""#;

/// The caller, as the bare server knows it.
#[derive(Clone, Debug)]
pub struct Caller(pub String);

pub async fn handle(
    req: HttpRequest,
    mut payload: web::Payload,
    endpoint: web::Data<Endpoint>,
) -> HttpResponse {
    let Some(head) = request_head(&req) else {
        return HttpResponse::BadRequest().finish();
    };
    let caller = subject(&head.headers);
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        match chunk {
            Ok(chunk) if body.len() + chunk.len() <= MAX_BODY => body.extend_from_slice(&chunk),
            _ => return HttpResponse::PayloadTooLarge().finish(),
        }
    }
    let mut request = http::Request::from_parts(head, Full::new(body.freeze()));
    if let Some(caller) = caller {
        request.extensions_mut().insert(Caller(caller));
    }
    into_actix(endpoint.service.handle(request).await).await
}

fn request_head(req: &HttpRequest) -> Option<http::request::Parts> {
    let method = http::Method::from_bytes(req.method().as_str().as_bytes()).ok()?;
    let host = req
        .headers()
        .get(actix_web::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let path = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let uri: http::Uri = format!("http://{host}{path}").parse().ok()?;
    let mut builder = http::Request::builder().method(method).uri(uri);
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    builder.body(()).ok().map(|r| r.into_parts().0)
}

/// `sub` of the bearer JWT, unverified.
fn subject(headers: &http::HeaderMap) -> Option<String> {
    let token = headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    let payload = token.split('.').nth(1)?;
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    claims.get("sub")?.as_str().map(str::to_owned)
}

async fn into_actix(
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
        return out.body(correct_json(bytes));
    }
    let stream = http_body_util::BodyDataStream::new(body);
    out.body(ActixBody::new(actix_web::body::BodyStream::new(stream)))
}

/// rmcp writes `"elicitationId": ""` in URL elicitations; 2026-07-28 has no
/// such field. The same correction as `src/mcp/wire.rs`.
fn correct_json(body: Bytes) -> Bytes {
    if !body.windows(EMPTY_ID.len()).any(|w| w == EMPTY_ID) {
        return body;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    if let Some(requests) = value
        .get_mut("result")
        .and_then(|r| r.get_mut("inputRequests"))
        .and_then(Value::as_object_mut)
    {
        for request in requests.values_mut() {
            if let Some(params) = request.get_mut("params").and_then(Value::as_object_mut) {
                params.remove("elicitationId");
            }
        }
    }
    serde_json::to_vec(&value).map(Bytes::from).unwrap_or(body)
}
