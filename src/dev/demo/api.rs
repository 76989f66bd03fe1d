//! The demo API, called with a bearer token (RFC 6750): `GET /api/me` is
//! the account the app connects, `/api/echo` shows what a call carried, any
//! other path is a 404 once the token is good.

use std::time::Instant;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Map, Value, json};

use super::{DevServices, account_id};
use crate::dev::params::UserName;

pub(super) async fn me(req: HttpRequest, dev: web::Data<DevServices>) -> HttpResponse {
    match authorized(&req, &dev) {
        Ok(user) => HttpResponse::Ok().json(json!({
            "id": account_id(&user),
            "login": user.as_str(),
            "name": format!("Demo user {}", user.as_str()),
        })),
        Err(refusal) => unauthorized(refusal),
    }
}

/// `{"method", "query", "body"}`: the body as JSON when it is JSON, else as
/// text. Repeated query names become arrays.
pub(super) async fn echo(
    req: HttpRequest,
    body: web::Bytes,
    dev: web::Data<DevServices>,
) -> HttpResponse {
    if let Err(refusal) = authorized(&req, &dev) {
        return unauthorized(refusal);
    }
    let mut query = Map::new();
    for (name, value) in url::form_urlencoded::parse(req.query_string().as_bytes()) {
        let value = Value::String(value.into_owned());
        match query.get_mut(name.as_ref()) {
            Some(Value::Array(values)) => values.push(value),
            Some(first) => *first = Value::Array(vec![first.take(), value]),
            None => {
                query.insert(name.into_owned(), value);
            }
        }
    }
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    HttpResponse::Ok().json(json!({
        "method": req.method().as_str(),
        "query": query,
        "body": body,
    }))
}

pub(super) async fn not_found(req: HttpRequest, dev: web::Data<DevServices>) -> HttpResponse {
    match authorized(&req, &dev) {
        Ok(_) => HttpResponse::NotFound()
            .json(json!({ "error": "not_found", "error_description": "no such demo API" })),
        Err(refusal) => unauthorized(refusal),
    }
}

/// The account behind the request's bearer token; `Err` holds the reason
/// for the 401, `None` when no token was sent at all.
fn authorized(req: &HttpRequest, dev: &DevServices) -> Result<UserName, Option<&'static str>> {
    let header = req
        .headers()
        .get("Authorization")
        .and_then(|h| h.to_str().ok());
    let token = match header.and_then(|v| v.split_once(' ')) {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        // RFC 6750 §3.1: a request without credentials gets no error code.
        _ => return Err(None),
    };
    match dev.demo().store().access(token, Instant::now()) {
        Some((user, _scope)) => Ok(user),
        None => Err(Some("the access token is unknown, expired or revoked")),
    }
}

fn unauthorized(invalid: Option<&str>) -> HttpResponse {
    let challenge = match invalid {
        Some(description) => format!(
            r#"Bearer realm="mcp-connect demo", error="invalid_token", error_description="{description}""#
        ),
        None => r#"Bearer realm="mcp-connect demo""#.to_owned(),
    };
    HttpResponse::Unauthorized()
        .insert_header(("WWW-Authenticate", challenge))
        .json(json!({
            "error": "invalid_token",
            "error_description": invalid.unwrap_or("an access token is required"),
        }))
}
