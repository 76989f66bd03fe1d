//! The bridge of `src/mcp/bridge.rs` reduced to its shape: actix request →
//! `http::Request` (absolute URI, headers, buffered body) → rmcp → actix
//! response, with the service's own conversions (and so the same wire
//! correction for URL elicitations). No Origin or token check: the caller is named by the token's `sub` claim, read
//! without verifying the signature (the ceiling pays no auth).

use actix_web::{HttpRequest, HttpResponse, web};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use futures::StreamExt;
use http_body_util::Full;
use serde_json::Value;

use mcp_connect::mcp::{into_actix, request_head};

use super::Endpoint;

const MAX_BODY: usize = 1024 * 1024;

/// The caller, as the bare server knows it.
#[derive(Clone, Debug)]
pub struct Caller(pub String);

pub async fn handle(
    req: HttpRequest,
    mut payload: web::Payload,
    endpoint: web::Data<Endpoint>,
) -> HttpResponse {
    let head = match request_head(&req) {
        Ok(head) => head,
        Err(refused) => return refused,
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
