//! A fake Google: `/o/oauth2/v2/auth` approves at once and answers with
//! `iss=https://accounts.google.com` (the preset's issuer), the expanded
//! scope, `authuser` and `prompt`. Its granular consent lets the person
//! untick any scope but the sign-in ones (`FakeProvider::tick_only`): the
//! code then grants, and the answers name, only those left ticked.
//! `/token` answers JSON with `expires_in`
//! 3599, a refresh token only when the authorize request had both
//! `access_type=offline` and `prompt=consent`, and on refresh a new access
//! token without a new refresh token. `/v1/userinfo` is OpenID Connect's;
//! `/revoke` ends the whole grant of an access or refresh token.
//! `/hostile/echo` reflects the grant's secrets (see `hostile`).

use std::{collections::BTreeMap, time::Duration};

use actix_web::{HttpRequest, HttpResponse, web};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    http::{client, credentials, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared, pkce_matches, random},
};

pub const ISSUER: &str = "https://accounts.google.com";
const ACCESS_TTL: Duration = Duration::from_secs(3599);
const UNAUTHENTICATED: &str = "Request had invalid authentication credentials. Expected OAuth 2 \
    access token, login cookie or other valid authentication credential.";

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "1234567890".into(),
        login: "alice@example.com".into(),
    };
    let client_id = "1234-fake.apps.googleusercontent.com";
    serve(
        Kind::Google,
        Shared::new(client_id, account, Some(ACCESS_TTL)),
        routes,
    )
    .await
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/o/oauth2/v2/auth", web::get().to(authorize))
        .route("/token", web::post().to(token))
        .route("/revoke", web::post().to(revoke))
        .route("/v1/userinfo", web::get().to(userinfo))
        .route(
            "/calendar/v3/users/me/calendarList",
            web::get().to(calendars),
        )
        .configure(super::hostile::routes);
}

/// Google's short scope names, as its answers spell them.
fn expand(scope: &str) -> String {
    let full = |s| match s {
        "email" => "https://www.googleapis.com/auth/userinfo.email",
        "profile" => "https://www.googleapis.com/auth/userinfo.profile",
        other => other,
    };
    scope
        .split_whitespace()
        .map(full)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The sign-in scopes, which granular consent asks for as a whole.
const SIGN_IN: [&str; 3] = [
    "openid",
    "https://www.googleapis.com/auth/userinfo.email",
    "https://www.googleapis.com/auth/userinfo.profile",
];

/// Of the `asked` scopes (expanded), those granted: every one, or with
/// `ticked` (the person's choice on the granular consent screen) the
/// sign-in scopes and those ticked.
fn granted(asked: &str, ticked: Option<&str>) -> String {
    let Some(ticked) = ticked else {
        return asked.to_owned();
    };
    let ticked = expand(&ticked.replace(',', " "));
    asked
        .split(' ')
        .filter(|s| SIGN_IN.contains(s) || ticked.split(' ').any(|t| t == *s))
        .collect::<Vec<_>>()
        .join(" ")
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let mut p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(
            401,
            "Error 401: invalid_client. The OAuth client was not found.",
        );
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "Error 400: redirect_uri_mismatch");
    };
    if p.get("response_type").map(String::as_str) != Some("code") || !p.contains_key("scope") {
        return page(400, "Error 400: invalid_request");
    }
    let state = p.get("state").cloned().unwrap_or_default();
    let ticked = fake.memory().ticked.clone();
    let scope = granted(&expand(&p["scope"]), ticked.as_deref());
    // The code grants what was left ticked, not what was asked.
    p.insert("scope".into(), scope.clone());
    let consent = p
        .get("prompt")
        .is_some_and(|v| v.split(' ').any(|v| v == "consent"));
    let prompt = if consent { "consent" } else { "none" };
    let code = random("4/0A");
    match fake.memory().authorize(p, code) {
        Some(code) => redirect(
            back,
            &[
                ("state", &state),
                ("iss", ISSUER),
                ("code", &code),
                ("scope", &scope),
                ("authuser", "0"),
                ("prompt", prompt),
            ],
        ),
        None => redirect(
            back,
            &[
                ("error", "access_denied"),
                ("state", &state),
                ("iss", ISSUER),
            ],
        ),
    }
}

