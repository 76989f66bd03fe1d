//! Request and response helpers the three fakes share.

use std::collections::BTreeMap;

use actix_web::{
    HttpRequest, HttpResponse,
    body::{EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
    web,
};
use base64::{Engine, engine::general_purpose::STANDARD};
use percent_encoding::percent_decode_str;
use serde_json::Value;
use url::{Host, Url};

/// Answers every request with the status a test set (`fail_with`), or the
/// next few (`fail_next`), before any route sees it; holds each while the
/// fake is stalled.
pub(super) async fn failing(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let shared = req.app_data::<web::Data<super::state::Shared>>().cloned();
    let mut held = None;
    while let Some(stalled) = shared.as_ref().filter(|s| s.memory().stalled) {
        held.get_or_insert_with(|| Held::count(stalled.clone()));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let held = held.is_some();
    // As a hung balancer's: what it held is never served, even if its
    // client is still there to hear (a client gone must not have it done).
    if held {
        let response = HttpResponse::GatewayTimeout().body("stalled on purpose");
        return Ok(req.into_response(response).map_into_right_body());
    }
    let status = req
        .app_data::<web::Data<super::state::Shared>>()
        .and_then(|shared| {
            let mut memory = shared.memory();
            match memory.fail_next {
                Some((left, status)) if left > 0 => {
                    memory.fail_next = (left > 1).then_some((left - 1, status));
                    Some(status)
                }
                _ => memory.fail_at.get(req.path()).copied().or(memory.fail_with),
            }
        });
    if let Some(status) = status {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let response = HttpResponse::build(code).body("failing on purpose");
        return Ok(req.into_response(response).map_into_right_body());
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_left_body)
}

/// A request `stall` holds, counted while it is (also when its client
/// goes away and the request with it).
struct Held(web::Data<super::state::Shared>);

impl Held {
    fn count(shared: web::Data<super::state::Shared>) -> Self {
        shared.memory().held += 1;
        Self(shared)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.memory().held -= 1;
    }
}

/// Query parameters, then form-body parameters over them (GitHub and
/// Slack accept either place).
pub(super) fn params(req: &HttpRequest, body: &[u8]) -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> =
        url::form_urlencoded::parse(req.query_string().as_bytes())
            .into_owned()
            .collect();
    let is_form = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        all.extend(url::form_urlencoded::parse(body).into_owned());
    }
    all
}

pub(super) fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The credentials of `Authorization: <scheme> <value>` for any of `schemes`
/// (compared case-insensitively).
pub(super) fn credentials<'a>(req: &'a HttpRequest, schemes: &[&str]) -> Option<&'a str> {
    let (scheme, value) = header(req, "authorization")?.split_once(' ')?;
    schemes
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
        .then(|| value.trim())
}

/// `client_id` and `client_secret` from HTTP Basic (RFC 6749 §2.3.1,
/// form-encoded inside) or else from the parameters.
pub(super) fn client(
    req: &HttpRequest,
    params: &BTreeMap<String, String>,
) -> (Option<String>, Option<String>) {
    let decode = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    let basic = credentials(req, &["basic"])
        .and_then(|b| STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    if let Some((id, secret)) = basic.as_deref().and_then(|b| b.split_once(':')) {
        return (decode(id), decode(secret));
    }
    (
        params.get("client_id").cloned(),
        params.get("client_secret").cloned(),
    )
}

/// A redirect URI the fakes accept: http(s) on a loopback host, which is
/// where the app under test listens. (The real providers compare it with
/// the registered callback, which a test cannot know before the app binds.)
pub(super) fn loopback_redirect(raw: Option<&String>) -> Option<Url> {
    let url = Url::parse(raw?).ok()?;
    let loopback = match url.host()? {
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
        Host::Domain(d) => d == "localhost",
    };
    (matches!(url.scheme(), "http" | "https") && loopback && url.fragment().is_none())
        .then_some(url)
}

/// A 302 to `to` with `pairs` added to its query.
pub(super) fn redirect(mut to: Url, pairs: &[(&str, &str)]) -> HttpResponse {
    to.query_pairs_mut().extend_pairs(pairs);
    HttpResponse::Found()
        .insert_header(("Location", to.as_str()))
        .finish()
}

pub(super) fn json(status: u16, body: Value) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .json(body)
}

/// The error page a provider shows instead of redirecting to a client it
/// cannot trust.
pub(super) fn page(status: u16, message: &str) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST))
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<!doctype html><title>Error</title><p>{message}</p>"
        ))
}
