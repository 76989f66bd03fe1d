//! A fake Microsoft Entra ID and Graph. The tenant is the first segment of
//! both `/{tenant}/oauth2/v2.0/authorize` and `/{tenant}/oauth2/v2.0/token`:
//! `common`, `organizations`, `consumers`, [`TENANT_DOMAIN`] and
//! [`TENANT_ID`] are known; any other tenant is refused as Entra does
//! (`AADSTS90002`, an error page at authorize, HTTP 400 at the token
//! endpoint), and a code is only redeemed at the tenant that issued it.
//! A refresh token comes only when `offline_access` was asked, and the
//! token answer's `scope` never lists `offline_access`. Every refresh
//! answers a new refresh token (the old one keeps working, as at Entra).
//! Graph is under `/graph/v1.0/`: `me` answers the user, any other path
//! echoes it. There is no revocation endpoint.

use std::{collections::BTreeMap, time::Duration};

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    code_grant::{Refusal, bearer_account, entry_table, oauth_error, redeem, seen},
    http::{client, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared, random},
};

pub const TENANT_ID: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
pub const TENANT_DOMAIN: &str = "contoso.onmicrosoft.com";
const KNOWN: &[&str] = &[
    "common",
    "organizations",
    "consumers",
    TENANT_DOMAIN,
    TENANT_ID,
];
const ACCESS_TTL: Duration = Duration::from_secs(3599);

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "87d349ed-44d7-43e1-9a83-5f2406dee5bd".into(),
        login: "alice@contoso.onmicrosoft.com".into(),
    };
    let client_id = "6731de76-14a6-49ae-97bc-6eba6914391e";
    serve(
        Kind::Microsoft,
        Shared::new(client_id, account, Some(ACCESS_TTL)),
        routes,
    )
    .await
}

/// The shipped `microsoft` entry pointed at this fake: the tenant stays a
/// path segment of the authorize and token URLs.
pub(super) fn table(fake: &FakeProvider) -> toml::Table {
    let urls = [
        ("authorize_url", "/{tenant}/oauth2/v2.0/authorize"),
        ("token_url", "/{tenant}/oauth2/v2.0/token"),
        ("userinfo_url", "/graph/v1.0/me"),
        ("api_base_url", "/graph/v1.0/"),
    ];
    entry_table(fake, &urls, &[])
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/{tenant}/oauth2/v2.0/authorize", web::get().to(authorize))
        .route("/{tenant}/oauth2/v2.0/token", web::post().to(token))
        .route("/graph/v1.0/me", web::get().to(me))
        .route("/graph/v1.0/{rest:.*}", web::get().to(graph));
}

fn unknown_tenant(tenant: &str) -> String {
    format!(
        "AADSTS90002: Tenant '{tenant}' not found. Check to make sure you have the correct \
         tenant ID and are signing into the correct cloud."
    )
}

async fn authorize(
    req: HttpRequest,
    tenant: web::Path<String>,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    if !KNOWN.contains(&tenant.as_str()) {
        return page(400, &unknown_tenant(&tenant));
    }
    let mut p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(400, "AADSTS700016: Application not found in the directory.");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "AADSTS50011: The redirect URI does not match.");
    };
    let state = p.get("state").cloned().unwrap_or_default();
    p.insert("tenant".into(), tenant.into_inner());
    match fake.memory().authorize(p, random("0.AX")) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(
            back,
            &[
                ("error", "access_denied"),
                (
                    "error_description",
                    "AADSTS65004: User declined to consent.",
                ),
                ("state", &state),
            ],
        ),
    }
}

fn error(code: &str, description: &str) -> HttpResponse {
    oauth_error(400, code, description)
}

async fn token(
    req: HttpRequest,
    tenant: web::Path<String>,
    body: web::Bytes,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    fake.memory().token_paths.push(req.path().to_owned());
    if !KNOWN.contains(&tenant.as_str()) {
        return error("invalid_request", &unknown_tenant(&tenant));
    }
    let p = params(&req, &body);
    let (id, secret) = client(&req, &p);
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return json(
            401,
            json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}),
        );
    }
    let mut memory = fake.memory();
    let (grant, account, scope, offline) = match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let code = match redeem(&mut memory, &p) {
                Ok(code) => code,
                Err(Refusal::Verifier) => {
                    return error(
                        "invalid_grant",
                        "AADSTS50148: The code_verifier does not match the code_challenge.",
                    );
                }
                Err(_) => {
                    return error(
                        "invalid_grant",
                        "AADSTS70000: The provided value for the 'code' parameter is not valid.",
                    );
                }
            };
            // A code is bound to the tenant it was issued at.
            if code.param("tenant") != Some(tenant.as_str()) {
                return error(
                    "invalid_grant",
                    "AADSTS50148: The code was issued for another tenant.",
                );
            }
            let asked = code.param("scope").unwrap_or_default();
            let offline = asked.split(' ').any(|s| s == "offline_access");
            (
                memory.new_grant(),
                code.account.clone(),
                asked.to_owned(),
                offline,
            )
        }
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let given = p
                .get("refresh_token")
                .map(String::as_str)
                .unwrap_or_default();
            let Some((grant, account, scope)) = memory.refresh(given) else {
                return error(
                    "invalid_grant",
                    "AADSTS70008: The provided authorization code or refresh token has expired.",
                );
            };
            (grant, account, scope, true)
        }
        _ => return error("unsupported_grant_type", "AADSTS70003"),
    };
    let access_token = memory.issue_access(grant, &account, &scope, "eyJ0eXAi.");
    let ttl = memory.access_ttl.unwrap_or(ACCESS_TTL);
    let mut answer = json!({
        "token_type": "Bearer",
        // Entra never lists offline_access, though it grants it.
        "scope": listed(&scope),
        "expires_in": ttl.as_secs(),
        "ext_expires_in": ttl.as_secs(),
        "access_token": access_token,
    });
    if offline {
        answer["refresh_token"] = json!(memory.issue_refresh(grant, &account, &scope, "1.AX"));
    }
    json(200, answer)
}

fn listed(scope: &str) -> String {
    scope
        .split(' ')
        .filter(|s| !s.is_empty() && *s != "offline_access")
        .collect::<Vec<_>>()
        .join(" ")
}

fn unauthenticated() -> HttpResponse {
    json(
        401,
        json!({"error": {"code": "InvalidAuthenticationToken",
                         "message": "Access token validation failure. Invalid audience."}}),
    )
}

async fn me(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    match bearer_account(&req, &fake) {
        Some(account) => json(200, user(&account)),
        None => unauthenticated(),
    }
}

fn user(account: &Account) -> Value {
    json!({"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users/$entity",
           "id": account.id, "userPrincipalName": account.login, "mail": account.login,
           "displayName": "Alice Example"})
}

async fn graph(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    fake.memory().api_seen.push(seen(&req));
    let query: BTreeMap<String, String> = params(&req, &[]);
    match bearer_account(&req, &fake) {
        Some(account) => json(
            200,
            json!({"path": req.path(), "query": query, "user": account.id}),
        ),
        None => unauthenticated(),
    }
}
