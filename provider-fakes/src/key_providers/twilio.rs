//! The Twilio-like fake (see the module above for its quirks).

use actix_web::{HttpRequest, HttpResponse, web};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::json;

use super::{KeyFake, Shared, echo_all, random_hex, record, serve};

/// A Twilio-like fake with a random account SID and auth token.
pub async fn start() -> KeyFake {
    serve(format!("AC{}", random_hex(32)), random_hex(32), routes).await
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/2010-04-01/Accounts/{file}", web::get().to(account))
        .route("/2010-04-01/Accounts/{sid}/Echo.json", web::get().to(echo))
        .route(
            "/2010-04-01/Accounts/{sid}/{tail:.*}",
            web::get().to(resource),
        );
}

/// Twilio's answer to missing or wrong credentials.
fn unauthenticated() -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header(("WWW-Authenticate", "Basic realm=\"Twilio API\""))
        .json(json!({
            "code": 20003,
            "message": "Authenticate",
            "more_info": "https://www.twilio.com/docs/errors/20003",
            "status": 401
        }))
}

fn not_found() -> HttpResponse {
    HttpResponse::NotFound().json(json!({
        "code": 20404,
        "message": "The requested resource was not found",
        "more_info": "https://www.twilio.com/docs/errors/20404",
        "status": 404
    }))
}

/// The account SID of good Basic credentials, if they are.
fn authenticated(req: &HttpRequest, shared: &Shared) -> Option<String> {
    let header = req.headers().get("authorization")?.to_str().ok()?;
    let encoded = header.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(STANDARD.decode(encoded).ok()?).ok()?;
    let (sid, token) = decoded.split_once(':')?;
    (sid == shared.first && token == shared.second).then(|| sid.to_owned())
}

async fn account(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    let Some(sid) = authenticated(&req, &shared) else {
        return unauthenticated();
    };
    let file = req.match_info().query("file");
    if file != format!("{sid}.json") {
        return not_found();
    }
    HttpResponse::Ok().json(json!({
        "sid": sid,
        "friendly_name": "Alice's Twilio",
        "status": "active",
        "type": "Full",
    }))
}

async fn echo(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    if authenticated(&req, &shared).is_none() {
        return unauthenticated();
    }
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let basic = header.trim_start_matches("Basic ").to_owned();
    echo_all(&[&shared.second, &basic])
}

async fn resource(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    record(&req, &shared);
    let Some(sid) = authenticated(&req, &shared) else {
        return unauthenticated();
    };
    if req.match_info().query("sid") != sid {
        return not_found();
    }
    HttpResponse::Ok().json(json!({
        "messages": [{"sid": "SM1", "body": "hello"}],
        "uri": req.path(),
    }))
}
