//! A fake Slack: `/oauth/v2/authorize` approves at once (user scopes come in
//! `user_scope`, bot scopes in `scope`); `/api/oauth.v2.access` nests the
//! user token under `authed_user`, has a top-level token only when bot
//! scopes were asked for, and reports every error as HTTP 200
//! `{"ok": false, "error": …}`. Web API methods take the token as a Bearer
//! header or a `token` parameter.
//!
//! PKCE is refused (`pkce_not_allowed`) unless the app turned it on in its
//! settings (`turn_pkce_on`); then the verifier must match the challenge
//! whenever the authorize request carried one (`invalid_code_verifier`),
//! and PKCE stays optional otherwise.
//!
//! With an access-token lifetime set (`set_access_ttl`) the app has token
//! rotation on: the user token is an expiring `xoxe.xoxp-` token with an
//! `xoxe-` refresh token and `expires_in`, and each refresh answers a new
//! pair.

use std::collections::BTreeMap;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    http::{client, credentials, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Access, Account, Code, Counters, Shared, pkce_matches, random},
};

const TEAM: (&str, &str) = ("T1", "Acme");

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "U1234".into(),
        login: "alice".into(),
    };
    serve(Kind::Slack, Shared::new("1111.2222", account, None), routes).await
}

impl FakeProvider {
    /// The app turns PKCE on in its settings, which makes it a public
    /// client for good.
    pub fn turn_pkce_on(&self) {
        self.shared.memory().pkce_on = true;
    }
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/oauth/v2/authorize", web::get().to(authorize))
        .route("/api/oauth.v2.access", web::post().to(access))
        .route("/api/{method}", web::route().to(method));
}

fn fail(error: &str) -> HttpResponse {
    json(200, json!({"ok": false, "error": error}))
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(400, "Invalid client_id parameter");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "redirect_uri did not match any configured URIs.");
    };
    let state = p.get("state").cloned().unwrap_or_default();
    let code = format!("{}.{}", &random("")[..20], random(""));
    match fake.memory().authorize(p, code) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(back, &[("error", "access_denied"), ("state", &state)]),
    }
}

async fn access(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let p = params(&req, &body);
    let (id, secret) = client(&req, &p);
    if id.as_ref() != Some(&fake.client_id) {
        return fail("invalid_client_id");
    }
    if secret.as_ref() != Some(&fake.client_secret) {
        return fail("bad_client_secret");
    }
    let mut memory = fake.memory();
    let rotation = memory.access_ttl;
    if p.get("grant_type").map(String::as_str) == Some("refresh_token") {
        Counters::bump(&fake.calls.refresh);
        // Without token rotation there is nothing to refresh.
        let found = rotation.and_then(|ttl| Some((ttl, memory.refresh_param(&p)?)));
        let Some((ttl, (given, grant, account, scope))) = found else {
            return fail("invalid_refresh_token");
        };
        memory.take_refresh(&given);
        let token = memory.issue_access(grant, &account, &scope, "xoxe.xoxp-1-");
        let refresh = memory.issue_refresh(grant, &account, &scope, "xoxe-1-");
        return json(
            200,
            json!({"ok": true, "access_token": token, "expires_in": ttl.as_secs(),
                   "refresh_token": refresh, "token_type": "user", "scope": scope}),
        );
    }
    let given = p.get("code").map(String::as_str).unwrap_or_default();
    let Some(code) = memory.take_code(given) else {
        return fail("invalid_code");
    };
    if p.get("redirect_uri").map(String::as_str) != code.param("redirect_uri") {
        return fail("bad_redirect_uri");
    }
    if let Some(error) = pkce_refusal(&code, &p, memory.pkce_on) {
        return fail(error);
    }
    let grant = memory.new_grant();
    let user_scope = code.param("user_scope").unwrap_or_default().to_owned();
    let mut authed_user = json!({"id": code.account.id});
    if !user_scope.is_empty() {
        let prefix = if rotation.is_some() {
            "xoxe.xoxp-1-"
        } else {
            "xoxp-1-"
        };
        let token = memory.issue_access(grant, &code.account, &user_scope, prefix);
        authed_user["scope"] = json!(user_scope);
        authed_user["access_token"] = json!(token);
        authed_user["token_type"] = json!("user");
        if let Some(ttl) = rotation {
            let refresh = memory.issue_refresh(grant, &code.account, &user_scope, "xoxe-1-");
            authed_user["refresh_token"] = json!(refresh);
            authed_user["expires_in"] = json!(ttl.as_secs());
        }
    }
    let mut answer = json!({
        "ok": true,
        "app_id": "A0FAKEAPP",
        "authed_user": authed_user,
        "team": {"id": TEAM.0, "name": TEAM.1},
        "enterprise": null,
        "is_enterprise_install": false,
    });
    let bot_scope = code.param("scope").unwrap_or_default().to_owned();
    if !bot_scope.is_empty() {
        let bot = Account {
            id: "U0BOT".into(),
            login: "fakebot".into(),
        };
        let token = memory.issue_access(grant, &bot, &bot_scope, "xoxb-1-");
        answer["access_token"] = json!(token);
        answer["token_type"] = json!("bot");
        answer["scope"] = json!(bot_scope);
        answer["bot_user_id"] = json!(bot.id);
    }
    json(200, answer)
}

