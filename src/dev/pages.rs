//! What the dev identity provider and the demo provider share when they
//! answer a browser: a refused authorization request (a page, or a redirect
//! back with an RFC 6749 error), the request carried in hidden fields, and a
//! rendered page that is never cached.

use std::collections::HashMap;

use actix_web::{HttpResponse, http::StatusCode};
use askama::Template;
use url::Url;

use super::params::{is_s256_challenge, parse_form, redirect_back};

/// Which of the two dev servers answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Server {
    Idp,
    Demo,
}

impl Server {
    /// Names the server in a log line when its page fails to render.
    pub(super) fn who(self) -> &'static str {
        match self {
            Server::Idp => "dev identity provider",
            Server::Demo => "demo provider",
        }
    }
}

#[derive(Template)]
#[template(path = "dev/error.html")]
struct ErrorPage<'a> {
    demo: bool,
    message: &'a str,
}

/// The page (400) for a request that cannot be used: nothing is redirected.
pub(super) fn error_page(server: Server, message: &str) -> HttpResponse {
    let page = ErrorPage {
        demo: server == Server::Demo,
        message,
    };
    html(StatusCode::BAD_REQUEST, page.render(), server.who())
}

pub(super) enum Refusal {
    /// Shown to the person; nothing is redirected.
    Page(String),
    /// RFC 6749 §4.1.2.1: sent back to the (checked) redirect URI.
    Redirect {
        to: Box<Url>,
        state: Option<String>,
        error: &'static str,
        description: &'static str,
    },
}

impl Refusal {
    pub(super) fn page(message: impl Into<String>) -> Refusal {
        Refusal::Page(message.into())
    }

    /// The refusal a checked redirect URI gets back, with `state`.
    pub(super) fn redirect(
        to: &Url,
        state: Option<&str>,
        error: &'static str,
        description: &'static str,
    ) -> Refusal {
        Refusal::Redirect {
            to: Box::new(to.clone()),
            state: state.map(str::to_owned),
            error,
            description,
        }
    }

    /// The answer: `server`'s error page, else the redirect with `iss`.
    pub(super) fn answer(self, issuer: &str, server: Server) -> HttpResponse {
        match self {
            Refusal::Page(message) => error_page(server, &message),
            Refusal::Redirect {
                to,
                state,
                error,
                description,
            } => {
                let pairs = [("error", error), ("error_description", description)];
                redirect_back(*to, &pairs, state.as_deref(), issuer)
            }
        }
    }
}

/// An authorization request's parameters (`raw`: the query, or the form
/// the page posted), or what the error page says of one given twice.
pub(super) fn request_params(raw: &[u8]) -> Result<HashMap<String, String>, String> {
    parse_form(raw).map_err(|name| format!("The parameter `{name}` was given more than once."))
}

/// A request parameter; `None` when absent or empty.
pub(super) fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The S256 challenge of a `response_type=code` request (RFC 6749 §4.1.1,
/// RFC 7636 §4.3), or the refusal `back` builds; `s256_rule` is what a
/// request without `code_challenge_method=S256` is told.
pub(super) fn code_challenge<'a>(
    params: &'a HashMap<String, String>,
    back: impl Fn(&'static str, &'static str) -> Refusal,
    s256_rule: &'static str,
) -> Result<&'a str, Refusal> {
    if param(params, "response_type") != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "only response_type=code is supported",
        ));
    }
    if param(params, "code_challenge_method") != Some("S256") {
        return Err(back("invalid_request", s256_rule));
    }
    param(params, "code_challenge")
        .filter(|c| is_s256_challenge(c))
        .ok_or_else(|| {
            back(
                "invalid_request",
                "code_challenge must be a base64url SHA-256 digest",
            )
        })
}

/// The parameters of an authorization code request with PKCE (RFC 6749
/// §4.1.1, RFC 7636 §4.3), which both pages carry to their POST.
const CODE_REQUEST: [&str; 7] = [
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "code_challenge",
    "code_challenge_method",
    "scope",
];

/// The request's parameters to carry in the page's hidden fields: those of
/// a code request, and `extra`.
pub(super) fn hidden_fields<'a>(
    extra: &[&'a str],
    params: &'a HashMap<String, String>,
) -> Vec<(&'a str, &'a str)> {
    CODE_REQUEST
        .iter()
        .chain(extra)
        .filter_map(|name| params.get(*name).map(|value| (*name, value.as_str())))
        .collect()
}

/// A rendered page, or a logged 500 naming `who` when the template failed.
pub(super) fn html(
    status: StatusCode,
    rendered: Result<String, askama::Error>,
    who: &str,
) -> HttpResponse {
    match rendered {
        Ok(body) => HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .insert_header(("Cache-Control", "no-store"))
            .body(body),
        Err(e) => {
            tracing::error!(error = %e, "{who}: template failed");
            HttpResponse::InternalServerError().finish()
        }
    }
}
