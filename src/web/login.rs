//! Signing in: `GET /login?return_to=/path` starts an OpenID Connect
//! authorization code flow (PKCE S256, nonce) at the configured issuer;
//! `GET /auth/callback` finishes it and starts a session.
//!
//! The flow lives in `oauth_flows` (kind `login`): `state` hashed, the
//! verifier sealed, bound to this browser by the hash of a short-lived
//! pre-login cookie, taken (deleted) on first use whatever happens next.
//! `return_to` is a local path without a query, so it can never carry a
//! ticket or point elsewhere; a connect link opened before signing in
//! travels as the flow's `ticket_id` instead.

use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::{
    cookies, forms, oidc,
    pages::{WebError, see_other, see_other_builder},
    secret,
    session::{self, MaybeUser},
};
use crate::{
    crypto::{Purpose, Sealed},
    db::{
        self,
        oauth_flows::{FlowKind, NewFlow},
    },
    startup::AppState,
};

/// Where people land when no (valid) `return_to` is given.
pub const DEFAULT_RETURN: &str = "/connections";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/login", web::get().to(login))
        .route("/auth/callback", web::get().to(callback));
}

/// `return_to` if it is a plain local path (`/a/b-c_d.e`), else the default:
/// no scheme, no `//host`, no backslash, no query or fragment.
pub fn safe_return_to(raw: Option<&str>) -> &str {
    match raw {
        Some(path)
            if path.len() <= 256
                && path.starts_with('/')
                && !path.starts_with("//")
                && path.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.')
                }) =>
        {
            path
        }
        _ => DEFAULT_RETURN,
    }
}

async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let params = forms::query(&req)?;
    let to = safe_return_to(params.get("return_to"));
    if user.0.is_some() {
        return Ok(see_other(to));
    }
    start(&state, to, None, false).await
}

/// Sends the browser to the identity provider. `ticket_id` is a connect
/// link to come back to; `choose_account` asks the provider to let the
/// person pick another account.
pub async fn start(
    state: &AppState,
    return_to: &str,
    ticket_id: Option<Uuid>,
    choose_account: bool,
) -> Result<HttpResponse, WebError> {
    let binding = secret::random_value();
    let flow_state = secret::random_value();
    let nonce = secret::random_value();
    let (verifier, _) = secret::pkce_pair();
    // Ask the provider first: a configuration problem leaves no row behind.
    let url = oidc::authorize_url(state, &flow_state, &nonce, &verifier, choose_account).await?;
    let id = Uuid::new_v4();
    let sealed = state
        .keys
        .seal(Purpose::PkceVerifier, id.as_bytes(), verifier.as_bytes());
    let ttl =
        chrono::Duration::from_std(cookies::LOGIN_TTL).unwrap_or(chrono::Duration::minutes(10));
    db::oauth_flows::insert(
        &state.db,
        NewFlow {
            id,
            state_hash: &secret::sha256(&flow_state),
            kind: FlowKind::Login,
            ticket_id,
            session_id: None,
            browser_binding: Some(&secret::sha256(&binding)),
            provider: None,
            pkce_verifier: &sealed.bytes,
            nonce: Some(&nonce),
            key_id: &sealed.key_id,
            return_to: Some(safe_return_to(Some(return_to))),
            expires_at: Utc::now() + ttl,
        },
    )
    .await?;
    Ok(see_other_builder(url.as_str())
        .cookie(cookies::build(
            &state.settings,
            cookies::LOGIN,
            binding,
            cookies::LOGIN_TTL,
        ))
        .finish())
}

