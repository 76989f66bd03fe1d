//! A fake Atlassian (auth.atlassian.com and api.atlassian.com on one
//! base). `/authorize` wants `audience=api.atlassian.com`; `/oauth/token`
//! takes a JSON body only, answers `expires_in` 3600 and a refresh token
//! when `offline_access` was asked. Refresh tokens rotate: each refresh
//! answers a new one and disables the one used, which is then refused
//! with HTTP 403 `invalid_grant` "Unknown or invalid refresh token.".
//! `/me` is the user; `/oauth/token/accessible-resources` lists the one
//! site the token reaches, with its cloud id ([`CLOUD_ID`]); product APIs
//! are addressed by that id, `/ex/jira/{cloud_id}/…` (another id: 404).
//! Jira Software's `rest/agile/…` needs `read:board-scope:jira-software`;
//! without it Atlassian answers HTTP 401 "Unauthorized; scope does not
//! match" to a token that is otherwise fine. There is no revocation
//! endpoint.

use std::{collections::BTreeMap, time::Duration};

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

pub use crate::scripted_routes::ATLASSIAN_CLOUD_ID as CLOUD_ID;

use super::{
    FakeProvider, Kind,
    code_grant::{bearer_account, entry_table, oauth_error, redeem, seen},
    http::{credentials, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared, random},
};

const ACCESS_TTL: Duration = Duration::from_secs(3600);

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "5b10ac8d82e05b22cc7d4ef5".into(),
        login: "alice@acme.example".into(),
    };
    serve(
        Kind::Atlassian,
        Shared::new("fakeAtlassianClientId", account, Some(ACCESS_TTL)),
        routes,
    )
    .await
}

/// The shipped `atlassian` entry pointed at this fake.
pub(super) fn table(fake: &FakeProvider) -> toml::Table {
    let urls = [
        ("authorize_url", "/authorize"),
        ("token_url", "/oauth/token"),
        ("userinfo_url", "/me"),
        ("api_base_url", "/ex/jira/{cloud_id}/"),
    ];
    let lookup = format!("{}/oauth/token/accessible-resources", fake.base);
    entry_table(fake, &urls, &[("cloud_id", "lookup_url", &lookup)])
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/authorize", web::get().to(authorize))
        .route("/oauth/token", web::post().to(token))
        .route("/me", web::get().to(me))
        .route(
            "/oauth/token/accessible-resources",
            web::get().to(resources),
        )
        .route("/ex/jira/{cloud_id}/{rest:.*}", web::get().to(jira));
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id)
        || p.get("audience").map(String::as_str) != Some("api.atlassian.com")
    {
        return page(400, "Something went wrong: invalid client or audience.");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "The redirect_uri is not registered for this app.");
    };
    let state = p.get("state").cloned().unwrap_or_default();
    match fake.memory().authorize(p, random("eyJraWQi")) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(back, &[("error", "access_denied"), ("state", &state)]),
    }
}

async fn token(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let is_json = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let parsed: Option<BTreeMap<String, Value>> = serde_json::from_slice(&body).ok();
    let (true, Some(parsed)) = (is_json, parsed) else {
        return oauth_error(
            415,
            "invalid_request",
            "Content-Type must be application/json",
        );
    };
    let p: BTreeMap<String, String> = parsed
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
        .collect();
    if p.get("client_id") != Some(&fake.client_id)
        || p.get("client_secret") != Some(&fake.client_secret)
    {
        return oauth_error(401, "access_denied", "Unauthorized");
    }
    let mut memory = fake.memory();
    let (grant, account, scope) = match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let Ok(code) = redeem(&mut memory, &p) else {
                return oauth_error(403, "invalid_grant", "Invalid authorization code");
            };
            let scope = code.param("scope").unwrap_or_default().to_owned();
            (memory.new_grant(), code.account.clone(), scope)
        }
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let given = p
                .get("refresh_token")
                .map(String::as_str)
                .unwrap_or_default();
            // Rotating: the token used is disabled whatever follows.
            let Some(found) = memory.take_refresh(given) else {
                return oauth_error(403, "invalid_grant", "Unknown or invalid refresh token.");
            };
            found
        }
        _ => return oauth_error(400, "unsupported_grant_type", "Unsupported grant type"),
    };
    let access_token = memory.issue_access(grant, &account, &scope, "eyJhbGciOiJSUzI1NiJ9.");
    let ttl = memory.access_ttl.unwrap_or(ACCESS_TTL);
    let mut answer = json!({
        "access_token": access_token,
        "expires_in": ttl.as_secs(),
        "token_type": "Bearer",
        "scope": scope,
    });
    if scope.split(' ').any(|s| s == "offline_access") {
        answer["refresh_token"] =
            json!(memory.issue_refresh(grant, &account, &scope, "eyJraWQiOi"));
    }
    json(200, answer)
}

fn unauthorized() -> HttpResponse {
    json(401, json!({"code": 401, "message": "Unauthorized"}))
}

async fn me(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    match bearer_account(&req, &fake) {
        Some(account) => json(
            200,
            json!({"account_type": "atlassian", "account_id": account.id,
                   "email": account.login, "name": "Alice Example", "account_status": "active"}),
        ),
        None => unauthorized(),
    }
}

async fn resources(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    if bearer_account(&req, &fake).is_none() {
        return unauthorized();
    }
    json(
        200,
        json!([{"id": CLOUD_ID, "url": "https://acme.atlassian.net", "name": "acme",
                "scopes": ["read:jira-work", "read:jira-user"],
                "avatarUrl": "https://site-admin-avatar-cdn.prod.public.atl-paas.net/avatars/240/rocket.png"}]),
    )
}

async fn jira(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    fake.memory().api_seen.push(seen(&req));
    let access = credentials(&req, &["bearer"]).and_then(|t| fake.memory().access(t));
    let Some(access) = access else {
        return unauthorized();
    };
    let account = access.account;
    let (cloud_id, rest) = path.into_inner();
    if cloud_id != CLOUD_ID {
        return json(404, json!({"message": "Site not found"}));
    }
    let board_scope = access
        .scope
        .split(' ')
        .any(|s| s == "read:board-scope:jira-software");
    if rest.starts_with("rest/agile/") && !board_scope {
        return json(
            401,
            json!({"code": 401, "message": "Unauthorized; scope does not match"}),
        );
    }
    json(
        200,
        json!({"accountId": account.id, "emailAddress": account.login, "path": rest}),
    )
}
