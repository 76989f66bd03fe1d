//! `/dev/idp/authorize`: the sign-in page. GET shows a form where the person
//! types any user name; POST (the same parameters in hidden fields) issues a
//! one-time code and sends the browser back with `code`, `state` and `iss`.
//!
//! Until `client_id` and `redirect_uri` are known good, errors are shown as a
//! page: redirecting to an unchecked URI would make this an open redirector.

use std::{collections::HashMap, time::Instant};

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use askama::Template;
use url::Url;

use super::{
    DevServices,
    grants::CodeGrant,
    now_secs,
    pages::{
        Refusal, Server, code_challenge, error_page, hidden_fields, html, param, request_params,
    },
    params::{UserName, check_redirect_uri, is_client_id, redirect_back},
};

/// Carried from the page to the POST besides the code request's own.
const CARRIED: [&str; 2] = ["nonce", "resource"];

#[derive(Template)]
#[template(path = "dev/authorize.html")]
struct AuthorizePage<'a> {
    client_id: &'a str,
    redirect_origin: String,
    scopes: Vec<&'a str>,
    hidden: Vec<(&'a str, &'a str)>,
    username: &'a str,
    error: Option<&'a str>,
}

/// A request whose client and redirect URI have been accepted.
struct AuthRequest<'a> {
    client_id: &'a str,
    redirect_raw: &'a str,
    redirect_uri: Url,
    state: Option<&'a str>,
    code_challenge: &'a str,
    scope: &'a str,
    nonce: Option<&'a str>,
}

pub(crate) async fn show(req: HttpRequest, dev: web::Data<DevServices>) -> HttpResponse {
    let params = match request_params(req.query_string().as_bytes()) {
        Ok(p) => p,
        Err(message) => return error_page(Server::Idp, &message),
    };
    match read_request(&params, &dev) {
        Ok(request) => sign_in_page(&request, &params, "", None, StatusCode::OK),
        Err(refusal) => refusal.answer(&dev.issuer(), Server::Idp),
    }
}

pub(crate) async fn submit(body: web::Bytes, dev: web::Data<DevServices>) -> HttpResponse {
    let params = match request_params(&body) {
        Ok(p) => p,
        Err(message) => return error_page(Server::Idp, &message),
    };
    let request = match read_request(&params, &dev) {
        Ok(r) => r,
        Err(refusal) => return refusal.answer(&dev.issuer(), Server::Idp),
    };
    if params.get("action").is_some_and(|a| a == "cancel") {
        let denied = [
            ("error", "access_denied"),
            ("error_description", "the user cancelled the sign-in"),
        ];
        return redirect_back(request.redirect_uri, &denied, request.state, &dev.issuer());
    }
    let typed = params.get("username").map(|u| u.trim()).unwrap_or_default();
    let user = match UserName::parse(typed) {
        Ok(user) => user,
        Err(message) => {
            return sign_in_page(
                &request,
                &params,
                typed,
                Some(&message),
                StatusCode::BAD_REQUEST,
            );
        }
    };
    tracing::info!(
        user = user.as_str(),
        // The requester's choice, up to 512 characters: its start names it.
        client_id = crate::crypto::printable_prefix(request.client_id),
        "dev identity provider: signed in"
    );
    let grant = CodeGrant {
        client_id: request.client_id.to_owned(),
        redirect_uri: request.redirect_raw.to_owned(),
        code_challenge: request.code_challenge.to_owned(),
        user,
        scope: request.scope.to_owned(),
        nonce: request.nonce.map(str::to_owned),
        auth_time: now_secs(),
    };
    let code = dev.grants().issue_code(grant, Instant::now());
    redirect_back(
        request.redirect_uri,
        &[("code", &code)],
        request.state,
        &dev.issuer(),
    )
}

fn read_request<'a>(
    params: &'a HashMap<String, String>,
    dev: &DevServices,
) -> Result<AuthRequest<'a>, Refusal> {
    let get = |name: &str| param(params, name);
    let client_id = get("client_id")
        .filter(|c| is_client_id(c))
        .ok_or_else(|| Refusal::Page("The request has no valid client_id.".into()))?;
    let redirect_raw = get("redirect_uri")
        .ok_or_else(|| Refusal::Page("The request has no redirect_uri.".into()))?;
    let redirect_uri = check_redirect_uri(redirect_raw, dev.base_url())
        .map_err(|e| Refusal::Page(format!("{e}. It was: {redirect_raw}")))?;

    let state = get("state");
    let back = |error, description| Refusal::redirect(&redirect_uri, state, error, description);
    let s256_rule = "PKCE with code_challenge_method=S256 is required";
    let code_challenge = code_challenge(params, back, s256_rule)?;
    if get("resource").is_some_and(|r| r.trim_end_matches('/') != dev.mcp_resource()) {
        return Err(back(
            "invalid_target",
            "this authorization server only issues tokens for its MCP resource",
        ));
    }
    // There is never an existing session to reuse silently.
    if get("prompt").is_some_and(|p| p.split(' ').any(|v| v == "none")) {
        return Err(back(
            "login_required",
            "the dev identity provider always asks for a user name",
        ));
    }
    Ok(AuthRequest {
        client_id,
        redirect_raw,
        redirect_uri,
        state,
        code_challenge,
        scope: get("scope").unwrap_or_default(),
        nonce: get("nonce"),
    })
}

fn sign_in_page(
    request: &AuthRequest<'_>,
    params: &HashMap<String, String>,
    username: &str,
    error: Option<&str>,
    status: StatusCode,
) -> HttpResponse {
    let hidden = hidden_fields(&CARRIED, params);
    let page = AuthorizePage {
        client_id: request.client_id,
        redirect_origin: request.redirect_uri.origin().ascii_serialization(),
        scopes: request.scope.split_whitespace().collect(),
        hidden,
        username,
        error,
    };
    html(status, page.render(), Server::Idp.who())
}
