//! A fake Strava. `/oauth/authorize` takes `scope` comma separated and
//! lets the person untick some of them (`FakeProvider::tick_only`): the
//! redirect back names the accepted ones in `scope` — the only place
//! Strava tells them, for its token answer has no `scope`. The token
//! answer carries `expires_at`, `expires_in` (six hours) and the athlete;
//! a refresh answers a new refresh token and retires the old one. The API
//! (`/api/v3/`) answers `athlete` to a token with `read`, and
//! `athlete/activities` only to one with `activity:read` — otherwise 401
//! with Strava's `Authorization Error` naming the missing permission.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    code_grant::{Refusal, entry_table, oauth_error, redeem},
    http::{client, credentials, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared},
};

const ACCESS_TTL: Duration = Duration::from_secs(21_600);

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "134815".into(),
        login: "alice_runs".into(),
    };
    serve(
        Kind::Strava,
        Shared::new("163467", account, Some(ACCESS_TTL)),
        routes,
    )
    .await
}

/// The shipped `strava` entry pointed at this fake.
pub(super) fn table(fake: &FakeProvider) -> toml::Table {
    let urls = [
        ("authorize_url", "/oauth/authorize"),
        ("token_url", "/oauth/token"),
        ("userinfo_url", "/api/v3/athlete"),
        ("api_base_url", "/api/v3/"),
    ];
    entry_table(fake, &urls, &[])
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/oauth/authorize", web::get().to(authorize))
        .route("/oauth/token", web::post().to(token))
        .route("/api/v3/athlete", web::get().to(athlete))
        .route("/api/v3/athlete/activities", web::get().to(activities));
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let mut p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(400, "Bad Request: client_id invalid");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(400, "Bad Request: redirect_uri invalid");
    };
    let state = p.get("state").cloned().unwrap_or_default();
    let asked: Vec<String> = p
        .get("scope")
        .map(|s| s.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let ticked = fake.memory().ticked.clone();
    let accepted: Vec<String> = match ticked {
        Some(only) => asked
            .into_iter()
            .filter(|s| only.split([',', ' ']).any(|t| t == s))
            .collect(),
        None => asked,
    };
    let accepted = accepted.join(",");
    // The code grants what was accepted, not what was asked.
    p.insert("scope".into(), accepted.clone());
    let code = super::state::random("")[..40].to_owned();
    match fake.memory().authorize(p, code) {
        Some(code) => redirect(
            back,
            &[("state", &state), ("code", &code), ("scope", &accepted)],
        ),
        None => redirect(back, &[("state", &state), ("error", "access_denied")]),
    }
}

async fn token(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let p = params(&req, &body);
    let (id, secret) = client(&req, &p);
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return strava_error(400, "Application", "client_id", "invalid");
    }
    let mut memory = fake.memory();
    match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let code = match redeem(&mut memory, &p) {
                Ok(code) => code,
                Err(Refusal::Code | Refusal::RedirectUri | Refusal::Verifier) => {
                    return strava_error(400, "AuthorizationCode", "code", "invalid");
                }
            };
            let scope = code.param("scope").unwrap_or_default().to_owned();
            let grant = memory.new_grant();
            let access = memory.issue_access(grant, &code.account, &scope, "");
            let refresh = memory.issue_refresh(grant, &code.account, &scope, "");
            let mut answer = tokens(&access, &refresh);
            answer["athlete"] = athlete_of(&code.account);
            json(200, answer)
        }
        Some("refresh_token") => {
            Counters::bump(&fake.calls.refresh);
            let Some((given, grant, account, scope)) = memory.refresh_param(&p) else {
                return strava_error(400, "RefreshToken", "refresh_token", "invalid");
            };
            memory.take_refresh(&given);
            let access = memory.issue_access(grant, &account, &scope, "");
            let refresh = memory.issue_refresh(grant, &account, &scope, "");
            json(200, tokens(&access, &refresh))
        }
        _ => oauth_error(400, "invalid_request", "grant_type"),
    }
}

/// Strava's token answer: no `scope`.
fn tokens(access: &str, refresh: &str) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    json!({
        "token_type": "Bearer",
        "expires_at": now + ACCESS_TTL.as_secs(),
        "expires_in": ACCESS_TTL.as_secs(),
        "refresh_token": refresh,
        "access_token": access,
    })
}

/// Strava's error shape.
fn strava_error(status: u16, resource: &str, field: &str, code: &str) -> HttpResponse {
    let message = if status == 401 {
        "Authorization Error"
    } else {
        "Bad Request"
    };
    json(
        status,
        json!({"message": message,
               "errors": [{"resource": resource, "field": field, "code": code}]}),
    )
}

fn athlete_of(account: &Account) -> Value {
    json!({"id": account.id.parse::<u64>().unwrap_or_default(), "username": account.login,
           "firstname": "Alice", "lastname": "Runner", "resource_state": 2})
}

/// The scopes of the bearer token, or Strava's refusal.
fn scopes_of(
    req: &HttpRequest,
    fake: &Shared,
) -> Result<(Account, Vec<String>), Box<HttpResponse>> {
    let token = credentials(req, &["bearer"]).unwrap_or_default();
    match fake.memory().access(token) {
        Some(access) => Ok((
            access.account,
            access.scope.split(',').map(str::to_owned).collect(),
        )),
        None => Err(Box::new(strava_error(
            401,
            "Athlete",
            "access_token",
            "invalid",
        ))),
    }
}

async fn athlete(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    match scopes_of(&req, &fake) {
        Ok((account, scopes)) if scopes.iter().any(|s| s == "read" || s == "read_all") => {
            json(200, athlete_of(&account))
        }
        Ok(_) => strava_error(401, "AccessToken", "read_permission", "missing"),
        Err(refusal) => *refusal,
    }
}

async fn activities(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    match scopes_of(&req, &fake) {
        Ok((_, scopes)) if scopes.iter().any(|s| s.starts_with("activity:read")) => json(
            200,
            json!([{"id": 1, "name": "Morning Run", "type": "Run", "distance": 5012.3}]),
        ),
        Ok(_) => strava_error(401, "AccessToken", "activity:read_permission", "missing"),
        Err(refusal) => *refusal,
    }
}
