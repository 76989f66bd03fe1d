//! A fake Dropbox: `/oauth2/authorize` approves at once and remembers
//! `token_access_type`; `/oauth2/token` takes the client in the body or as
//! HTTP Basic, checks the PKCE verifier, and answers a short-lived access
//! token (`expires_in` 14400) with a refresh token only when the authorize
//! request said `token_access_type=offline`. A refresh answers a new
//! access token and no new refresh token. The API is RPC: every endpoint
//! is a POST; `users/get_current_account` and `auth/token/revoke` take no
//! argument, so their body must be empty or `null` (an empty JSON body or
//! `{}` is refused, as Dropbox does); `files/list_folder` takes a JSON
//! object. Revoking an access token ends its refresh token too.

use std::{collections::BTreeMap, time::Duration};

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    http::{client, credentials, header, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared, pkce_matches, random},
};

const ACCESS_TTL: Duration = Duration::from_secs(14400);

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc".into(),
        login: "alice@example.com".into(),
    };
    let shared = Shared::new("fakedropboxkey1", account, Some(ACCESS_TTL));
    serve(Kind::Dropbox, shared, routes).await
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/oauth2/authorize", web::get().to(authorize))
        .route("/oauth2/token", web::post().to(token))
        .route(
            "/2/users/get_current_account",
            web::post().to(current_account),
        )
        .route("/2/files/list_folder", web::post().to(list_folder))
        .route("/2/auth/token/revoke", web::post().to(revoke));
}

fn oauth_error(error: &str, description: &str) -> HttpResponse {
    json(
        400,
        json!({"error": error, "error_description": description}),
    )
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(400, "Invalid client_id.");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "Invalid redirect_uri.");
    };
    if p.get("response_type").map(String::as_str) != Some("code") {
        return page(400, "Invalid response_type.");
    }
    let access_type = p.get("token_access_type").map(String::as_str);
    if !matches!(access_type, None | Some("online" | "offline" | "legacy")) {
        return page(400, "Invalid token_access_type.");
    }
    let state = p.get("state").cloned().unwrap_or_default();
    let code = random("")[..43].to_owned();
    match fake.memory().authorize(p, code) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(
            back,
            &[
                ("error", "access_denied"),
                (
                    "error_description",
                    "The user chose not to give your app access.",
                ),
                ("state", &state),
            ],
        ),
    }
}

async fn token(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let p = params(&req, &body);
    let (id, secret) = client(&req, &p);
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return oauth_error("invalid_client", "Invalid client_id or client_secret");
    }
    match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => exchange(&p, &fake),
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let mut memory = fake.memory();
            let Some((_, grant, account, scope)) = memory.refresh_param(&p) else {
                return oauth_error("invalid_grant", "refresh token is invalid or revoked");
            };
            let access = memory.issue_access(grant, &account, &scope, "sl.");
            let ttl = memory.access_ttl.unwrap_or(ACCESS_TTL);
            json(
                200,
                json!({"access_token": access, "token_type": "bearer",
                       "expires_in": ttl.as_secs()}),
            )
        }
        _ => oauth_error("unsupported_grant_type", "grant_type is not supported"),
    }
}

fn exchange(p: &BTreeMap<String, String>, fake: &Shared) -> HttpResponse {
    let mut memory = fake.memory();
    let given = p.get("code").map(String::as_str).unwrap_or_default();
    let Some(code) = memory.take_code(given) else {
        return oauth_error("invalid_grant", "code doesn't exist or has expired");
    };
    if p.get("redirect_uri").map(String::as_str) != code.param("redirect_uri") {
        return oauth_error("invalid_grant", "redirect_uri mismatch");
    }
    if let Some(challenge) = code.param("code_challenge") {
        let method = code.param("code_challenge_method").unwrap_or("plain");
        let verifier = p
            .get("code_verifier")
            .map(String::as_str)
            .unwrap_or_default();
        if !pkce_matches(method, challenge, verifier) {
            return oauth_error("invalid_grant", "invalid code verifier");
        }
    }
    let scope = code.param("scope").unwrap_or_default().to_owned();
    let grant = memory.new_grant();
    let access = memory.issue_access(grant, &code.account, &scope, "sl.");
    let ttl = memory.access_ttl.unwrap_or(ACCESS_TTL);
    let mut answer = json!({
        "access_token": access,
        "token_type": "bearer",
        "expires_in": ttl.as_secs(),
        "scope": scope,
        "account_id": code.account.id,
        "uid": "12345678",
    });
    // Dropbox's one way to a refresh token.
    if code.param("token_access_type") == Some("offline") {
        answer["refresh_token"] = json!(memory.issue_refresh(grant, &code.account, &scope, ""));
    }
    json(200, answer)
}

