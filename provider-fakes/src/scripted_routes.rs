//! What the scripted fake answers: the dev demo provider (HTTP Basic client
//! authentication), a strict RFC 6749 server (Basic with form-encoded
//! credentials, no secret in the body, RFC errors), and Atlassian's
//! accessible resources. GitHub, Google and Slack are not here: their
//! fakes (`github`, `google`, `slack`) serve unit and integration tests
//! alike.

use actix_web::HttpResponse;
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use crate::{http::json, scripted::Seen};

pub const DEMO_TOKEN: &str = "demo-at-SECRET-77";
pub const RFC_TOKEN: &str = "rfc-at-SECRET-99";
pub const ATLASSIAN_TOKEN: &str = "atl-at-SECRET";
pub const ATLASSIAN_CLOUD_ID: &str = "11223344-a1b2-3b33-c444-def123456789";

fn header<'a>(s: &'a Seen, name: &str) -> &'a str {
    s.headers.get(name).map(String::as_str).unwrap_or("")
}

fn form<'a>(s: &'a Seen, name: &str) -> &'a str {
    s.form.get(name).map(String::as_str).unwrap_or("")
}

fn bearer(s: &Seen, token: &str) -> bool {
    header(s, "authorization") == format!("Bearer {token}")
}

pub(crate) fn serve(s: &Seen) -> HttpResponse {
    let path = s.path.as_str();
    if let Some(rest) = path.strip_prefix("/dev/demo/") {
        return demo(s, rest);
    }
    if let Some(rest) = path.strip_prefix("/rfc/") {
        return rfc(s, rest);
    }
    // Atlassian: the sites a token reaches, each with its cloud id.
    if path == "/atlassian/oauth/token/accessible-resources" {
        if !bearer(s, ATLASSIAN_TOKEN) {
            return json(401, json!({"code": 401, "message": "Unauthorized"}));
        }
        return json(
            200,
            json!([{"id": ATLASSIAN_CLOUD_ID, "url": "https://acme.atlassian.net",
                    "name": "acme", "scopes": ["read:jira-work"]}]),
        );
    }
    json(404, json!({"message": "Not Found"}))
}

fn demo(s: &Seen, rest: &str) -> HttpResponse {
    let basic = format!("Basic {}", STANDARD.encode("demo-client:demo-secret"));
    match rest {
        "token" | "revoke" if header(s, "authorization") != basic => {
            json(401, json!({"error": "invalid_client"}))
        }
        "token" if form(s, "code") == "d-code" => json(
            200,
            json!({"access_token": DEMO_TOKEN, "token_type": "Bearer", "expires_in": 300,
                   "refresh_token": "demo-rt", "scope": "profile"}),
        ),
        "token" => json(400, json!({"error": "invalid_grant"})),
        "revoke" => HttpResponse::Ok().finish(),
        _ if !bearer(s, DEMO_TOKEN) => json(401, json!({"error": "invalid_token"})),
        "api/me" => json(200, json!({"id": "demo-alice", "login": "alice"})),
        "api/echo" => json(
            200,
            json!({"method": s.method, "content_type": header(s, "content-type"),
                   "body": serde_json::from_str::<Value>(&s.body).unwrap_or(Value::Null),
                   "authorization": header(s, "authorization")}),
        ),
        _ => json(404, json!({"error": "not_found"})),
    }
}

fn rfc(s: &Seen, rest: &str) -> HttpResponse {
    // RFC 6749 §2.3.1: form-encode, then join with `:`, then base64.
    let basic = format!("Basic {}", STANDARD.encode("my+client:s3cr%3Aet%25"));
    let client_ok = header(s, "authorization") == basic && !s.form.contains_key("client_secret");
    match rest {
        "token" | "revoke" if !client_ok => json(401, json!({"error": "invalid_client"})),
        "token" if form(s, "code") == "r-code" || form(s, "refresh_token") == "rfc-rt" => json(
            200,
            json!({"access_token": RFC_TOKEN, "token_type": "Bearer", "expires_in": 3600,
                       "refresh_token": "rfc-rt-2"}),
        ),
        "token" if form(s, "refresh_token") == "narrow" => json(
            400,
            json!({"error": "invalid_scope", "error_description": "no scope for narrow here"}),
        ),
        "token" => json(400, json!({"error": "invalid_grant"})),
        "revoke" => HttpResponse::Ok().finish(),
        _ if !bearer(s, RFC_TOKEN) => json(401, json!({"error": "invalid_token"})),
        "userinfo" => json(
            200,
            json!({"sub": "abc-123", "preferred_username": "alice", "email": "alice@example.org"}),
        ),
        "api/v1/big" => HttpResponse::Ok()
            .content_type("text/plain")
            .body("x".repeat(5000)),
        "api/v1/items" => json(200, json!({"query": s.query})),
        _ => json(404, json!({"error": "not_found"})),
    }
}
