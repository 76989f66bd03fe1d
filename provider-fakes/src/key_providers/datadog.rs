//! The Datadog-like fake (see the module above for its quirks).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::{KeyFake, Shared, echo_all, random_hex, record, serve};

/// A Datadog-like fake with a random API key (32 hex) and application
/// key (40 hex).
pub async fn start() -> KeyFake {
    serve(random_hex(32), random_hex(40), routes).await
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/validate", web::get().to(validate))
        .route("/api/v2/validate_keys", web::get().to(validate_keys))
        .route("/api/v1/echo", web::get().to(echo))
        .route("/api/{tail:.*}", web::to(api));
}

fn forbidden() -> HttpResponse {
    HttpResponse::Forbidden().json(json!({"errors": ["Forbidden"]}))
}

fn keys(req: &HttpRequest) -> (Option<&str>, Option<&str>) {
    let get = |n| req.headers().get(n).and_then(|v| v.to_str().ok());
    (get("dd-api-key"), get("dd-application-key"))
}

async fn validate(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    match keys(&req).0 {
        Some(k) if k == shared.first => HttpResponse::Ok().json(json!({"valid": true})),
        _ => forbidden(),
    }
}

/// Both keys, as Datadog's `GET /api/v2/validate_keys` checks them: 403
/// when either is not one it issued.
async fn validate_keys(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    if !both_keys(&req, &shared) {
        return forbidden();
    }
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

fn both_keys(req: &HttpRequest, shared: &Shared) -> bool {
    keys(req) == (Some(shared.first.as_str()), Some(shared.second.as_str()))
}

async fn echo(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    if !both_keys(&req, &shared) {
        return forbidden();
    }
    echo_all(&[&shared.first, &shared.second])
}

async fn api(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    if !both_keys(&req, &shared) {
        return forbidden();
    }
    HttpResponse::Ok().json(json!({
        "monitors": [{"id": 1, "name": "CPU high"}],
        "path": req.path(),
    }))
}
