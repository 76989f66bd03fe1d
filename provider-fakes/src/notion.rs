//! A fake Notion (public connection): `/v1/oauth/authorize` wants
//! `owner=user` and approves at once (pages are chosen on Notion's consent
//! screen, so there are no scopes). `/v1/oauth/token` takes the client only
//! as HTTP Basic — a secret in the body is refused with `invalid_client` —
//! and its parameters only as a JSON body; it answers the bot, workspace
//! and owner beside the token, with no `expires_in`: the access token does
//! not expire. The answer carries a refresh token too, as Notion's now
//! does; a refresh answers a new pair and retires the old one. The API
//! (`/v1/users/me`, the token's bot user, and `/v1/users`) wants a
//! `Notion-Version` header and answers Notion's error objects.
//! `/v1/oauth/revoke` ends the grant of an access token: the client as
//! HTTP Basic, `Notion-Version`, and a JSON body of `token` alone (the
//! fake refuses fields the reference does not list, such as RFC 7009's
//! `token_type_hint`).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    http::{client, credentials, header, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared},
};

/// The workspace the fake's bot lives in; its name is the account label.
pub const WORKSPACE_ID: &str = "5a1b2c3d-0000-4000-8000-00000000beef";

pub async fn start() -> FakeProvider {
    // A bot id: one per workspace the user connects.
    let account = Account {
        id: "9e1f4c2a-7d3b-4e8f-a1c2-3b4d5e6f7a8b".into(),
        login: "Acme Workspace".into(),
    };
    let client_id = "1a2b3c4d-fake-notion-client";
    serve(Kind::Notion, Shared::new(client_id, account, None), routes).await
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/oauth/authorize", web::get().to(authorize))
        .route("/v1/oauth/token", web::post().to(token))
        .route("/v1/oauth/revoke", web::post().to(revoke))
        .route("/v1/users/me", web::get().to(me))
        .route("/v1/users", web::get().to(users));
}

/// Notion's error object.
fn error(status: u16, code: &str, message: &str) -> HttpResponse {
    json(
        status,
        json!({"object": "error", "status": status, "code": code, "message": message,
               "request_id": uuid::Uuid::new_v4().to_string()}),
    )
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(400, "Missing or invalid client_id.");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "Invalid redirect_uri.");
    };
    if p.get("response_type").map(String::as_str) != Some("code") {
        return page(400, "response_type must be code.");
    }
    if p.get("owner").map(String::as_str) != Some("user") {
        return page(400, "owner must be user.");
    }
    let state = p.get("state").cloned().unwrap_or_default();
    let code = uuid::Uuid::new_v4().to_string();
    match fake.memory().authorize(p, code) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(back, &[("error", "access_denied"), ("state", &state)]),
    }
}

fn oauth_error(status: u16, error: &str, description: &str) -> HttpResponse {
    json(
        status,
        json!({"error": error, "error_description": description}),
    )
}

async fn token(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let is_json = header(&req, "content-type").is_some_and(|c| c.starts_with("application/json"));
    let Some(Value::Object(body)) = is_json
        .then(|| serde_json::from_slice::<Value>(&body).ok())
        .flatten()
    else {
        return oauth_error(400, "invalid_request", "Request body must be JSON.");
    };
    let p: std::collections::BTreeMap<String, String> = body
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    // Basic only: `client` falls back to the body, which Notion never reads.
    let basic = credentials(&req, &["basic"]).is_some();
    let (id, secret) = client(&req, &p);
    if !basic
        || p.contains_key("client_secret")
        || id.as_ref() != Some(&fake.client_id)
        || secret.as_ref() != Some(&fake.client_secret)
    {
        return oauth_error(401, "invalid_client", "Invalid client.");
    }
    match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => exchange(&p, &fake),
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let mut memory = fake.memory();
            let Some((given, grant, account, scope)) = memory.refresh_param(&p) else {
                return oauth_error(400, "invalid_grant", "Invalid refresh token.");
            };
            memory.take_refresh(&given);
            let access = memory.issue_access(grant, &account, &scope, "ntn_");
            let refresh = memory.issue_refresh(grant, &account, &scope, "nrt_");
            json(200, answer(&account, access, refresh))
        }
        _ => oauth_error(400, "unsupported_grant_type", "Unsupported grant type."),
    }
}

