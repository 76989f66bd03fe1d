//! Rendering pages, and the one error type of the browser routes. Every page
//! goes out with the security headers and `no-store`; every error is the one
//! `error.html` page with its status. 5xx pages say nothing specific: the
//! cause chain goes to the log.

use actix_web::{HttpResponse, HttpResponseBuilder, ResponseError, http::StatusCode};
use askama::Template;

use super::headers;

/// Why a browser request could not be served. The `Display` text is for the
/// log; what the person sees is `WebError::page`.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("the connect link is unknown, expired, used or declined")]
    LinkGone,
    #[error("CSRF token missing or wrong")]
    Csrf,
    /// A form posted without a session: refused (403; a 401 would owe
    /// an HTTP authentication challenge, and signing in is a page).
    #[error("not signed in")]
    SignedOut,
    /// A page asked for without a session: the browser goes to sign in
    /// and comes back to this local path (`login::safe_return_to`).
    #[error("not signed in; sent to sign in")]
    SignInFirst(String),
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The request is sound but conflicts with what is stored (a label
    /// another of the person's accounts has): nothing was changed.
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// A link or a callback for a provider this server no longer has (the
    /// operator removed it meanwhile).
    #[error("provider no longer configured")]
    ProviderGone,
    /// No page at this address, or none for this method (actix's own
    /// empty 404, given a page).
    #[error("no such page")]
    NotFound,
    /// The request body did not arrive within the deadline.
    #[error("request body not received in time")]
    Timeout,
    /// A sign-in or provider callback that cannot be accepted.
    #[error("flow rejected: {0}")]
    FlowRejected(&'static str),
    #[error("not configured: {0}")]
    NotConfigured(&'static str),
    /// The user's share of new connect links for this minute is used up.
    #[error("too many connect links; next in {0} s")]
    TooManyLinks(u64),
    /// The identity provider or a third-party provider failed.
    #[error("upstream failure: {0:#}")]
    Upstream(anyhow::Error),
    /// [`WebError::Upstream`] in a connect begun on the connections page,
    /// where the person is sent back to start again.
    #[error("upstream failure: {0:#}")]
    UpstreamFromPage(anyhow::Error),
    /// The provider approved, but named a value (an org host, a site) this
    /// server refuses: the sentence for the person, with no value in it.
    #[error("not connected: {0}")]
    NotConnected(String),
    /// A new account was not stored: the person has the most accounts at
    /// the provider this server allows (the sentence for them).
    #[error("too many accounts: {0}")]
    TooManyAccounts(String),
    /// The provider refused the authorization with an error code of its
    /// own (not the person's decline): the sentence for them.
    #[error("authorization refused by the provider: {0}")]
    AuthorizationRefused(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for WebError {
    fn from(e: sqlx::Error) -> Self {
        WebError::Internal(anyhow::Error::new(e).context("database"))
    }
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage<'a> {
    pub signed_in: Option<String>,
    pub status: u16,
    pub title: &'a str,
    pub message: &'a str,
    pub link: Option<(&'a str, &'a str)>,
}

/// Where an error page leads when its error names no better place.
pub const BACK_TO_CONNECTIONS: (&str, &str) = ("/connections", "Go to your connections");

/// What an error page showed, kept on the response so that
/// `error_pages::with_user` can render it again naming who is signed in
/// (an error is rendered without the request).
#[derive(Debug, Clone)]
pub struct ShownError {
    pub status: u16,
    pub title: String,
    pub message: String,
    pub link: (String, String),
}

impl ShownError {
    /// The page again, for `signed_in`.
    pub fn render(&self, signed_in: Option<String>) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        render(
            status,
            &ErrorPage {
                signed_in,
                status: self.status,
                title: &self.title,
                message: &self.message,
                link: Some((&self.link.0, &self.link.1)),
            },
        )
    }
}

impl WebError {
    fn page(&self) -> ErrorPage<'_> {
        let page = |title, message| ErrorPage {
            signed_in: None,
            status: self.status_code().as_u16(),
            title,
            message,
            link: Some(BACK_TO_CONNECTIONS),
        };
        match self {
            WebError::LinkGone => page(
                "This link can't be used",
                "This link has expired or was already used. Go back to your MCP client and try again.",
            ),
            WebError::Csrf => page(
                "This form has expired",
                "The form you sent was out of date or did not come from this site. Go back, reload the page and try again.",
            ),
            WebError::SignedOut | WebError::SignInFirst(_) => ErrorPage {
                link: Some(("/login?return_to=/connections", "Sign in")),
                ..page(
                    "You are signed out",
                    "Your sign-in has ended. Sign in to continue; if you were connecting an account, open its link again: the one your MCP client showed, or Connect on your connections page.",
                )
            },
            WebError::BadRequest(message) => page("This request is not valid", message),
            WebError::Conflict(message) => page("Already in use", message),
            WebError::ProviderGone => page(
                "This link can't be used",
                "This server no longer connects this service. Go back to your MCP client: it can list the services this server connects.",
            ),
            WebError::NotFound => page(
                "Page not found",
                "There is no page at this address. Your connected accounts are on your connections page.",
            ),
            WebError::Timeout => page(
                "This took too long",
                "The form did not arrive in time. Please try again.",
            ),
            WebError::FlowRejected(message) => page("This can't be completed", message),
            WebError::NotConfigured(message) => page("Not available", message),
            WebError::TooManyLinks(_) => page(
                "Too many connect links",
                "Too many connect links were requested for this account in the last minute. Wait a minute and try again.",
            ),
            WebError::NotConnected(message) | WebError::TooManyAccounts(message) => {
                page("The account was not connected", message)
            }
            WebError::AuthorizationRefused(message) => {
                page("The account was not connected", message)
            }
            WebError::Internal(e) if crate::db::faults::is_transient_chain(e) => page(
                "Temporarily unavailable",
                "The service cannot reach its database right now. This is temporary: please try again in a few seconds.",
            ),
            WebError::Upstream(_) => page(
                "The other side did not answer as expected",
                "Signing in or connecting the account failed at the other service. Go back to your MCP client and try again.",
            ),
            WebError::UpstreamFromPage(_) => page(
                "The other side did not answer as expected",
                "Connecting the account failed at the other service. Start again from your connections page.",
            ),
            WebError::Internal(_) => page(
                "Something went wrong",
                "Something went wrong on our side. Please try again in a moment.",
            ),
        }
    }
}

impl ResponseError for WebError {
    fn status_code(&self) -> StatusCode {
        match self {
            WebError::LinkGone => StatusCode::GONE,
            WebError::Csrf => StatusCode::FORBIDDEN,
            WebError::SignedOut => StatusCode::FORBIDDEN,
            WebError::SignInFirst(_) => StatusCode::SEE_OTHER,
            WebError::BadRequest(_) | WebError::FlowRejected(_) => StatusCode::BAD_REQUEST,
            WebError::Conflict(_) | WebError::TooManyAccounts(_) => StatusCode::CONFLICT,
            WebError::NotFound => StatusCode::NOT_FOUND,
            WebError::ProviderGone => StatusCode::GONE,
            WebError::Timeout => StatusCode::REQUEST_TIMEOUT,
            WebError::NotConfigured(_) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::TooManyLinks(_) => StatusCode::TOO_MANY_REQUESTS,
            WebError::Internal(e) if crate::db::faults::is_transient_chain(e) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            WebError::Upstream(_)
            | WebError::UpstreamFromPage(_)
            | WebError::NotConnected(_)
            | WebError::AuthorizationRefused(_) => StatusCode::BAD_GATEWAY,
            WebError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let retry_after = match self {
            WebError::TooManyLinks(secs) => Some((*secs).max(1)),
            WebError::Internal(e) if crate::db::faults::is_transient_chain(e) => {
                Some(RETRY_AFTER_SECS)
            }
            _ => None,
        };
        match self {
            WebError::Internal(e) if retry_after.is_some() => {
                tracing::warn!(error = %format!("{e:#}"), "web: database unavailable")
            }
            WebError::Internal(e) => {
                tracing::error!(error = %format!("{e:#}"), "web: internal error")
            }
            WebError::Upstream(e) | WebError::UpstreamFromPage(e) => {
                tracing::warn!(error = %format!("{e:#}"), "web: upstream failure")
            }
            WebError::NotConfigured(what) => tracing::error!(what, "web: not configured"),
            other => tracing::info!(reason = %other, "web: request refused"),
        }
        if let WebError::SignInFirst(return_to) = self {
            return see_other(&format!("/login?return_to={return_to}"));
        }
        let page = self.page();
        let mut response = render(self.status_code(), &page);
        if let Some(secs) = retry_after {
            response.headers_mut().insert(
                actix_web::http::header::RETRY_AFTER,
                actix_web::http::header::HeaderValue::from(secs),
            );
        }
        let (href, label) = page.link.unwrap_or(BACK_TO_CONNECTIONS);
        response.extensions_mut().insert(ShownError {
            status: page.status,
            title: page.title.to_owned(),
            message: page.message.to_owned(),
            link: (href.to_owned(), label.to_owned()),
        });
        response
    }
}

/// What `Retry-After` says when the database is away for a moment.
pub const RETRY_AFTER_SECS: u64 = 5;

/// An HTML page with the security headers and `no-store`.
pub fn render(status: StatusCode, page: &impl Template) -> HttpResponse {
    let mut builder = HttpResponse::build(status);
    headers::apply(&mut builder);
    match page.render() {
        Ok(body) => builder.content_type("text/html; charset=utf-8").body(body),
        Err(e) => {
            tracing::error!(error = %e, "web: template failed");
            let mut builder = HttpResponse::InternalServerError();
            headers::apply(&mut builder);
            builder
                .content_type("text/plain; charset=utf-8")
                .body("Something went wrong on our side.")
        }
    }
}

/// `303 See Other` to a path on this server or a provider's URL, never
/// cached (the Location may carry one-time values).
pub fn see_other(location: &str) -> HttpResponse {
    see_other_builder(location).finish()
}

/// [`see_other`], open for cookies.
pub fn see_other_builder(location: &str) -> HttpResponseBuilder {
    let mut builder = HttpResponse::SeeOther();
    headers::apply(&mut builder);
    builder.insert_header(("Location", location));
    builder
}

/// A short page: a title, a sentence or two, maybe facts and a link.
#[derive(Template, Default)]
#[template(path = "notice.html")]
pub struct Notice {
    pub signed_in: Option<String>,
    /// `ok`, `danger` or empty: the colour of the title box.
    pub tone: &'static str,
    pub title: String,
    pub lines: Vec<String>,
    pub facts: Vec<(String, String)>,
    pub link: Option<(String, String)>,
}
