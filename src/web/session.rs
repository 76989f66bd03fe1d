//! Browser sessions, kept server-side in `web_sessions`. The cookie holds a
//! random value; a forged, unknown or expired cookie is simply "signed out"
//! (logged at info, never the value). Handlers take [`SignedInUser`] (when
//! absent: a page sends the browser to sign in, a form post gets a 403
//! page) or [`MaybeUser`].

use std::time::Duration;

use actix_web::{FromRequest, HttpRequest, cookie::Cookie, dev::Payload, web};
use futures::future::LocalBoxFuture;
use uuid::Uuid;

use super::{cookies, csrf, forms::Params, pages::WebError};
use crate::crypto::secret;
use crate::domain::UserRef;
use crate::{db, state::AppState};

/// A signed-in browser.
#[derive(Clone)]
pub struct SignedInUser {
    pub session_id: Uuid,
    issuer: String,
    subject: String,
    pub display_name: String,
    /// The connect ticket this browser is looking at (see `/connect`).
    pub pending_ticket_id: Option<Uuid>,
    csrf_secret: Vec<u8>,
}

impl std::fmt::Debug for SignedInUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedInUser")
            .field("session_id", &self.session_id)
            .field("issuer", &self.issuer)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl SignedInUser {
    /// The secret this session's CSRF tokens (and other tags) are made
    /// with.
    pub(crate) fn csrf_secret(&self) -> &[u8] {
        &self.csrf_secret
    }

    /// The CSRF token for the form with `purpose`.
    pub fn csrf_token(&self, purpose: &str) -> String {
        csrf::token(&self.csrf_secret, purpose)
    }

    /// Whether `presented` is this session's token for `purpose`, refusing
    /// nothing: for a link that shows something only when it is genuine.
    pub fn csrf_matches(&self, purpose: &str, presented: Option<&str>) -> bool {
        csrf::verify(&self.csrf_secret, purpose, presented)
    }

    /// Checks the form's CSRF token for `purpose` (403 page when wrong).
    pub fn check_csrf(&self, purpose: &str, form: &Params) -> Result<(), WebError> {
        self.check_csrf_in(csrf::FIELD, purpose, form)
    }

    /// [`Self::check_csrf`] for a token in the form's field `field` (a form
    /// carrying a second token, bound to more than the first).
    pub fn check_csrf_in(&self, field: &str, purpose: &str, form: &Params) -> Result<(), WebError> {
        if csrf::verify(&self.csrf_secret, purpose, form.get(field)) {
            Ok(())
        } else {
            tracing::info!(purpose, session = %self.session_id, "CSRF check failed");
            Err(WebError::Csrf)
        }
    }

    /// The person signed in, for everything that belongs to them.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }

    /// True when this session is `other`.
    pub fn is(&self, other: UserRef<'_>) -> bool {
        self.user() == other
    }
}

/// The signed-in user, if any.
pub struct MaybeUser(pub Option<SignedInUser>);

impl MaybeUser {
    /// The name shown in the page header.
    pub fn display_name(&self) -> Option<String> {
        self.0.as_ref().map(|u| u.display_name.clone())
    }
}

impl FromRequest for MaybeUser {
    type Error = WebError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { load(&req).await.map(MaybeUser) })
    }
}

impl FromRequest for SignedInUser {
    type Error = WebError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { load(&req).await?.ok_or_else(|| signed_out(&req)) })
    }
}

/// Without a session, a page sends the browser to sign in and back to it;
/// a form post is refused (what it carried is not replayed after a
/// sign-in). So is a link's consent page: its address is tagged for the
/// session that ended, and after a new sign-in it would name no link (the
/// page says to open the link from the client again, which still works).
fn signed_out(req: &HttpRequest) -> WebError {
    let a_links_page = req.path() == super::connect::CONSENT_PATH && !req.query_string().is_empty();
    if req.method() == actix_web::http::Method::GET && !a_links_page {
        WebError::SignInFirst(super::login::safe_return_to(Some(req.path())).to_owned())
    } else {
        WebError::SignedOut
    }
}

pub fn app_state(req: &HttpRequest) -> Result<web::Data<AppState>, WebError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| WebError::Internal(anyhow::anyhow!("application state is not mounted")))
}

async fn load(req: &HttpRequest) -> Result<Option<SignedInUser>, WebError> {
    let state = app_state(req)?;
    let Some(value) = cookies::read(req, &state.settings, cookies::SESSION) else {
        return Ok(None);
    };
    let hash = secret::sha256(&value);
    let idle = state.settings.web.session_idle();
    let find = db::web_sessions::find_active_by_hash(&state.db, &hash, idle);
    let found = db::faults::deadline(state.settings.database.deadline(), find).await?;
    let Some(db::web_sessions::FoundSession {
        session: row,
        idle,
        stale,
    }) = found
    else {
        tracing::info!("session cookie matches no active session; treated as signed out");
        return Ok(None);
    };
    if idle {
        tracing::info!(session = %row.id, "session unused for longer than web.session_idle_secs; signed out");
        // Deleted, so that a longer idle time set later does not bring it
        // back; should that fail, it is still refused while idle, and
        // goes at its expiry.
        let delete = db::web_sessions::delete(&state.db, row.id);
        if let Err(e) = db::faults::deadline(state.settings.database.deadline(), delete).await {
            tracing::warn!(error = %e, session = %row.id, "cannot delete an idle session");
        }
        return Ok(None);
    }
    if stale {
        let touch = db::web_sessions::touch(&state.db, row.id);
        if let Err(e) = db::faults::deadline(state.settings.database.deadline(), touch).await {
            // Only bookkeeping: the request goes on.
            tracing::warn!(error = %e, "cannot record session activity");
        }
    }
    Ok(Some(SignedInUser {
        session_id: row.id,
        display_name: row.display_name.unwrap_or_else(|| row.subject.clone()),
        issuer: row.issuer,
        subject: row.subject,
        pending_ticket_id: row.pending_ticket_id,
        csrf_secret: row.csrf_secret,
    }))
}

/// Starts a session for a person who just signed in; returns its id and
/// cookie. `pending_ticket_id` carries a connect link opened before
/// signing in.
/// A new session for `identity`: its id, its CSRF secret (for the first
/// address it is sent to) and its cookie.
pub async fn start(
    state: &AppState,
    identity: &super::oidc::Identity,
    pending_ticket_id: Option<Uuid>,
) -> Result<(Uuid, Vec<u8>, Cookie<'static>), WebError> {
    let value = secret::random_value();
    let ttl = Duration::from_secs(state.settings.web.session_ttl_secs);
    let id = Uuid::new_v4();
    let csrf_secret = secret::random_bytes();
    db::web_sessions::insert(
        &state.db,
        db::web_sessions::NewWebSession {
            id,
            id_hash: &secret::sha256(&value),
            user: UserRef::new(&identity.issuer, &identity.subject),
            display_name: Some(&identity.display_name),
            csrf_secret: &csrf_secret,
            ttl,
            pending_ticket_id,
        },
    )
    .await?;
    tracing::info!(session = %id, subject = %identity.subject, "signed in");
    Ok((
        id,
        csrf_secret.to_vec(),
        cookies::build(&state.settings, cookies::SESSION, value, ttl),
    ))
}