async fn token(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let p = params(&req, &body);
    let (id, secret) = client(&req, &p);
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return json(
            401,
            json!({"error": "invalid_client", "error_description": "Unauthorized"}),
        );
    }
    let refused = |error: &str, description: &str| {
        json(
            400,
            json!({"error": error, "error_description": description}),
        )
    };
    match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => exchange(&p, &fake),
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let mut memory = fake.memory();
            let Some((_, grant, account, scope)) = memory.refresh_param(&p) else {
                return refused("invalid_grant", "Token has been expired or revoked.");
            };
            let access_token = memory.issue_access(grant, &account, &scope, "ya29.");
            let ttl = memory.access_ttl.unwrap_or(ACCESS_TTL);
            json(
                200,
                tokens(&fake.client_id, &account, &scope, access_token, ttl),
            )
        }
        _ => refused("unsupported_grant_type", "Invalid grant_type: "),
    }
}

fn exchange(p: &BTreeMap<String, String>, fake: &Shared) -> HttpResponse {
    let refused = |description: &str| {
        json(
            400,
            json!({"error": "invalid_grant", "error_description": description}),
        )
    };
    let mut memory = fake.memory();
    let given = p.get("code").map(String::as_str).unwrap_or_default();
    let Some(code) = memory.take_code(given) else {
        return refused("Bad Request");
    };
    if p.get("redirect_uri").map(String::as_str) != code.param("redirect_uri") {
        return json(
            400,
            json!({"error": "redirect_uri_mismatch", "error_description": "Bad Request"}),
        );
    }
    if let Some(challenge) = code.param("code_challenge") {
        // Google defaults to `plain` when no method is named.
        let method = code.param("code_challenge_method").unwrap_or("plain");
        match p.get("code_verifier") {
            None => return refused("Missing code verifier."),
            Some(v) if !pkce_matches(method, challenge, v) => {
                return refused("Invalid code verifier.");
            }
            Some(_) => {}
        }
    }
    let scope = expand(code.param("scope").unwrap_or_default());
    let grant = memory.new_grant();
    let access_token = memory.issue_access(grant, &code.account, &scope, "ya29.");
    let ttl = memory.access_ttl.unwrap_or(ACCESS_TTL);
    let mut answer = tokens(&fake.client_id, &code.account, &scope, access_token, ttl);
    let offline = code.param("access_type") == Some("offline");
    let consent = code
        .param("prompt")
        .is_some_and(|v| v.split(' ').any(|v| v == "consent"));
    if offline && consent {
        answer["refresh_token"] = json!(memory.issue_refresh(grant, &code.account, &scope, "1//0"));
    }
    json(200, answer)
}

/// A token answer (without refresh token), with an ID token when `openid`
/// was granted. The ID token's signature is junk: nothing here checks it.
fn tokens(
    client_id: &str,
    account: &Account,
    scope: &str,
    access_token: String,
    ttl: Duration,
) -> Value {
    let mut answer = json!({
        "access_token": access_token,
        "expires_in": ttl.as_secs(),
        "scope": scope,
        "token_type": "Bearer",
    });
    if scope.split(' ').any(|s| s == "openid") {
        let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let claims = json!({"iss": ISSUER, "aud": client_id, "azp": client_id,
                            "sub": account.id, "email": account.login, "email_verified": true});
        let header = json!({"alg": "RS256", "kid": "fake", "typ": "JWT"});
        answer["id_token"] = json!(format!("{}.{}.{}", part(header), part(claims), random("")));
    }
    answer
}

async fn revoke(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.revoke);
    let p = params(&req, &body);
    let token = p.get("token").map(String::as_str).unwrap_or_default();
    if fake.memory().revoke_grant_of(token) {
        json(200, json!({}))
    } else {
        json(
            400,
            json!({"error": "invalid_token", "error_description": "Token expired or revoked"}),
        )
    }
}

fn account_of(req: &HttpRequest, fake: &Shared) -> Option<Account> {
    let token = credentials(req, &["bearer"])?;
    fake.memory().access(token).map(|a| a.account)
}

async fn userinfo(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    match account_of(&req, &fake) {
        Some(account) => json(
            200,
            json!({"sub": account.id, "email": account.login, "email_verified": true,
                   "name": "Alice", "given_name": "Alice"}),
        ),
        None => HttpResponse::Unauthorized()
            .insert_header((
                "WWW-Authenticate",
                r#"Bearer realm="https://accounts.google.com/", error="invalid_token""#,
            ))
            .json(json!({"error": "invalid_request", "error_description": "Invalid Credentials"})),
    }
}

async fn calendars(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    match account_of(&req, &fake) {
        Some(account) => json(
            200,
            json!({"kind": "calendar#calendarList",
                   "items": [{"kind": "calendar#calendarListEntry", "id": account.login, "primary": true}]}),
        ),
        None => json(
            401,
            json!({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": UNAUTHENTICATED}}),
        ),
    }
}
