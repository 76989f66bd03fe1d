//! `POST /dev/demo/token` (authorization code with PKCE S256, rotating
//! refresh tokens) and `POST /dev/demo/revoke` (RFC 7009). Both require the
//! client's Basic credentials; answers are never cached.

use std::{collections::HashMap, time::Instant};

use actix_web::{HttpRequest, HttpResponse, web};

use super::{
    DevServices,
    client_auth::{OAuthError, authenticate, bad_request},
    store::{Issued, Refused},
};
use crate::dev::params::parse_form;

pub(super) async fn exchange(
    req: HttpRequest,
    body: web::Bytes,
    dev: web::Data<DevServices>,
) -> HttpResponse {
    match grant(&req, &body, &dev) {
        Ok(issued) => HttpResponse::Ok()
            .insert_header(("Cache-Control", "no-store"))
            .insert_header(("Pragma", "no-cache"))
            .json(serde_json::json!({
                "access_token": issued.access_token,
                "token_type": "Bearer",
                "expires_in": issued.expires_in,
                "refresh_token": issued.refresh_token,
                "scope": issued.scope,
            })),
        Err(e) => e.response(),
    }
}

fn grant(req: &HttpRequest, body: &[u8], dev: &DevServices) -> Result<Issued, OAuthError> {
    let params = form(body)?;
    let demo = dev.demo();
    authenticate(req, &params, demo)?;
    let now = Instant::now();
    let outcome = match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let code = required(&params, "code")?;
            let redirect_uri = required(&params, "redirect_uri")?;
            let verifier = required(&params, "code_verifier")?;
            demo.store()
                .exchange_code(code, redirect_uri, verifier, now)
        }
        Some("refresh_token") => {
            let token = required(&params, "refresh_token")?;
            let scope = params.get("scope").map(String::as_str);
            demo.store().refresh(token, scope, now)
        }
        Some(_) => {
            return Err(bad_request(
                "unsupported_grant_type",
                "use authorization_code or refresh_token",
            ));
        }
        None => return Err(bad_request("invalid_request", "grant_type is required")),
    };
    let issued =
        outcome.map_err(|Refused { error, description }| bad_request(error, description))?;
    tracing::info!(
        grant_type = params.get("grant_type").map(String::as_str),
        expires_in = issued.expires_in,
        "demo provider: tokens issued"
    );
    Ok(issued)
}

/// RFC 7009: 200 whether or not the token was known, so that the answer
/// tells nobody which tokens exist.
pub(super) async fn revoke(
    req: HttpRequest,
    body: web::Bytes,
    dev: web::Data<DevServices>,
) -> HttpResponse {
    let outcome = form(&body).and_then(|params| {
        authenticate(&req, &params, dev.demo())?;
        // The hint only speeds up a search; both kinds are looked up anyway.
        let token = required(&params, "token")?;
        dev.demo().store().revoke(token);
        Ok(())
    });
    match outcome {
        Ok(()) => HttpResponse::Ok()
            .insert_header(("Cache-Control", "no-store"))
            .finish(),
        Err(e) => e.response(),
    }
}

fn form(body: &[u8]) -> Result<HashMap<String, String>, OAuthError> {
    // RFC 6749 §3.1: a parameter must not be sent twice.
    parse_form(body)
        .map_err(|_| bad_request("invalid_request", "a parameter was given more than once"))
}

fn required<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, OAuthError> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad_request("invalid_request", format!("{name} is required")))
}