/// Dropbox's API error: a summary and a tagged union.
fn api_error(status: u16, tag: &str) -> HttpResponse {
    json(
        status,
        json!({"error_summary": format!("{tag}/.."), "error": {".tag": tag}}),
    )
}

/// The account behind the bearer token; an expired token and an unknown
/// one are told apart, as Dropbox does.
fn authenticated(req: &HttpRequest, fake: &Shared) -> Result<(Account, String), Box<HttpResponse>> {
    let token = credentials(req, &["bearer"]).unwrap_or_default();
    let memory = fake.memory();
    if let Some(access) = memory.access(token) {
        return Ok((access.account, token.to_owned()));
    }
    let tag = if memory.issued().iter().any(|t| t == token) && memory.refresh(token).is_none() {
        "expired_access_token"
    } else {
        "invalid_access_token"
    };
    Err(Box::new(api_error(401, tag)))
}

/// An endpoint without arguments takes no body, or `null` as JSON.
fn no_argument(req: &HttpRequest, body: &[u8], function: &str) -> Result<(), Box<HttpResponse>> {
    let content_type = header(req, "content-type");
    let fine = match content_type {
        None => body.is_empty(),
        Some(c) if c.starts_with("application/json") => {
            matches!(serde_json::from_slice::<Value>(body), Ok(Value::Null))
        }
        Some(_) => false,
    };
    if fine {
        return Ok(());
    }
    let why = match serde_json::from_slice::<Value>(body) {
        Ok(_) => "request body: expected null, got value",
        Err(_) => "request body: could not decode input as JSON",
    };
    Err(Box::new(
        HttpResponse::BadRequest()
            .content_type("text/plain; charset=utf-8")
            .body(format!(
                "Error in call to API function \"{function}\": {why}"
            )),
    ))
}

async fn current_account(
    req: HttpRequest,
    body: web::Bytes,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    if let Err(refusal) = no_argument(&req, &body, "users/get_current_account") {
        return *refusal;
    }
    match authenticated(&req, &fake) {
        Ok((account, _)) => json(
            200,
            json!({
                "account_id": account.id,
                "name": {"given_name": "Alice", "surname": "Example", "familiar_name": "Alice",
                         "display_name": "Alice Example", "abbreviated_name": "AE"},
                "email": account.login,
                "email_verified": true,
                "disabled": false,
                "locale": "en",
                "country": "US",
                "is_paired": false,
                "account_type": {".tag": "basic"},
                "root_info": {".tag": "user", "root_namespace_id": "3235641", "home_namespace_id": "3235641"},
            }),
        ),
        Err(refusal) => *refusal,
    }
}

async fn list_folder(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    let (_, _) = match authenticated(&req, &fake) {
        Ok(found) => found,
        Err(refusal) => return *refusal,
    };
    let is_json = header(&req, "content-type").is_some_and(|c| c.starts_with("application/json"));
    let Some(Value::Object(args)) = is_json
        .then(|| serde_json::from_slice::<Value>(&body).ok())
        .flatten()
    else {
        return HttpResponse::BadRequest()
            .content_type("text/plain; charset=utf-8")
            .body("Error in call to API function \"files/list_folder\": request body: could not decode input as JSON");
    };
    let path = args.get("path").and_then(Value::as_str).unwrap_or("/");
    json(
        200,
        json!({"entries": [{".tag": "file", "name": "Prime_Numbers.txt",
                            "path_display": format!("{path}/Prime_Numbers.txt"),
                            "id": "id:a4ayc_80_OEAAAAAAAAAXw", "size": 7212}],
               "cursor": random("AAE"), "has_more": false}),
    )
}

async fn revoke(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.revoke);
    if let Err(refusal) = no_argument(&req, &body, "auth/token/revoke") {
        return *refusal;
    }
    let token = match authenticated(&req, &fake) {
        Ok((_, token)) => token,
        Err(refusal) => return *refusal,
    };
    fake.memory().revoke_grant_of(&token);
    HttpResponse::Ok()
        .content_type("application/json")
        .body("null")
}
