//! A fake GitHub (OAuth app): `/login/oauth/authorize` approves at once,
//! `/login/oauth/access_token` answers form-encoded unless the request's
//! Accept asks for JSON, reports errors with HTTP 200, sends no `expires_in`
//! and no refresh token (OAuth app tokens do not expire), and checks the
//! PKCE S256 verifier when the authorize request carried a challenge.
//! `/user` wants a User-Agent (403 without) and a `Bearer` or `token`
//! credential.
//!
//! With an access-token lifetime set (`set_access_ttl`) it plays a GitHub
//! App with expiring user tokens instead: answers carry `expires_in`, a
//! `ghr_` refresh token and an empty `scope`, and a refresh rotates both
//! tokens. `answer_form_encoded(true)` makes token answers form-encoded
//! whatever the Accept header says. The REST API beside `/user`:
//! `/user/repos`, `/repos/{owner}/{repo}`, and its `tarball`, a redirect to
//! a download URL carrying a short-lived token. `/applications/…`: the
//! app's management of its users' tokens (`github_applications`).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{
    FakeProvider, Kind,
    http::{client, credentials, header, json, loopback_redirect, page, params, redirect},
    serve,
    state::{Account, Counters, Shared, pkce_matches, random},
};

pub(super) const DOCS: &str = "https://docs.github.com/rest";
const TROUBLESHOOTING: &str = "https://docs.github.com/apps/managing-oauth-apps";

pub async fn start() -> FakeProvider {
    let account = Account {
        id: "583231".into(),
        login: "octocat".into(),
    };
    let shared = Shared::new("Iv1.fake0github0client", account, None);
    serve(Kind::Github, shared, routes).await
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/login/oauth/authorize", web::get().to(authorize))
        .route("/login/oauth/access_token", web::post().to(access_token))
        .route("/user", web::get().to(user))
        .route("/user/repos", web::get().to(repos))
        .route("/repos/{owner}/{repo}", web::get().to(repo))
        .route("/repos/{owner}/{repo}/tarball", web::get().to(repo))
        .configure(super::github_applications::routes)
        .configure(super::hostile::routes)
        .default_service(web::to(not_found));
}

async fn authorize(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.authorize);
    let p = params(&req, &[]);
    if p.get("client_id") != Some(&fake.client_id) {
        return page(404, "Not Found");
    }
    let Some(back) = loopback_redirect(p.get("redirect_uri")) else {
        return page(
            400,
            "The redirect_uri is not associated with this application.",
        );
    };
    let state = p.get("state").cloned().unwrap_or_default();
    if p.contains_key("code_challenge")
        && p.get("code_challenge_method").map(String::as_str) != Some("S256")
    {
        let pairs = [
            ("error", "invalid_request"),
            (
                "error_description",
                "Only S256 is supported as code_challenge_method.",
            ),
            ("state", state.as_str()),
        ];
        return redirect(back, &pairs);
    }
    // GitHub codes are 20 hexadecimal characters.
    let code = random("")[..20].to_owned();
    let denied_uri =
        format!("{TROUBLESHOOTING}/troubleshooting-authorization-request-errors/#access-denied");
    match fake.memory().authorize(p, code) {
        Some(code) => redirect(back, &[("code", &code), ("state", &state)]),
        None => redirect(
            back,
            &[
                ("error", "access_denied"),
                (
                    "error_description",
                    "The user has denied your application access.",
                ),
                ("error_uri", &denied_uri),
                ("state", &state),
            ],
        ),
    }
}

async fn access_token(req: HttpRequest, body: web::Bytes, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.token);
    let p = params(&req, &body);
    let answer = exchange(&p, client(&req, &p), &fake);
    // GitHub's default answer is form-encoded; JSON only when asked for.
    let wants_json = header(&req, "accept").is_some_and(|a| a.contains("application/json"))
        && !fake.memory().form_answers;
    if wants_json {
        let map = answer
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        return json(200, Value::Object(map));
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&answer)
        .finish();
    HttpResponse::Ok()
        .content_type("application/x-www-form-urlencoded; charset=utf-8")
        .body(body)
}

