//! A hostile provider API: `GET /hostile/echo` answers, to a caller with a
//! live access token, every secret of its grant (the access token, the
//! refresh tokens, the client secret) in every form a server might reflect
//! a header in: raw, percent-encoded (both hex cases), JSON-escaped with
//! `\/` and with `\uXXXX` for every character, as values and as keys.
//! `?as=text` answers the same text as `text/plain`. `GET /hostile/moved`
//! redirects to a path that holds the caller's access token. `POST
//! /hostile/slow` takes the request, counts it, and answers only after
//! three seconds. `GET /hostile/limited` answers 429 with `Retry-After:
//! 30`; `?as=github` answers as GitHub's primary rate limit does: 403 with
//! `x-ratelimit-remaining: 0` and the reset ten minutes on.

use actix_web::{HttpRequest, HttpResponse, web};

use super::{
    http::credentials,
    state::{Counters, Shared},
};

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/hostile/echo", web::get().to(echo))
        .route("/hostile/moved", web::get().to(moved))
        .route("/hostile/slow", web::post().to(slow))
        .route("/hostile/limited", web::get().to(limited));
}

async fn limited(req: HttpRequest) -> HttpResponse {
    if req.query_string().contains("as=github") {
        let reset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() + 600)
            .unwrap_or_default();
        return HttpResponse::Forbidden()
            .insert_header(("x-ratelimit-limit", "5000"))
            .insert_header(("x-ratelimit-remaining", "0"))
            .insert_header(("x-ratelimit-reset", reset.to_string()))
            .json(serde_json::json!({
                "message": "API rate limit exceeded for user ID 1.",
                "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"
            }));
    }
    HttpResponse::TooManyRequests()
        .insert_header(("retry-after", "30"))
        .json(serde_json::json!({"error": "rate_limited"}))
}

/// The forms of `secret` a reflecting server could send back, as they
/// appear in the answer's text.
pub fn forms(secret: &str) -> Vec<String> {
    let pct_upper: String = secret.bytes().map(|b| format!("%{b:02X}")).collect();
    let pct_lower: String = secret.bytes().map(|b| format!("%{b:02x}")).collect();
    let slash = secret.replace('/', "\\/");
    let unicode: String = secret
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let unicode_upper: String = secret
        .chars()
        .map(|c| format!("\\u{:04X}", c as u32))
        .collect();
    let slash_only_escaped = secret.replace('/', "\\u002f");
    vec![
        secret.to_owned(),
        pct_upper,
        pct_lower,
        slash,
        unicode,
        unicode_upper,
        slash_only_escaped,
    ]
}

async fn echo(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    let Some(token) = credentials(&req, &["bearer"]) else {
        return HttpResponse::Unauthorized().finish();
    };
    let Some(mut secrets) = fake.memory().grant_tokens(token) else {
        return HttpResponse::Unauthorized().finish();
    };
    secrets.push(fake.client_secret.clone());
    let as_text = req.query_string().contains("as=text");
    let mut entries = Vec::new();
    for (i, secret) in secrets.iter().enumerate() {
        for (j, form) in forms(secret).iter().enumerate() {
            // Escapes are written as they are, so that a JSON parser
            // decodes them back into the secret.
            entries.push(format!("\"v{i}-{j}\": \"Bearer {form}\""));
            entries.push(format!("\"{form}\": {j}"));
        }
    }
    let body = format!("{{{}}}", entries.join(", "));
    // `as=typed`: the token in the media type itself.
    let content_type = if req.query_string().contains("as=typed") {
        format!("application/vnd.{token}+json")
    } else if as_text {
        "text/plain".to_owned()
    } else {
        "application/json".to_owned()
    };
    HttpResponse::Ok().content_type(content_type).body(body)
}

async fn moved(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    let Some(token) = credentials(&req, &["bearer"]) else {
        return HttpResponse::Unauthorized().finish();
    };
    HttpResponse::Found()
        .insert_header(("Location", format!("/files/{token}/report.pdf")))
        .finish()
}

async fn slow(fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    HttpResponse::Ok().json(serde_json::json!({"done": true}))
}
