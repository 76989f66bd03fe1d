//! GitHub's REST endpoints with which an OAuth app manages its users'
//! tokens: `DELETE /applications/{client_id}/token` ("Delete an app
//! token") ends the access token in its JSON body, and
//! `DELETE /applications/{client_id}/grant` ("Delete an app
//! authorization") every token the app holds for that token's account;
//! both answer 204. They want a User-Agent,
//! the app's `client_id` and `client_secret` as HTTP Basic (401 for wrong
//! ones, as for any invalid credentials; 404 without, as for any endpoint
//! asked without a credential it needs) and a live token (422 "Validation
//! Failed" otherwise, the one refusal its reference lists).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    github::{DOCS, no_user_agent},
    http::{client, credentials, json},
    state::{Counters, Shared},
};

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    // One resource for both deletions: any other last segment matches
    // nothing here and gets the fake's own 404, as at GitHub.
    cfg.route(
        "/applications/{client_id}/{ends:grant|token}",
        web::delete().to(delete),
    );
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
    if let Some(forbidden) = no_user_agent(&req) {
        return forbidden;
    }
    let error = |status: u16, message: &str| {
        json(
            status,
            json!({"message": message, "documentation_url": DOCS, "status": status.to_string()}),
        )
    };
    if credentials(&req, &["basic"]).is_none() {
        return error(404, "Not Found");
    }
    let (id, secret) = client(&req, &Default::default());
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return error(401, "Bad credentials");
    }
    let (client_id, ends) = path.into_inner();
    // The route's pattern admits `grant` and `token` alone.
    let ends = match ends.as_str() {
        "grant" => Ends::Grant,
        _ => Ends::Token,
    };
    if client_id != fake.client_id {
        return error(404, "Not Found");
    }
    let token = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b.get("access_token")?.as_str().map(str::to_owned))
        .unwrap_or_default();
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

#[cfg(test)]
#[path = "github_applications_tests.rs"]
mod tests;
