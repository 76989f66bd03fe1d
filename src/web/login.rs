//! Signing in: `GET /login?return_to=/path` starts an OpenID Connect
//! authorization code flow (PKCE S256, nonce) at the configured issuer;
//! `GET /auth/callback` finishes it and starts a session.
//!
//! The flow lives in the browser that started it, in a sealed short-lived
//! cookie of its own ([`super::login_state`], [`cookies::login_slot`]): an
//! anonymous visitor costs no database write, and two tabs signing in at
//! once both finish — the second into the session the first started. `return_to` is a local path without a query, so it can never
//! carry a ticket or point elsewhere; a connect link opened before signing
//! in travels as the sealed state's `ticket_id` instead.

use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use chrono::Utc;
use secrecy::ExposeSecret;
use uuid::Uuid;

use super::{
    cookies, forms,
    login_state::{LoginState, MAX_SEALED_LEN},
    oidc,
    pages::{WebError, see_other, see_other_builder},
    session::{self, MaybeUser},
};
use crate::{crypto::secret, db, domain::UserRef, providers::PkcePair, state::AppState};

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
    start(&req, &state, to, None, false).await
}

/// Sends the browser to the identity provider. `ticket_id` is a connect
/// link to come back to; `choose_account` asks the provider to let the
/// person pick another account.
pub async fn start(
    req: &HttpRequest,
    state: &AppState,
    return_to: &str,
    ticket_id: Option<Uuid>,
    choose_account: bool,
) -> Result<HttpResponse, WebError> {
    let flow_state = secret::random_value();
    let cookie_name = cookies::login_slot(&flow_state);
    let nonce = secret::random_value();
    // One PKCE helper for both flows: the sign-in's verifier is sealed in
    // its cookie, the connect flow's on its row.
    let verifier = PkcePair::generate().verifier.expose_secret().to_owned();
    let url = oidc::authorize_url(state, &flow_state, &nonce, &verifier, choose_account).await?;
    let ttl = i64::try_from(cookies::LOGIN_TTL.as_secs()).unwrap_or(600);
    let sealed = LoginState {
        state: flow_state,
        nonce,
        verifier,
        return_to: safe_return_to(Some(return_to)).to_owned(),
        ticket_id,
        expires: Utc::now().timestamp() + ttl,
    }
    .seal(&state.keys)?;
    let mut response = see_other_builder(url.as_str());
    let in_progress = cookies::logins_in_progress(req, &state.settings);
    if in_progress.len() >= cookies::MAX_LOGINS_IN_PROGRESS {
        for stale in in_progress {
            response.cookie(cookies::removal(&state.settings, &stale));
        }
    }
    Ok(response
        .cookie(cookies::build(
            &state.settings,
            &cookie_name,
            sealed,
            cookies::LOGIN_TTL,
        ))
        .finish())
}

async fn callback(
    req: HttpRequest,
    state: web::Data<AppState>,
    current: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let params = forms::query(&req)?;
    let flow_state = params
        .get("state")
        .filter(|s| secret::is_random_value(s))
        .ok_or(WebError::FlowRejected(
            "This sign-in response is incomplete. Please sign in again.",
        ))?;
    // This sign-in's own cookie; else the one name an older version used
    // (a sign-in started before an upgrade).
    let slot = cookies::login_slot(flow_state);
    let (cookie_name, sealed) = [slot.as_str(), cookies::LOGIN]
        .into_iter()
        .find_map(|name| {
            cookies::read_sealed(&req, &state.settings, name, MAX_SEALED_LEN).map(|v| (name, v))
        })
        .unzip();
    let Some(flow) = sealed.and_then(|v| LoginState::open(&state.keys, &v)) else {
        // A reload (or Back) after the sign-in ended: its cookie is gone,
        // but the person is signed in, so there is nothing to refuse.
        if current.0.is_some() {
            tracing::info!("sign-in callback again after signing in; shown the connections");
            return Ok(crate::web::pages::see_other("/connections"));
        }
        tracing::info!("sign-in callback without a (readable) sign-in cookie");
        return Err(WebError::FlowRejected(
            "This sign-in has expired, was already used or was started in another browser. Please sign in again.",
        ));
    };
    if !flow.matches(flow_state) {
        tracing::warn!("sign-in callback from a browser that did not start it");
        return Err(WebError::FlowRejected(
            "This sign-in was started in another browser or tab. Please sign in again.",
        ));
    }
    // This browser's sign-in, answered: whatever comes of it, it is over
    // (a code is single-use), so its cookie goes — on a refusal too, or a
    // browser could replay the callback for as long as the cookie lives.
    let mut response = match finish(&req, &state, current, &params, flow).await {
        Ok(response) => response,
        Err(e) => e.error_response(),
    };
    if let Some(name) = cookie_name {
        response
            .add_cookie(&cookies::removal(&state.settings, name))
            .map_err(|e| WebError::Internal(e.into()))?;
    }
    Ok(response)
}