/// Why Slack refuses the PKCE of this exchange, if it does. The docs list
/// `pkce_not_allowed` without saying which argument brings it, so either
/// does here.
fn pkce_refusal(code: &Code, p: &BTreeMap<String, String>, pkce_on: bool) -> Option<&'static str> {
    let challenge = code.param("code_challenge");
    let verifier = p.get("code_verifier");
    if !pkce_on {
        return (challenge.is_some() || verifier.is_some()).then_some("pkce_not_allowed");
    }
    let challenge = challenge?;
    let method = code.param("code_challenge_method").unwrap_or("plain");
    let matched = verifier.is_some_and(|v| pkce_matches(method, challenge, v));
    (!matched).then_some("invalid_code_verifier")
}

/// Web API methods: the token from `Authorization: Bearer` or `token`.
async fn method(
    req: HttpRequest,
    body: web::Bytes,
    name: web::Path<String>,
    fake: web::Data<Shared>,
) -> HttpResponse {
    let p = params(&req, &body);
    let counter = match name.as_str() {
        "auth.test" => &fake.calls.userinfo,
        "auth.revoke" => &fake.calls.revoke,
        _ => &fake.calls.api,
    };
    Counters::bump(counter);
    let token = credentials(&req, &["bearer"]).or(p.get("token").map(String::as_str));
    let Some(token) = token else {
        return fail("not_authed");
    };
    let Some(access) = fake.memory().access(token) else {
        return fail("invalid_auth");
    };
    match name.as_str() {
        "auth.test" => json(
            200,
            json!({"ok": true, "url": "https://acme.slack.com/", "team": TEAM.1,
                   "user": access.account.login, "team_id": TEAM.0,
                   "user_id": access.account.id, "is_enterprise_install": false}),
        ),
        "auth.revoke" => {
            let test = p.get("test").is_some_and(|t| t == "true" || t == "1");
            if !test {
                fake.memory().revoke_grant_of(token);
            }
            json(200, json!({"ok": true, "revoked": !test}))
        }
        "users.identity" => needs(&access, "identity.basic", || {
            json!({"ok": true, "user": {"name": access.account.login, "id": access.account.id},
                   "team": {"id": TEAM.0}})
        }),
        "conversations.list" => needs(
            &access,
            "channels:read",
            || json!({"ok": true, "channels": [], "response_metadata": {"next_cursor": ""}}),
        ),
        "users.list" => needs(&access, "users:read", || {
            json!({"ok": true, "members": [{"id": access.account.id, "name": access.account.login,
                   "team_id": TEAM.0}], "response_metadata": {"next_cursor": ""}})
        }),
        other => json(
            404,
            json!({"ok": false, "error": "unknown_method", "req_method": other}),
        ),
    }
}

/// Slack's answer for a token without the scope a method needs.
fn needs(access: &Access, scope: &str, answer: impl FnOnce() -> Value) -> HttpResponse {
    if access.scope.split(',').any(|s| s == scope) {
        json(200, answer())
    } else {
        json(
            200,
            json!({"ok": false, "error": "missing_scope", "needed": scope, "provided": access.scope}),
        )
    }
}

#[cfg(test)]
#[path = "slack_tests.rs"]
mod tests;
