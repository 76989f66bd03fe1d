//! What the scripted fake answers. Modelled on the providers'
//! documented behaviour: GitHub answers form-encoded unless asked for JSON
//! and reports token errors with HTTP 200; Google sends no new refresh token
//! on refresh and `invalid_grant` with HTTP 400; Slack nests the user token
//! under `authed_user` and reports errors as `{"ok": false}` with HTTP 200.

use actix_web::HttpResponse;
use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use crate::{http::json, scripted::Seen};

pub const GITHUB_TOKEN: &str = "gho_SECRET16C7e42F292c6912E7710c8";
pub const GOOGLE_TOKEN: &str = "ya29.SECRET-a0AfH6SMC";
pub const SLACK_TOKEN: &str = "xoxp-SECRET-1234-5678";
pub const DEMO_TOKEN: &str = "demo-at-SECRET-77";
pub const RFC_TOKEN: &str = "rfc-at-SECRET-99";
pub const ATLASSIAN_TOKEN: &str = "atl-at-SECRET";
pub const ATLASSIAN_CLOUD_ID: &str = "11223344-a1b2-3b33-c444-def123456789";

fn form_answer(pairs: &[(&str, &str)]) -> HttpResponse {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    HttpResponse::Ok()
        .content_type("application/x-www-form-urlencoded; charset=utf-8")
        .body(body)
}

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
    if let Some(rest) = path.strip_prefix("/github/") {
        return github(s, rest);
    }
    if let Some(rest) = path.strip_prefix("/google/") {
        return google(s, rest);
    }
    if let Some(rest) = path.strip_prefix("/slack/api/") {
        return slack(s, rest);
    }
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

fn github(s: &Seen, rest: &str) -> HttpResponse {
    match rest {
        "token" | "token-form-only" => {
            let pairs: Vec<(&str, &str)> = if form(s, "client_secret") != "gh-secret" {
                vec![("error", "incorrect_client_credentials")]
            } else if form(s, "grant_type") == "authorization_code" && form(s, "code") == "gh-code"
            {
                vec![
                    ("access_token", GITHUB_TOKEN),
                    ("scope", "repo,read:user"),
                    ("token_type", "bearer"),
                ]
            } else if form(s, "grant_type") == "refresh_token"
                && form(s, "refresh_token") == "ghr_live"
            {
                vec![
                    ("access_token", "ghu_NEW"),
                    ("expires_in", "28800"),
                    ("refresh_token", "ghr_next"),
                    ("refresh_token_expires_in", "15811200"),
                    ("scope", ""),
                    ("token_type", "bearer"),
                ]
            } else if form(s, "grant_type") == "refresh_token" {
                vec![("error", "bad_refresh_token")]
            } else {
                vec![
                    ("error", "bad_verification_code"),
                    (
                        "error_description",
                        "The code passed is incorrect or expired.",
                    ),
                ]
            };
            // Errors too come with HTTP 200.
            if rest == "token" && header(s, "accept").contains("application/json") {
                let map: serde_json::Map<String, Value> = pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                json(200, Value::Object(map))
            } else {
                form_answer(&pairs)
            }
        }
        _ if header(s, "user-agent").is_empty() => HttpResponse::Forbidden()
            .body("Request forbidden by administrative rules. Please make sure your request has a User-Agent header"),
        _ if !bearer(s, GITHUB_TOKEN) => json(401, json!({"message": "Bad credentials"})),
        "user" => json(200, json!({"login": "octocat", "id": 583231, "name": "The Octocat"})),
        "api/repos/octocat/hello" => json(
            200,
            json!({"full_name": "octocat/hello", "accept": header(s, "accept"),
                   "api_version": header(s, "x-github-api-version"), "query": s.query}),
        ),
        "api/tarball" => HttpResponse::Found()
            .insert_header((
                "location",
                "https://codeload.example.com/octocat/hello/tar.gz?token=DLTOKEN123",
            ))
            .finish(),
        "api/echo-auth" => HttpResponse::Ok()
            .content_type("text/plain")
            .body(format!("you sent {}", header(s, "authorization"))),
        _ => json(404, json!({"message": "Not Found"})),
    }
}