/// The rest of a callback that belongs to this browser's sign-in `flow`:
/// its checks, the code exchange and the session.
async fn finish(
    req: &HttpRequest,
    state: &AppState,
    current: MaybeUser,
    params: &forms::Params,
    flow: LoginState,
) -> Result<HttpResponse, WebError> {
    let again = "Please sign in again.";
    if flow.expired() {
        tracing::info!("sign-in callback after the flow expired");
        return Err(WebError::FlowRejected(
            "This sign-in took too long. Please sign in again.",
        ));
    }
    // RFC 9207: when the response names its issuer, it must be ours — with
    // the one trailing slash forgiven, as for tokens: a root issuer is
    // spelled with it by some providers (Auth0) and without by others. And
    // a response without `iss`, from an issuer whose metadata promises to
    // send it, is not that issuer's (section 2.4: a mix-up).
    let configured = &state.settings.auth.issuer;
    let from_elsewhere = match params.get("iss") {
        Some(iss) => (!crate::auth::issuer_matches(configured, iss)).then_some("iss mismatch"),
        None => oidc::names_itself_in_responses(state)
            .await?
            .then_some("iss missing, though the issuer promises it"),
    };
    if let Some(why) = from_elsewhere {
        tracing::warn!("sign-in callback from another issuer ({why})");
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
    let LoginState {
        nonce,
        verifier,
        return_to,
        ticket_id,
        ..
    } = flow;
    let identity = oidc::finish(state, code, verifier, &nonce).await?;
    let signed_in_as = UserRef::new(&identity.issuer, &identity.subject);
    let mut cookie = None;
    // Where the browser goes: the link's consent page (its own address,
    // tagged for this session: see `connect::consent_url`), or back.
    let (session_id, newly_pending, to) = match current.0 {
        // Already signed in as this very person (another tab finished its
        // sign-in first): that session goes on, so the other tab's pages
        // and forms stay valid. Nothing is fixed that was not already
        // theirs: a planted session would be someone else's.
        Some(session) if session.is(signed_in_as) => {
            let newly_pending = match ticket_id {
                Some(ticket_id) => {
                    db::web_sessions::set_pending_ticket(
                        &state.db,
                        session.session_id,
                        Some(ticket_id),
                    )
                    .await?
                }
                None => false,
            };
            let to = ticket_id.map(|t| super::connect::consent_url(&session, t));
            (session.session_id, newly_pending, to)
        }
        // Otherwise a fresh session (no fixation); the old one ends.
        other => {
            if let Some(old) = other {
                db::web_sessions::delete(&state.db, old.session_id).await?;
            }
            let (id, csrf_secret, new_cookie) = session::start(state, &identity, ticket_id).await?;
            cookie = Some(new_cookie);
            let to = ticket_id.map(|t| super::connect::consent_url_in(&csrf_secret, t));
            (id, ticket_id.is_some(), to)
        }
    };
    let mut response = see_other_builder(
        to.as_deref()
            .unwrap_or_else(|| safe_return_to(Some(&return_to))),
    );
    if let Some(cookie) = cookie {
        response.cookie(cookie);
    }
    // Signed in as someone other than the person the link was made for:
    // recorded here, once, where the link becomes this session's (the
    // consent page that follows only shows the refusal).
    // The sign-in itself is done by now: a lookup for the audit that fails
    // is logged, not a reason to send the person to sign in once more.
    if newly_pending && let Some(ticket_id) = ticket_id {
        match state.connect.ticket(ticket_id).await {
            Ok(ticket) => {
                if let Some(ticket) = ticket.filter(|t| t.user() != signed_in_as) {
                    super::connect::record_identity_mismatch(
                        state,
                        req,
                        signed_in_as,
                        session_id,
                        &ticket,
                    )
                    .await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "sign-in: the link's ticket could not be read for the audit")
            }
        }
    }
    Ok(response.finish())
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
