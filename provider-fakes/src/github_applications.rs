//! GitHub's REST endpoints with which an OAuth app manages its users'
//! tokens: `DELETE /applications/{client_id}/token` ("Delete an app
//! token") ends the access token in its JSON body, and
//! `DELETE /applications/{client_id}/grant` ("Delete an app
//! authorization") every token the app holds for that token's account;
//! both answer 204 and want a live token (422 "Validation Failed"
//! otherwise, the one refusal their reference lists).
//! `POST /applications/{client_id}/token` ("Check a token") ends nothing:
//! 200 with the token's authorization for a live token, 404 otherwise.
//! All of them want a User-Agent and the app's `client_id` and
//! `client_secret` as HTTP Basic (401 for wrong ones, as for any invalid
//! credentials; 404 without, as for any endpoint asked without a
//! credential it needs).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    github::{DOCS, no_user_agent},
    http::{client, credentials, json},
    state::{Access, Counters, Shared},
};

/// The fake keeps no creation time: every authorization it shows was
/// made and last used at this moment.
const MADE_AT: &str = "2024-01-01T00:00:00Z";

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    // One resource for both deletions: any other last segment matches
    // nothing here and gets the fake's own 404, as at GitHub.
    cfg.route(
        "/applications/{client_id}/{ends:grant|token}",
        web::delete().to(delete),
    )
    .route("/applications/{client_id}/token", web::post().to(check));
}

/// What a deletion ends, by the path's last segment.
#[derive(Clone, Copy)]
enum Ends {
    /// `token`: the token alone.
    Token,
    /// `grant`: every token of the token's account.
    Grant,
}

async fn delete(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.revoke);
    let (client_id, ends) = path.into_inner();
    if let Some(refusal) = not_the_app(&req, &client_id, &fake) {
        return refusal;
    }
    // The route's pattern admits `grant` and `token` alone.
    let ends = match ends.as_str() {
        "grant" => Ends::Grant,
        _ => Ends::Token,
    };
    let token = access_token(&body);
    let ended = match ends {
        Ends::Token => fake.memory().revoke_access(&token),
        Ends::Grant => fake.memory().revoke_account_of(&token),
    };
    if ended {
        HttpResponse::NoContent().finish()
    } else {
        error(422, "Validation Failed")
    }
}

/// "Check a token": the live token's authorization, or 404 as for a
/// token GitHub does not know.
async fn check(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.check);
    if let Some(refusal) = not_the_app(&req, &path.into_inner(), &fake) {
        return refusal;
    }
    let token = access_token(&body);
    let Some(access) = fake.memory().access(&token) else {
        return error(404, "Not Found");
    };
    json(200, authorization(&fake, &token, &access))
}

/// GitHub's refusal of a request that does not come from the app its
/// path names, if it is one.
fn not_the_app(req: &HttpRequest, client_id: &str, fake: &Shared) -> Option<HttpResponse> {
    if let Some(forbidden) = no_user_agent(req) {
        return Some(forbidden);
    }
    if credentials(req, &["basic"]).is_none() {
        return Some(error(404, "Not Found"));
    }
    let (id, secret) = client(req, &Default::default());
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return Some(error(401, "Bad credentials"));
    }
    (client_id != fake.client_id).then(|| error(404, "Not Found"))
}

/// GitHub's error body.
fn error(status: u16, message: &str) -> HttpResponse {
    json(
        status,
        json!({"message": message, "documentation_url": DOCS, "status": status.to_string()}),
    )
}

/// The `access_token` of a JSON body; empty when there is none.
fn access_token(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| b.get("access_token")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A token's authorization as "Check a token" shows it.
fn authorization(fake: &Shared, token: &str, access: &Access) -> Value {
    let url = format!("https://api.github.com/authorizations/{}", access.grant);
    let scopes: Vec<&str> = access.scope.split(',').filter(|s| !s.is_empty()).collect();
    let last_eight = &token[token.len().saturating_sub(8)..];
    let user_id: Value = access
        .account
        .id
        .parse::<u64>()
        .map_or_else(|_| json!(access.account.id), |n| json!(n));
    json!({
        "id": access.grant,
        "url": url,
        "scopes": scopes,
        "token": token,
        "token_last_eight": last_eight,
        "hashed_token": format!("{:x}", Sha256::digest(token.as_bytes())),
        "app": {
            "client_id": fake.client_id,
            "name": "A fake GitHub OAuth app",
            "url": "https://example.com",
        },
        "note": null,
        "note_url": null,
        "created_at": MADE_AT,
        "updated_at": MADE_AT,
        "expires_at": null,
        "fingerprint": null,
        "user": {
            "login": access.account.login,
            "id": user_id,
            "type": "User",
        },
        "installation": null,
    })
}

#[cfg(test)]
#[path = "github_applications_tests.rs"]
mod tests;