async fn callback(
    req: HttpRequest,
    state: web::Data<AppState>,
    current: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let again = "Please sign in again.";
    let params = forms::query(&req)?;
    let flow_state = params
        .get("state")
        .filter(|s| secret::is_random_value(s))
        .ok_or(WebError::FlowRejected(
            "This sign-in response is incomplete. Please sign in again.",
        ))?;
    // Taken, not read: single use whatever the checks below decide.
    let Some(flow) = db::oauth_flows::take_login(&state.db, &secret::sha256(flow_state)).await?
    else {
        tracing::info!("sign-in callback with an unknown or used state");
        return Err(WebError::FlowRejected(
            "This sign-in has expired or was already used. Please sign in again.",
        ));
    };
    let presented =
        cookies::read(&req, &state.settings, cookies::LOGIN).map(|v| secret::sha256(&v));
    let same_browser = match (&flow.browser_binding, &presented) {
        (Some(expected), Some(presented)) => bool::from(expected.ct_eq(presented)),
        _ => false,
    };
    if !same_browser {
        tracing::warn!(flow = %flow.id, "sign-in callback from a browser that did not start it");
        return Err(WebError::FlowRejected(
            "This sign-in was started in another browser or tab. Please sign in again.",
        ));
    }
    if flow.expires_at <= Utc::now() {
        tracing::info!(flow = %flow.id, "sign-in callback after the flow expired");
        return Err(WebError::FlowRejected(
            "This sign-in took too long. Please sign in again.",
        ));
    }
    // RFC 9207: when the response names its issuer, it must be ours.
    let issuer = crate::auth::configured_issuer(&state.settings.auth.issuer);
    if params.get("iss").is_some_and(|iss| iss != issuer) {
        tracing::warn!(flow = %flow.id, "sign-in callback from another issuer (iss mismatch)");
        return Err(WebError::FlowRejected(
            "This sign-in response came from an unexpected identity provider. Please sign in again.",
        ));
    }
    if let Some(error) = params.get("error") {
        tracing::info!(error = %error.chars().take(64).collect::<String>(), "sign-in refused by the identity provider");
        return Err(WebError::FlowRejected(
            "Signing in was cancelled or refused. Please sign in again.",
        ));
    }
    let code = params.get("code").ok_or(WebError::FlowRejected(again))?;
    let sealed = Sealed {
        key_id: flow.key_id.clone(),
        bytes: flow.pkce_verifier.clone(),
    };
    let verifier = state
        .keys
        .open(Purpose::PkceVerifier, flow.id.as_bytes(), &sealed)
        .map_err(|e| WebError::Internal(anyhow::anyhow!("cannot open the PKCE verifier: {e}")))?;
    let verifier = String::from_utf8(verifier)
        .map_err(|_| WebError::Internal(anyhow::anyhow!("PKCE verifier is not UTF-8")))?;
    let nonce = flow.nonce.as_deref().unwrap_or_default();
    let identity = oidc::finish(&state, code, verifier, nonce).await?;
    // A fresh session on every sign-in (no fixation); the old one ends.
    if let Some(old) = current.0 {
        db::web_sessions::delete(&state.db, old.session_id).await?;
    }
    let cookie = session::start(&state, &identity, flow.ticket_id).await?;
    let to = match flow.ticket_id {
        Some(_) => super::connect::CONSENT_PATH,
        None => safe_return_to(flow.return_to.as_deref()),
    };
    Ok(see_other_builder(to)
        .cookie(cookie)
        .cookie(cookies::removal(&state.settings, cookies::LOGIN))
        .finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_to_is_a_plain_local_path() {
        for ok in ["/connections", "/connect/consent", "/", "/a-b_c.d/e"] {
            assert_eq!(safe_return_to(Some(ok)), ok);
        }
        for bad in [
            "https://evil.example/",
            "//evil.example/x",
            "/\\evil.example",
            "/connect?ticket=abc",
            "/x#frag",
            "connections",
            "/%2F%2Fevil",
            "/a b",
            "",
        ] {
            assert_eq!(safe_return_to(Some(bad)), DEFAULT_RETURN, "{bad}");
        }
        assert_eq!(safe_return_to(None), DEFAULT_RETURN);
    }
}