/// The answer's fields; errors too are an HTTP 200 answer.
fn exchange(
    p: &std::collections::BTreeMap<String, String>,
    (id, secret): (Option<String>, Option<String>),
    fake: &Shared,
) -> Vec<(&'static str, String)> {
    let error = |code: &'static str, description: &str| {
        vec![
            ("error", code.to_owned()),
            ("error_description", description.to_owned()),
            (
                "error_uri",
                format!("{TROUBLESHOOTING}/troubleshooting-oauth-app-access-token-request-errors"),
            ),
        ]
    };
    if id.as_ref() != Some(&fake.client_id) || secret.as_ref() != Some(&fake.client_secret) {
        return error(
            "incorrect_client_credentials",
            "The client_id and/or client_secret passed are incorrect.",
        );
    }
    let mut memory = fake.memory();
    let app_ttl = memory.access_ttl;
    if p.get("grant_type").map(String::as_str) == Some("refresh_token") {
        Counters::bump(&fake.calls.refresh);
        // Only a GitHub App's expiring user tokens refresh, and rotate.
        let found = app_ttl.and_then(|ttl| Some((ttl, memory.refresh_param(p)?)));
        let Some((ttl, (given, grant, account, scope))) = found else {
            return error(
                "bad_refresh_token",
                "The refresh token passed is incorrect or expired.",
            );
        };
        memory.take_refresh(&given);
        let token = memory.issue_access(grant, &account, &scope, "ghu_");
        return app_answer(&mut memory, grant, &account, token, ttl);
    }
    let code = p.get("code").map(String::as_str).unwrap_or_default();
    let Some(code) = memory.take_code(code) else {
        return error(
            "bad_verification_code",
            "The code passed is incorrect or expired.",
        );
    };
    if p.get("redirect_uri")
        .is_some_and(|r| Some(r.as_str()) != code.param("redirect_uri"))
    {
        return error(
            "redirect_uri_mismatch",
            "The redirect_uri MUST match the registered callback URL for this application.",
        );
    }
    if let Some(challenge) = code.param("code_challenge") {
        let verifier = p
            .get("code_verifier")
            .map(String::as_str)
            .unwrap_or_default();
        if !pkce_matches("S256", challenge, verifier) {
            return error(
                "bad_verification_code",
                "The code_verifier does not match the code_challenge.",
            );
        }
    }
    // GitHub grants the requested scopes and lists them with commas.
    let scope = code
        .param("scope")
        .unwrap_or_default()
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(",");
    let grant = memory.new_grant();
    if let Some(ttl) = app_ttl {
        let token = memory.issue_access(grant, &code.account, &scope, "ghu_");
        return app_answer(&mut memory, grant, &code.account, token, ttl);
    }
    let token = memory.issue_access(grant, &code.account, &scope, "gho_");
    vec![
        ("access_token", token),
        ("scope", scope),
        ("token_type", "bearer".to_owned()),
    ]
}

/// A GitHub App's answer: an expiring user token, its rotating refresh
/// token (six months), and no scopes (an App's permissions are its own).
fn app_answer(
    memory: &mut crate::state::Memory,
    grant: u64,
    account: &Account,
    token: String,
    ttl: std::time::Duration,
) -> Vec<(&'static str, String)> {
    let refresh = memory.issue_refresh(grant, account, "", "ghr_");
    vec![
        ("access_token", token),
        ("expires_in", ttl.as_secs().to_string()),
        ("refresh_token", refresh),
        ("refresh_token_expires_in", "15811200".to_owned()),
        ("scope", String::new()),
        ("token_type", "bearer".to_owned()),
    ]
}

/// GitHub's answer to a request without a User-Agent.
const NO_USER_AGENT: &str = "Request forbidden by administrative rules. Please make sure your \
    request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). \
    Check https://developer.github.com for other possible causes.\n";

/// GitHub's refusal of an API request without a User-Agent, if it is one.
pub(super) fn no_user_agent(req: &HttpRequest) -> Option<HttpResponse> {
    header(req, "user-agent")
        .is_none_or(str::is_empty)
        .then(|| {
            HttpResponse::Forbidden()
                .content_type("text/plain")
                .body(NO_USER_AGENT)
        })
}

/// The account and scopes behind the request, or GitHub's refusal.
fn authenticated(req: &HttpRequest, fake: &Shared) -> Result<(Account, String), Box<HttpResponse>> {
    if let Some(forbidden) = no_user_agent(req) {
        return Err(Box::new(forbidden));
    }
    let refusal = |message: &str| {
        let body = json!({"message": message, "documentation_url": DOCS, "status": "401"});
        Err(Box::new(json(401, body)))
    };
    let Some(token) = credentials(req, &["bearer", "token"]) else {
        return refusal("Requires authentication");
    };
    match fake.memory().access(token) {
        Some(access) => Ok((access.account, access.scope)),
        None => refusal("Bad credentials"),
    }
}

async fn user(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.userinfo);
    let (account, scope) = match authenticated(&req, &fake) {
        Ok(found) => found,
        Err(refusal) => return *refusal,
    };
    let id: Value = account
        .id
        .parse::<u64>()
        .map_or_else(|_| json!(account.id), |n| json!(n));
    HttpResponse::Ok()
        .insert_header(("X-OAuth-Scopes", scope.replace(',', ", ")))
        .json(json!({
            "login": account.login,
            "id": id,
            "type": "User",
            "name": "The Octocat",
            "html_url": format!("https://github.com/{}", account.login),
        }))
}

async fn repos(req: HttpRequest, fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    let (account, _) = match authenticated(&req, &fake) {
        Ok(found) => found,
        Err(refusal) => return *refusal,
    };
    let full_name = format!("{}/Hello-World", account.login);
    json(
        200,
        json!([{"id": 1296269, "name": "Hello-World", "full_name": full_name, "private": false,
                "owner": {"login": account.login}}]),
    )
}

/// A repository, or (`…/tarball`) a redirect to its archive, whose URL
/// carries a short-lived token.
async fn repo(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    fake: web::Data<Shared>,
) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    if let Err(refusal) = authenticated(&req, &fake) {
        return *refusal;
    }
    let (owner, name) = path.into_inner();
    if req.path().ends_with("/tarball") {
        let to = format!(
            "https://codeload.github.com/{owner}/{name}/legacy.tar.gz/refs/heads/main?token={}",
            random("A")
        );
        return HttpResponse::Found()
            .insert_header(("Location", to))
            .finish();
    }
    json(
        200,
        json!({"id": 1296269, "name": name, "full_name": format!("{owner}/{name}"),
               "private": false, "owner": {"login": owner}, "default_branch": "main"}),
    )
}

async fn not_found(fake: web::Data<Shared>) -> HttpResponse {
    Counters::bump(&fake.calls.api);
    json(
        404,
        json!({"message": "Not Found", "documentation_url": DOCS, "status": "404"}),
    )
}