fn google(s: &Seen, rest: &str) -> HttpResponse {
    let client_ok = form(s, "client_id") == "g-client" && form(s, "client_secret") == "g-secret";
    match rest {
        "token" if !client_ok => json(401, json!({"error": "invalid_client"})),
        "token" if form(s, "grant_type") == "authorization_code" => {
            if form(s, "code") == "g-code" && !form(s, "code_verifier").is_empty() {
                json(
                    200,
                    json!({"access_token": GOOGLE_TOKEN, "expires_in": 3599,
                           "refresh_token": "1//g-refresh", "token_type": "Bearer",
                           "scope": "openid https://www.googleapis.com/auth/userinfo.email",
                           "id_token": "e30.e30.sig"}),
                )
            } else {
                json(
                    400,
                    json!({"error": "invalid_grant", "error_description": "Malformed auth code."}),
                )
            }
        }
        "token" if form(s, "refresh_token") == "1//g-refresh" => json(
            200,
            json!({"access_token": "ya29.FRESH", "expires_in": 3599, "token_type": "Bearer",
                   "scope": "openid https://www.googleapis.com/auth/userinfo.email"}),
        ),
        "token" => json(
            400,
            json!({"error": "invalid_grant", "error_description": "Token has been expired or revoked."}),
        ),
        "revoke" if [GOOGLE_TOKEN, "1//g-refresh"].contains(&form(s, "token")) => {
            json(200, json!({}))
        }
        "revoke" => json(
            400,
            json!({"error": "invalid_token", "error_description": "Token expired or revoked"}),
        ),
        "userinfo" if bearer(s, GOOGLE_TOKEN) => json(
            200,
            json!({"sub": "110169484474386276334", "email": "alice@example.com",
                   "email_verified": true, "name": "Alice"}),
        ),
        _ => json(401, json!({"error": "invalid_request"})),
    }
}

fn slack(s: &Seen, rest: &str) -> HttpResponse {
    let fail = |error: &str| json(200, json!({"ok": false, "error": error}));
    match rest {
        "oauth.v2.access" if form(s, "client_secret") != "s-secret" => fail("bad_client_secret"),
        "oauth.v2.access" if form(s, "grant_type") == "refresh_token" => {
            if form(s, "refresh_token") == "xoxe-live" {
                json(
                    200,
                    json!({"ok": true, "access_token": "xoxe.xoxp-NEW", "expires_in": 43200,
                           "refresh_token": "xoxe-next", "token_type": "user",
                           "scope": "channels:read"}),
                )
            } else {
                fail("invalid_refresh_token")
            }
        }
        "oauth.v2.access" if ["s-code", "s-code-rotating"].contains(&form(s, "code")) => {
            let mut user = json!({"id": "U0ALICE", "scope": "channels:read,chat:write",
                                  "access_token": SLACK_TOKEN, "token_type": "user"});
            if form(s, "code") == "s-code-rotating" {
                user["refresh_token"] = json!("xoxe-1-user");
                user["expires_in"] = json!(43200);
            }
            json(
                200,
                json!({"ok": true, "app_id": "A0KRD7HC3", "authed_user": user,
                       "scope": "commands", "token_type": "bot", "access_token": "xoxb-BOT",
                       "bot_user_id": "U0BOT", "team": {"id": "T9TK3CUKW", "name": "Acme"},
                       "enterprise": null, "is_enterprise_install": false}),
            )
        }
        "oauth.v2.access" => fail("invalid_code"),
        _ if !bearer(s, SLACK_TOKEN) => fail("invalid_auth"),
        "auth.test" => json(
            200,
            json!({"ok": true, "url": "https://acme.slack.com/", "team": "Acme",
                   "user": "alice", "team_id": "T9TK3CUKW", "user_id": "U0ALICE"}),
        ),
        "conversations.list" => json(200, json!({"ok": true, "channels": []})),
        _ => fail("unknown_method"),
    }
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
