//! `POST /dev/idp/token`: authorization code (with PKCE S256) and refresh
//! token grants. Answers carry an RFC 9068 access token for this server's MCP
//! resource, an ID token and a rotating refresh token; errors are RFC 6749
//! §5.2 JSON. Clients are not authenticated (dev mode): a secret, if sent,
//! is ignored, but the client id must match the one the code was issued to.

use std::{collections::HashMap, time::Duration, time::Instant};

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use base64::{Engine, engine::general_purpose::STANDARD};

use super::{
    DevServices,
    grants::{RefreshGrant, pkce_s256_matches},
    params::{UserName, is_code_verifier, parse_form},
};

pub(crate) const ACCESS_TOKEN_TTL: Duration = Duration::from_secs(3600);

struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
}

fn oauth_error(error: &'static str, description: impl Into<String>) -> OAuthError {
    OAuthError {
        status: StatusCode::BAD_REQUEST,
        error,
        description: description.into(),
    }
}

pub(crate) async fn exchange(
    req: HttpRequest,
    body: web::Bytes,
    dev: web::Data<DevServices>,
) -> HttpResponse {
    let (status, body) = match grant(&req, &body, &dev) {
        Ok(tokens) => (StatusCode::OK, tokens),
        Err(e) => (
            e.status,
            serde_json::json!({ "error": e.error, "error_description": e.description }),
        ),
    };
    HttpResponse::build(status)
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("Pragma", "no-cache"))
        .json(body)
}

fn grant(
    req: &HttpRequest,
    body: &[u8],
    dev: &DevServices,
) -> Result<serde_json::Value, OAuthError> {
    let params = parse_form(body).map_err(|name| {
        oauth_error(
            "invalid_request",
            format!("`{name}` was given more than once"),
        )
    })?;
    let client_id = client_id(req, &params)?;
    if params
        .get("resource")
        .is_some_and(|r| r.trim_end_matches('/') != dev.mcp_resource())
    {
        return Err(oauth_error(
            "invalid_target",
            "this authorization server only issues tokens for its MCP resource",
        ));
    }
    match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => code_grant(&params, &client_id, dev),
        Some("refresh_token") => refresh_grant(&params, &client_id, dev),
        Some(_) => Err(oauth_error(
            "unsupported_grant_type",
            "use authorization_code or refresh_token",
        )),
        None => Err(oauth_error("invalid_request", "grant_type is required")),
    }
}

fn code_grant(
    params: &HashMap<String, String>,
    client_id: &str,
    dev: &DevServices,
) -> Result<serde_json::Value, OAuthError> {
    let code = required(params, "code")?;
    let redirect_uri = required(params, "redirect_uri")?;
    let verifier = required(params, "code_verifier")?;
    // Taking the code burns it, so any mismatch below also ends it.
    let grant = dev
        .grants()
        .take_code(code, Instant::now())
        .ok_or_else(|| oauth_error("invalid_grant", "the code is unknown, used or expired"))?;
    if grant.client_id != client_id {
        return Err(oauth_error(
            "invalid_grant",
            "the code was issued to another client",
        ));
    }
    if grant.redirect_uri != redirect_uri {
        return Err(oauth_error(
            "invalid_grant",
            "redirect_uri differs from the authorization request",
        ));
    }
    if !is_code_verifier(verifier) || !pkce_s256_matches(verifier, &grant.code_challenge) {
        return Err(oauth_error(
            "invalid_grant",
            "code_verifier does not match the code_challenge",
        ));
    }
    issue(
        dev,
        client_id,
        &grant.user,
        &grant.scope,
        grant.nonce.as_deref(),
        grant.auth_time,
    )
}

fn refresh_grant(
    params: &HashMap<String, String>,
    client_id: &str,
    dev: &DevServices,
) -> Result<serde_json::Value, OAuthError> {
    let token = required(params, "refresh_token")?;
    let grant = dev
        .grants()
        .take_refresh(token, Instant::now())
        .ok_or_else(|| {
            oauth_error(
                "invalid_grant",
                "the refresh token is unknown, used or expired",
            )
        })?;
    if grant.client_id != client_id {
        return Err(oauth_error(
            "invalid_grant",
            "the refresh token was issued to another client",
        ));
    }
    let scope = match params.get("scope").filter(|s| !s.is_empty()) {
        None => grant.scope.clone(),
        Some(asked) => {
            let granted: Vec<&str> = grant.scope.split_whitespace().collect();
            if !asked.split_whitespace().all(|s| granted.contains(&s)) {
                return Err(oauth_error(
                    "invalid_scope",
                    "a refresh cannot widen the granted scope",
                ));
            }
            asked.split_whitespace().collect::<Vec<_>>().join(" ")
        }
    };
    issue(dev, client_id, &grant.user, &scope, None, grant.auth_time)
}

fn issue(
    dev: &DevServices,
    client_id: &str,
    user: &UserName,
    scope: &str,
    nonce: Option<&str>,
    auth_time: u64,
) -> Result<serde_json::Value, OAuthError> {
    let signing_failed = |e: super::DevError| {
        tracing::error!(error = %e, "dev identity provider: cannot sign a token");
        OAuthError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            error: "server_error",
            description: "cannot sign".into(),
        }
    };
    let access_token = dev
        .access_token(user.as_str(), client_id, scope, ACCESS_TOKEN_TTL)
        .map_err(signing_failed)?;
    let id_token = dev
        .id_token(user, client_id, nonce, auth_time, ACCESS_TOKEN_TTL)
        .map_err(signing_failed)?;
    let refresh = RefreshGrant {
        client_id: client_id.to_owned(),
        user: user.clone(),
        scope: scope.to_owned(),
        auth_time,
    };
    let refresh_token = dev.grants().issue_refresh(refresh, Instant::now());
    Ok(serde_json::json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_TTL.as_secs(),
        "id_token": id_token,
        "refresh_token": refresh_token,
        "scope": scope,
    }))
}

fn required<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, OAuthError> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| oauth_error("invalid_request", format!("{name} is required")))
}

/// The client id from `client_secret_basic` (RFC 6749 §2.3.1: form-encoded
/// inside Basic) or from the form; both present must agree.
fn client_id(req: &HttpRequest, params: &HashMap<String, String>) -> Result<String, OAuthError> {
    let from_form = params.get("client_id").filter(|c| !c.is_empty()).cloned();
    let authorization = req
        .headers()
        .get("Authorization")
        .and_then(|h| h.to_str().ok());
    let from_basic = match authorization.and_then(|v| v.split_once(' ')) {
        Some((scheme, credentials)) if scheme.eq_ignore_ascii_case("basic") => {
            let bad = || oauth_error("invalid_request", "malformed Basic authorization");
            let decoded = STANDARD.decode(credentials.trim()).map_err(|_| bad())?;
            let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
            let (raw_id, _secret) = decoded.split_once(':').ok_or_else(bad)?;
            url::form_urlencoded::parse(raw_id.as_bytes())
                .next()
                .map(|(id, _)| id.into_owned())
        }
        _ => None,
    };
    match (from_basic, from_form) {
        (Some(a), Some(b)) if a != b => Err(oauth_error(
            "invalid_request",
            "client_id differs from the Basic credentials",
        )),
        (Some(id), _) | (None, Some(id)) => Ok(id),
        (None, None) => Err(oauth_error("invalid_request", "client_id is required")),
    }
}
