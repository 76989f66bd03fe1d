//! A fake Salesforce. The login host (`127.0.0.1`) serves
//! `/services/oauth2/{authorize,token,userinfo,revoke}`; the org's REST API
//! is served only at the org's own host, which the token answer names as
//! `instance_url` (here `http://localhost:<port>`, or what a test set with
//! `set_instance_url`); the login host answers API paths with 404. Token
//! answers carry `instance_url`, `id`, `issued_at` and `signature` but no
//! `expires_in` (the session length is the org's setting); a refresh token
//! only when the `refresh_token` scope was asked, and refresh answers keep
//! it. Revoking an access token ends that token alone; revoking a refresh
//! token ends it and the access tokens issued with it; an unknown or dead
//! token is `invalid_token`. API errors are Salesforce's array of
//! `{message, errorCode}`.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::{
    FakeProvider, Kind,
    code_grant::{bearer_account, entry_table, oauth_error, redeem, seen},
    http::{client, header, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared, random},
};

const ORG_ID: &str = "00D5g000004ABCDEAZ";
/// Salesforce sessions last two hours unless the org says otherwise.
const SESSION: Duration = Duration::from_secs(7200);

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "0055g00000ABCDEAA4".into(),
        login: "alice@acme.example".into(),
    };
    let client_id = "3MVG9fakeConsumerKey";
    serve(
        Kind::Salesforce,
        Shared::new(client_id, account, Some(SESSION)),
        routes,
    )
    .await
}

/// The shipped `salesforce` entry pointed at this fake: the login host is
/// `127.0.0.1`; an org's `instance_url` must name `localhost` on the
/// fake's port (the entry's pattern, narrowed to this fake).
pub(super) fn table(fake: &FakeProvider) -> toml::Table {
    let port = fake.base.rsplit(':').next().unwrap_or_default();
    let org = format!("http://localhost:{port}");
    let urls = [
        ("authorize_url", "/services/oauth2/authorize"),
        ("token_url", "/services/oauth2/token"),
        ("revocation_url", "/services/oauth2/revoke"),
        ("userinfo_url", "/services/oauth2/userinfo"),
    ];
    let params = [
        ("instance_url", "pattern", org.as_str()),
        ("instance_url", "example", org.as_str()),
    ];
    entry_table(fake, &urls, &params)
}

impl FakeProvider {
    /// The org host the next token answers name as `instance_url`.
    pub fn set_instance_url(&self, url: &str) {
        self.shared.memory().instance_url = Some(url.to_owned());
    }
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/services/oauth2/authorize", web::get().to(authorize))
        .route("/services/oauth2/token", web::post().to(token))
        .route("/services/oauth2/userinfo", web::get().to(userinfo))
        .route("/services/oauth2/revoke", web::post().to(revoke))
        .route("/services/data/{rest:.*}", web::get().to(api));
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(
            400,
            "error=invalid_client_id&error_description=client identifier invalid",
        );
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "error=redirect_uri_mismatch");
    };
    let state = p.get("state").cloned().unwrap_or_default();
    match fake.memory().authorize(p, random("aPrx")) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(
            back,
            &[
                ("error", "access_denied"),
                ("error_description", "end-user denied authorization"),
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
        return oauth_error(400, "invalid_client", "invalid client credentials");
    }
    let own = format!("http://localhost:{}", req.app_config().local_addr().port());
    let mut memory = fake.memory();
    let instance_url = memory.instance_url.clone().unwrap_or(own);
    let (grant, account, scope, refresh) = match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let Ok(code) = redeem(&mut memory, &p) else {
                return oauth_error(400, "invalid_grant", "authentication failure");
            };
            let scope = code.param("scope").unwrap_or_default().to_owned();
            let grant = memory.new_grant();
            let refresh = scope
                .split(' ')
                .any(|s| s == "refresh_token")
                .then(|| memory.issue_refresh(grant, &code.account, &scope, "5Aep861"));
            (grant, code.account.clone(), scope, refresh)
        }
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let given = p
                .get("refresh_token")
                .map(String::as_str)
                .unwrap_or_default();
            let Some((grant, account, scope)) = memory.refresh(given) else {
                return oauth_error(400, "invalid_grant", "expired access/refresh token");
            };
            (grant, account, scope, None)
        }
        _ => return oauth_error(400, "unsupported_grant_type", "grant type not supported"),
    };
    let access_token = memory.issue_access(grant, &account, &scope, &format!("{ORG_ID}!AQ"));
    let mut answer = json!({
        "access_token": access_token,
        "signature": random(""),
        "scope": scope,
        "instance_url": instance_url,
        "id": format!("https://login.salesforce.com/id/{ORG_ID}/{}", account.id),
        "token_type": "Bearer",
        "issued_at": "1764547200000",
    });
    if let Some(refresh) = refresh {
        answer["refresh_token"] = json!(refresh);
    }
    json(200, answer)
}

async fn userinfo(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    match bearer_account(&req, &fake) {
        Some(account) => json(
            200,
            json!({"sub": format!("https://login.salesforce.com/id/{ORG_ID}/{}", account.id),
                   "user_id": account.id, "organization_id": ORG_ID,
                   "preferred_username": account.login, "email": account.login,
                   "name": "Alice Example"}),
        ),
        None => HttpResponse::Forbidden().body("Bad_OAuth_Token"),
    }
}

async fn revoke(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.revoke);
    let p = params(&req, &body);
    let token = p.get("token").map(String::as_str).unwrap_or_default();
    let mut memory = fake.memory();
    if memory.revoke_access(token) || memory.revoke_refresh(token) {
        HttpResponse::Ok().finish()
    } else {
        // Unknown, or ended already: Salesforce keeps
        // `unsupported_token_type` for tokens it does not revoke at all.
        oauth_error(400, "invalid_token", "invalid token")
    }
}

async fn api(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    fake.memory().api_seen.push(seen(&req));
    // The REST API lives at the org's host, not at the login host.
    let host = header(&req, "host").unwrap_or_default();
    if !host.starts_with("localhost:") {
        return json(
            404,
            json!([{"message": "The requested resource does not exist", "errorCode": "NOT_FOUND"}]),
        );
    }
    match bearer_account(&req, &fake) {
        Some(account) => json(
            200,
            json!({"path": req.path(), "totalSize": 1, "done": true,
                   "records": [{"Id": account.id, "Username": account.login}]}),
        ),
        None => json(
            401,
            json!([{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]),
        ),
    }
}

#[cfg(test)]
#[path = "salesforce_tests.rs"]
mod tests;