async fn revoke(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.revoke);
    if header(&req, "notion-version").is_none_or(str::is_empty) {
        return error(
            400,
            "missing_version",
            "Notion-Version header failed validation: Notion-Version header should be defined, \
             instead was `undefined`.",
        );
    }
    let basic = credentials(&req, &["basic"]).is_some();
    let (id, secret) = client(&req, &Default::default());
    if !basic
        || id.as_ref() != Some(&fake.client_id)
        || secret.as_ref() != Some(&fake.client_secret)
    {
        return error(401, "unauthorized", "Invalid client.");
    }
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid_json", "Error parsing JSON body.");
    };
    if let Some(other) = body.keys().find(|k| *k != "token") {
        return error(
            400,
            "validation_error",
            &format!("body failed validation: body.{other} should be not present."),
        );
    }
    let token = body
        .get("token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if fake.memory().revoke_grant_of(token) {
        json(200, json!({"request_id": uuid::Uuid::new_v4().to_string()}))
    } else {
        error(401, "unauthorized", "API token is invalid.")
    }
}

fn exchange(p: &std::collections::BTreeMap<String, String>, fake: &Shared) -> HttpResponse {
    let mut memory = fake.memory();
    let given = p.get("code").map(String::as_str).unwrap_or_default();
    let Some(code) = memory.take_code(given) else {
        return oauth_error(400, "invalid_grant", "Invalid code.");
    };
    if p.get("redirect_uri").map(String::as_str) != code.param("redirect_uri") {
        return oauth_error(400, "invalid_grant", "Invalid redirect_uri.");
    }
    let grant = memory.new_grant();
    let access = memory.issue_access(grant, &code.account, "", "ntn_");
    let refresh = memory.issue_refresh(grant, &code.account, "", "nrt_");
    json(200, answer(&code.account, access, refresh))
}

fn answer(account: &Account, access: String, refresh: String) -> Value {
    json!({
        "access_token": access,
        "token_type": "bearer",
        "refresh_token": refresh,
        "bot_id": account.id,
        "workspace_id": WORKSPACE_ID,
        "workspace_name": account.login,
        "workspace_icon": null,
        "owner": {"type": "user", "user": {"object": "user", "id": "6f1e2d3c-0000-4000-8000-0000a11ce000",
                   "type": "person", "name": "Alice", "person": {"email": "alice@example.com"}}},
        "duplicated_template_id": null,
        "request_id": uuid::Uuid::new_v4().to_string(),
    })
}

/// The bot behind the request, or Notion's refusal: the version header is
/// checked before the token, as Notion does.
fn authenticated(req: &HttpRequest, fake: &Shared) -> Result<Account, Box<HttpResponse>> {
    if header(req, "notion-version").is_none_or(str::is_empty) {
        return Err(Box::new(error(
            400,
            "missing_version",
            "Notion-Version header failed validation: Notion-Version header should be defined, \
             instead was `undefined`.",
        )));
    }
    let token = credentials(req, &["bearer"]).unwrap_or_default();
    match fake.memory().access(token) {
        Some(access) => Ok(access.account),
        None => Err(Box::new(error(
            401,
            "unauthorized",
            "API token is invalid.",
        ))),
    }
}

fn bot(account: &Account) -> Value {
    json!({
        "object": "user",
        "id": account.id,
        "name": "mcp-connect",
        "avatar_url": null,
        "type": "bot",
        "bot": {"owner": {"type": "user", "user": {"object": "user",
                          "id": "6f1e2d3c-0000-4000-8000-0000a11ce000"}},
                "workspace_name": account.login},
    })
}

async fn me(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    match authenticated(&req, &fake) {
        Ok(account) => json(200, bot(&account)),
        Err(refusal) => *refusal,
    }
}

async fn users(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    match authenticated(&req, &fake) {
        Ok(account) => json(
            200,
            json!({"object": "list", "type": "user", "user": {}, "has_more": false,
                   "next_cursor": null,
                   "results": [{"object": "user", "id": "6f1e2d3c-0000-4000-8000-0000a11ce000",
                                "type": "person", "name": "Alice"}, bot(&account)]}),
        ),
        Err(refusal) => *refusal,
    }
}
