//! `/dev/demo/authorize`: the consent page a provider like GitHub would
//! show. GET renders it; POST (the request in hidden fields, plus the
//! account name and the button pressed) answers the client with a code or
//! `access_denied`, always with `state` and `iss` (RFC 9207).
//!
//! Until the client and its exact redirect URI are recognised, every error
//! is a page: redirecting to an unchecked URI would make this an open
//! redirector (RFC 6749 §4.1.2.1).

use std::{collections::HashMap, time::Instant};

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use askama::Template;
use url::Url;

use super::{CLIENT_ID, DEFAULT_SCOPE, DemoProvider, DevServices, store::CodeGrant};
use crate::dev::{
    pages::{
        Refusal, Server, code_challenge, error_page, hidden_fields, html, param, request_params,
    },
    params::{UserName, redirect_back},
};

const DEFAULT_ACCOUNT: &str = "demo-user";

#[derive(Template)]
#[template(path = "dev/demo/authorize.html")]
struct ConsentPage<'a> {
    client_id: &'a str,
    redirect_uri: &'a str,
    scopes: Vec<&'a str>,
    hidden: Vec<(&'a str, &'a str)>,
    account: &'a str,
    error: Option<&'a str>,
}

/// A request from the registered client to its registered redirect URI.
struct Request<'a> {
    redirect_uri: Url,
    state: Option<&'a str>,
    code_challenge: &'a str,
    scope: String,
}

pub(super) async fn show(req: HttpRequest, dev: web::Data<DevServices>) -> HttpResponse {
    let params = match request_params(req.query_string().as_bytes()) {
        Ok(p) => p,
        Err(message) => return error_page(Server::Demo, &message),
    };
    match read_request(&params, dev.demo()) {
        Ok(request) => consent_page(&request, &params, DEFAULT_ACCOUNT, None),
        Err(refusal) => refusal.answer(dev.demo().issuer(), Server::Demo),
    }
}

pub(super) async fn submit(body: web::Bytes, dev: web::Data<DevServices>) -> HttpResponse {
    let demo = dev.demo();
    let params = match request_params(&body) {
        Ok(p) => p,
        Err(message) => return error_page(Server::Demo, &message),
    };
    let request = match read_request(&params, demo) {
        Ok(request) => request,
        Err(refusal) => return refusal.answer(demo.issuer(), Server::Demo),
    };
    let account = params.get("account").map(|a| a.trim()).unwrap_or_default();
    match params.get("decision").map(String::as_str) {
        Some("allow") => {}
        Some("deny") => {
            tracing::info!("demo provider: the person denied access");
            let pairs = [
                ("error", "access_denied"),
                ("error_description", "the person denied access"),
            ];
            return redirect_back(request.redirect_uri, &pairs, request.state, demo.issuer());
        }
        _ => return error_page(Server::Demo, "Choose Allow or Deny."),
    }
    let user = match UserName::parse(account) {
        Ok(user) => user,
        Err(message) => return consent_page(&request, &params, account, Some(&message)),
    };
    tracing::info!(account = user.as_str(), "demo provider: access allowed");
    let grant = CodeGrant {
        redirect_uri: request.redirect_uri.to_string(),
        code_challenge: request.code_challenge.to_owned(),
        user,
        scope: request.scope.clone(),
    };
    let code = demo.store().issue_code(grant, Instant::now());
    redirect_back(
        request.redirect_uri,
        &[("code", &code)],
        request.state,
        demo.issuer(),
    )
}

fn read_request<'a>(
    params: &'a HashMap<String, String>,
    demo: &DemoProvider,
) -> Result<Request<'a>, Refusal> {
    let get = |name: &str| param(params, name);
    match get("client_id") {
        Some(CLIENT_ID) => {}
        Some(_) => return Err(Refusal::page("The application is not registered here.")),
        None => return Err(Refusal::page("The request names no client_id.")),
    }
    // Exact string comparison, as RFC 9700 §4.1.3 asks of a server, but
    // for a loopback URI's port.
    let Some(given) = get("redirect_uri").filter(|uri| demo.accepts_redirect_uri(uri)) else {
        return Err(Refusal::page(
            "The redirect_uri is not the one registered for this application.",
        ));
    };
    let redirect_uri = Url::parse(given)
        .map_err(|_| Refusal::page("The registered redirect URI is not a URL."))?;
    let state = get("state");
    let back = |error, description| Refusal::redirect(&redirect_uri, state, error, description);
    let s256_rule = "PKCE with code_challenge_method=S256 is required (plain is refused)";
    let code_challenge = code_challenge(params, back, s256_rule)?;
    let scope = get("scope").unwrap_or(DEFAULT_SCOPE);
    // RFC 6749 §3.3: scope tokens are printable ASCII without `"` or `\`.
    let valid = |s: &str| {
        s.bytes()
            .all(|b| b > 0x20 && b < 0x7f && b != b'"' && b != b'\\')
    };
    if !scope.split(' ').all(|s| !s.is_empty() && valid(s)) {
        return Err(back("invalid_scope", "the scope is malformed"));
    }
    Ok(Request {
        redirect_uri,
        state,
        code_challenge,
        scope: scope.to_owned(),
    })
}

fn consent_page(
    request: &Request<'_>,
    params: &HashMap<String, String>,
    account: &str,
    error: Option<&str>,
) -> HttpResponse {
    let page = ConsentPage {
        client_id: CLIENT_ID,
        redirect_uri: request.redirect_uri.as_str(),
        scopes: request.scope.split(' ').collect(),
        hidden: hidden_fields(&[], params),
        account,
        error,
    };
    let status = match error {
        Some(_) => StatusCode::BAD_REQUEST,
        None => StatusCode::OK,
    };
    html(status, page.render(), Server::Demo.who())
}
