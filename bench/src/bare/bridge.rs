//! The bridge of `src/mcp/bridge.rs` reduced to its shape: actix request →
//! `http::Request` (absolute URI, headers, buffered body) → rmcp → actix
//! response, with the service's own conversions (and so the same wire
//! correction for URL elicitations). No Origin or token check: the caller is
//! named by the token's `sub` claim, read without verifying the signature
//! (the ceiling pays no auth) — unless `--required` asks for the token
//! verified and the request logged and counted as mcp-connect's bridge does
//! (see `super::required`).

use actix_web::{HttpRequest, HttpResponse, web};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use futures::StreamExt;
use http_body_util::Full;
use serde_json::Value;

use mcp_connect::mcp::{RequestFacts, into_actix, request_head};

use super::{Endpoint, required::Required};

const MAX_BODY: usize = 1024 * 1024;

/// The caller, as the bare server knows it.
#[derive(Clone, Debug)]
pub struct Caller(pub String);

pub async fn handle(
    req: HttpRequest,
    payload: web::Payload,
    endpoint: web::Data<Endpoint>,
) -> HttpResponse {
    let Some(required) = endpoint.required.as_deref() else {
        return serve(&req, payload, &endpoint, None).await;
    };
    let mut facts = RequestFacts::new(req.method().as_str(), req.peer_addr().map(|a| a.ip()));
    let response = serve(&req, payload, &endpoint, Some((required, &mut facts))).await;
    facts.write(response.status().as_u16(), &required.metrics);
    response
}

async fn serve(
    req: &HttpRequest,
    mut payload: web::Payload,
    endpoint: &Endpoint,
    mut required: Option<(&Required, &mut RequestFacts)>,
) -> HttpResponse {
    let head = match request_head(req) {
        Ok(head) => head,
        Err(refused) => return refused,
    };
    let (caller, principal) = match &required {
        Some((required, _)) => match required.caller(&head.headers).await {
            Some(principal) => (Some(principal.subject.clone()), Some(principal)),
            None => return HttpResponse::Unauthorized().finish(),
        },
        None => (subject(&head.headers), None),
    };
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        match chunk {
            Ok(chunk) if body.len() + chunk.len() <= MAX_BODY => body.extend_from_slice(&chunk),
            _ => return HttpResponse::PayloadTooLarge().finish(),
        }
    }
    let body = body.freeze();
    if let Some((_, facts)) = &mut required {
        // What the log line names: the method and the caller; the tool
        // fills in its outcome through the record.
        if let Ok(Envelope {
            method: Some(method),
        }) = serde_json::from_slice::<Envelope>(&body)
        {
            facts.set_method(method);
        }
    }
    let mut request = http::Request::from_parts(head, Full::new(body));
    if let Some(caller) = caller {
        request.extensions_mut().insert(Caller(caller));
    }
    if let Some((_, facts)) = required {
        facts.caller = principal.clone();
        request.extensions_mut().insert(facts.record.clone());
        if let Some(principal) = principal {
            request.extensions_mut().insert(principal);
        }
    }
    into_actix(endpoint.service.handle(request).await).await
}

/// The one field of a JSON-RPC message the log line needs.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    method: Option<&'a str>,
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
